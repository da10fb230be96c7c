"""Rules of one small database for the GC rule tests: built by
:func:`slatelib.core.gc_plan.build_rules` from manifests, as a GC run builds them."""

from __future__ import annotations

from slatelib.core.compactions import CompactionStatus
from slatelib.core.gc_plan import CompactionsState, LiveSet, build_rules
from slatelib.core.gc_rules import GcOptions, GcRules
from slatelib.paths import DbPaths
from tests.unit.gc_support import HOUR, MIN, compactions, manifest, ulid_at

NOW = 1_795_000_000_000
OLD = NOW - 2 * HOUR
P = DbPaths.of("t/db")
OPTS = GcOptions(min_age_s=300)


def rules_for(live: LiveSet, comp: CompactionsState | None = None, **kw: object) -> GcRules:
    if comp is None:
        comp = CompactionsState(7, compactions((ulid_at(NOW - 30 * MIN), CompactionStatus.COMPLETED)))
    return build_rules("t/db", live, comp, now_ms=NOW, options=kw.pop("options", OPTS), **kw)  # type: ignore[arg-type]


def simple_live(**kw: object) -> LiveSet:
    m = manifest(l0=[ulid_at(NOW - 20 * MIN)], replay_after=20, last_seen=25, **kw)  # type: ignore[arg-type]
    return LiveSet(42, m)
