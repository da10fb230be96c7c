"""Per-directory options in the decisions (slatelib.core.gc_rules.objects.decide): each
kind's min_age, a directory's dry run and a disabled directory."""

from __future__ import annotations

from slatelib.core.gc_rules import Action, DirOptions, GcOptions, ObjectKind, decide
from tests.unit.core.gc_rules.support import NOW, P, rules_for, simple_live
from tests.unit.gc_support import HOUR, MIN, ulid_at

K = ObjectKind


def opts(*, dry_run: bool = False, **dirs: DirOptions) -> GcOptions:
    return GcOptions(min_age_s=300, dry_run=dry_run,
                     directories=tuple((K(k), v) for k, v in dirs.items()))


def test_each_kind_is_aged_by_its_own_min_age() -> None:
    r = rules_for(simple_live(), options=opts(
        wal=DirOptions(min_age_s=2 * HOUR / 1000), manifest=DirOptions(min_age_s=60),
        wal_fence=DirOptions(min_age_s=3 * HOUR / 1000, dry_run=False)))
    d = decide(r, P.wal(19), 10, NOW - HOUR)
    assert d.action is Action.KEEP and "(min_age 2h00m)" in d.reason
    assert decide(r, P.wal(19), 10, NOW - 3 * HOUR).action is Action.DELETE
    fence = decide(r, P.wal(18), 0, NOW - 150 * MIN)
    assert fence.action is Action.KEEP and "(min_age 3h00m)" in fence.reason
    assert decide(r, P.wal(18), 0, NOW - 4 * HOUR).action is Action.DELETE
    m = decide(r, P.manifest(40), 10, NOW - 2 * MIN)
    assert m.action is Action.DELETE and "(min_age 1m)" in m.reason
    c = decide(r, P.compactions(3), 10, NOW - 2 * MIN)  # the default, 5 minutes
    assert c.action is Action.KEEP and "(min_age 5m)" in c.reason


def test_the_compacted_cutoff_uses_the_compacted_min_age() -> None:
    r = rules_for(simple_live(), options=opts(compacted=DirOptions(min_age_s=HOUR / 1000)))
    assert r.compacted.min_age_ms == NOW - HOUR
    old, young = ulid_at(NOW - 2 * HOUR), ulid_at(NOW - 40 * MIN)
    assert decide(r, P.compacted(old), 10, NOW - 2 * HOUR).action is Action.DELETE
    d = decide(r, P.compacted(young), 10, NOW - 2 * HOUR)
    assert d.action is Action.KEEP and "within min_age 1h00m" in d.reason


def test_a_dry_directory_keeps_what_it_would_delete_and_says_so() -> None:
    r = rules_for(simple_live(), options=opts(wal=DirOptions(dry_run=True)))
    d = decide(r, P.wal(19), 10, NOW - HOUR)
    assert d.action is Action.KEEP
    assert d.reason.startswith("kept: GC of wal/ is a dry run (wal_options dry_run); it would "
                               "delete: WAL 19 is below replay_after_wal_id 20")
    assert decide(r, P.manifest(40), 10, NOW - HOUR).action is Action.DELETE
    whole = rules_for(simple_live(), options=opts(dry_run=True), whole_dry_run=True)
    assert decide(whole, P.wal(19), 10, NOW - HOUR).action is Action.DELETE  # "would delete"
    real = rules_for(simple_live(), options=opts(dry_run=True, manifest=DirOptions(dry_run=False)))
    assert decide(real, P.wal(19), 10, NOW - HOUR).action is Action.KEEP
    assert decide(real, P.manifest(40), 10, NOW - HOUR).action is Action.DELETE


def test_a_disabled_directory_keeps_everything() -> None:
    r = rules_for(simple_live(), options=opts(compacted=DirOptions(enabled=False),
                                              wal_fence=DirOptions(enabled=False)))
    d = decide(r, P.compacted(ulid_at(NOW - 3 * HOUR)), 10, NOW - 3 * HOUR)
    assert (d.action, d.reason) == (
        Action.KEEP, "kept: GC of compacted/ is disabled (compacted_options enabled = false)")
    f = decide(r, P.wal(18), 0, NOW - 3 * HOUR)
    assert f.action is Action.KEEP and "GC of WAL fences is disabled" in f.reason
    assert decide(r, P.wal(18), 10, NOW - 3 * HOUR).action is Action.DELETE
