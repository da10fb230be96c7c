"""Compaction planning: which sources to merge and which sorted run receives them. Pure.

Policies (``--policy``):

- ``l0``: every L0 view into a new sorted run;
- ``full``: every L0 view and every sorted run into one bottom run (the lowest run id, or a
  new run when there is none);
- ``size-tiered``: 0.17.0's size-tiered scheduler (:mod:`slatelib.core.size_tiered`) with
  its defaults and option names;
- ``sources``: an explicit list (``--sources l0:<ULID>,sr:<id>``).

Run ids and ordering follow 0.17.0 (``compactor.rs`` / ``size_tiered_compaction.rs``): a
compaction's sources are consecutive in the order [L0 newest -> oldest, runs by descending
id]; with runs among them the destination is the lowest of their ids, otherwise a fresh id
above every committed run and every in-flight destination. slatelib adds one rule 0.17 does
not check: L0 sources must include the oldest L0 view, because writers drop every L0 older
than ``last_compacted_l0_sst_view_id`` when they merge the compactor's manifest.

The output run is the bottom of the tree (``bottom``: tombstones may be dropped) when the
tree has no sorted run or the destination is its last one (0.17's ``is_dest_last_run``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from slatelib.core.compaction_source import (
    SourceId,
    estimate_run_size,
    estimate_view_size,
    logical_sources,
)
from slatelib.core.compactions import (
    Compaction,
    Compactions,
    CompactionStatus,
    TieredCompactionSpec,
)
from slatelib.core.manifest import Manifest, SortedRun, SstView
from slatelib.core.size_tiered import SizedSource, SizeTieredOptions, pick_size_tiered
from slatelib.errors import InvalidArgumentError, InvalidDbStateError, UnsupportedFeatureError

ACTIVE_STATUSES = frozenset({
    CompactionStatus.SUBMITTED, CompactionStatus.SCHEDULED, CompactionStatus.RUNNING,
    CompactionStatus.COMPACTED,
})
"""0.17's ``CompactionStatus::active()``: not yet Completed or Failed."""


class Policy(StrEnum):
    L0 = "l0"
    FULL = "full"
    SIZE_TIERED = "size-tiered"
    SOURCES = "sources"

    @staticmethod
    def parse(text: str) -> Policy:
        """Raises:
        InvalidArgumentError: an unknown policy name."""
        try:
            return Policy(text.strip().lower().replace("_", "-"))
        except ValueError:
            names = ", ".join(p.value for p in Policy)
            raise InvalidArgumentError(
                f"unknown compaction policy {text!r} (known: {names})") from None


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """What to compact: a policy (and its options) or explicit ``sources``."""

    policy: Policy = Policy.L0
    size_tiered: SizeTieredOptions = field(default_factory=SizeTieredOptions)
    sources: tuple[SourceId, ...] = ()

    def __post_init__(self) -> None:
        if self.policy == Policy.SOURCES and not self.sources:
            raise InvalidArgumentError("the 'sources' policy needs at least one source")
        if self.sources and self.policy != Policy.SOURCES:
            raise InvalidArgumentError(
                f"explicit sources cannot be combined with the {self.policy.value!r} policy")


@dataclass(frozen=True)
class CompactionSpec:
    """One logical compaction: its inputs as they are in the base manifest, its output run,
    and the retention parameters 0.17 derives from that manifest."""

    policy: Policy
    sources: tuple[SourceId, ...]
    destination: int
    l0_views: tuple[SstView, ...]
    runs: tuple[SortedRun, ...]
    bottom: bool
    retention_min_seq: int
    clock_tick: int

    @property
    def l0_view_ids(self) -> tuple[int, ...]:
        return tuple(v.id for v in self.l0_views)

    @property
    def run_ids(self) -> tuple[int, ...]:
        return tuple(r.id for r in self.runs)

    def views(self) -> list[SstView]:
        """Every input view: L0 views, then the views of each run."""
        out = list(self.l0_views)
        for run in self.runs:
            out.extend(run.views)
        return out

    def to_tiered(self) -> TieredCompactionSpec:
        """The spec as the compactions file stores it (top-level tree: empty segment)."""
        return TieredCompactionSpec(
            l0_view_ids=self.l0_view_ids, sorted_runs=self.run_ids,  # type: ignore[arg-type]
            destination=self.destination, segment=b"",
        )


def check_compactable(manifest: Manifest) -> None:
    """Raise when this database cannot be compacted by slatelib.

    Raises:
        InvalidDbStateError: uninitialized or destroyed.
        UnsupportedFeatureError: the database has segments (SlateDB RFC-0024).
    """
    if not manifest.initialized:
        raise InvalidDbStateError("compaction: the database is not initialized (a clone "
                                  "being created?)")
    if manifest.destroyed_at_s is not None:
        raise InvalidDbStateError(f"compaction: the database was destroyed at "
                                  f"{manifest.destroyed_at_s}")
    if manifest.has_segments:
        raise UnsupportedFeatureError(
            "compaction of databases with segments (SlateDB RFC-0024) is not supported yet")


def active_compactions(compactions: Compactions | None) -> list[Compaction]:
    """The entries of the compactor state that are not Completed or Failed."""
    if compactions is None:
        return []
    return [c for c in compactions.recent_compactions if c.status in ACTIVE_STATUSES]


def _destination_of(c: Compaction) -> int | None:
    spec = c.spec
    return spec.destination if isinstance(spec, TieredCompactionSpec) else None


def fresh_run_id(manifest: Manifest, active: Iterable[Compaction] = ()) -> int:
    """0.17's ``next_global_sr_id``: above every committed run and in-flight destination."""
    ids = [r.id for r in manifest.compacted]
    for seg in manifest.segments or ():
        ids.extend(r.id for r in seg.compacted)
    ids.extend(d for c in active if (d := _destination_of(c)) is not None)
    return max(ids) + 1 if ids else 0


def busy_sources(active: Iterable[Compaction]) -> set[SourceId]:
    """Sources and destination runs of in-flight compactions of the top-level tree."""
    busy: set[SourceId] = set()
    for c in active:
        spec = c.spec
        if not isinstance(spec, TieredCompactionSpec) or spec.segment:
            continue
        view_ids = spec.l0_view_ids or spec.ssts
        busy.update(SourceId.l0(v) for v in view_ids)
        busy.update(SourceId.run(r) for r in spec.sorted_runs)
        busy.add(SourceId.run(spec.destination))
    return busy


def order_sources(manifest: Manifest, sources: Sequence[SourceId]) -> tuple[SourceId, ...]:
    """``sources`` in logical order, checked to be a consecutive window of the tree.

    Raises:
        InvalidArgumentError: empty, duplicated, unknown or non-consecutive sources, or L0
            sources that leave an older L0 view behind.
    """
    if not sources:
        raise InvalidArgumentError("a compaction needs at least one source")
    wanted = set(sources)
    if len(wanted) != len(sources):
        raise InvalidArgumentError("compaction sources are listed more than once")
    order = logical_sources(manifest)
    missing = wanted.difference(order)
    if missing:
        raise InvalidArgumentError(
            f"compaction sources not in the latest manifest: {sorted(map(str, missing))}")
    positions = sorted(order.index(s) for s in wanted)
    if positions[-1] - positions[0] + 1 != len(positions):
        raise InvalidArgumentError(
            "compaction sources must be consecutive in the order [L0 newest -> oldest, sorted "
            "runs by descending id]: " + ", ".join(str(order[p]) for p in positions))
    ordered = tuple(order[p] for p in positions)
    l0_count = len(manifest.l0)
    if ordered[0].is_l0 and positions[-1] < l0_count - 1:
        raise InvalidArgumentError(
            "L0 sources must include the oldest L0 view "
            f"({order[l0_count - 1]}): writers drop every L0 view older than the newest "
            "compacted one")
    return ordered


def spec_for(manifest: Manifest, policy: Policy, sources: Sequence[SourceId],
             fresh_id: int) -> CompactionSpec:
    """Build the spec of ``sources`` (already in logical order, see :func:`order_sources`)
    against ``manifest``; ``fresh_id`` is the destination when no run is a source."""
    view_ids = {s.view_id for s in sources if s.is_l0}
    run_ids = {s.run_id for s in sources if not s.is_l0}
    runs = tuple(r for r in manifest.compacted if r.id in run_ids)
    destination = min(run_ids) if run_ids else fresh_id  # type: ignore[type-var]
    assert destination is not None
    last_run = manifest.compacted[-1].id if manifest.compacted else None
    return CompactionSpec(
        policy=policy,
        sources=tuple(sources),
        destination=destination,
        l0_views=tuple(v for v in manifest.l0 if v.id in view_ids),
        runs=runs,
        bottom=last_run is None or last_run == destination,
        retention_min_seq=manifest.recent_snapshot_min_seq,
        clock_tick=manifest.last_l0_clock_tick,
    )


def _sized(manifest: Manifest) -> tuple[list[SizedSource], list[SizedSource]]:
    l0 = [SizedSource(SourceId.l0(v.id), estimate_view_size(v, manifest.sst(v.sst_id).info))
          for v in manifest.l0]
    runs = [SizedSource(SourceId.run(r.id), estimate_run_size(r, manifest))
            for r in manifest.compacted]
    return l0, runs


def plan_compaction(
    manifest: Manifest, compactions: Compactions | None, options: PlanOptions
) -> CompactionSpec | None:
    """The compaction to run now, or None when the policy finds nothing to do.

    ``compactions`` is the compactor state (its active entries reserve run ids and, for
    the size-tiered policy, their sources).

    Raises:
        InvalidDbStateError / UnsupportedFeatureError: see :func:`check_compactable`.
        InvalidArgumentError: explicit sources that are not a valid compaction.
    """
    check_compactable(manifest)
    active = active_compactions(compactions)
    fresh = fresh_run_id(manifest, active)
    policy = options.policy
    if policy == Policy.SOURCES:
        return spec_for(manifest, policy, order_sources(manifest, options.sources), fresh)
    if policy == Policy.L0:
        chosen = [SourceId.l0(v.id) for v in manifest.l0]
    elif policy == Policy.FULL:
        chosen = logical_sources(manifest)
    else:
        l0, runs = _sized(manifest)
        picked = pick_size_tiered(l0, runs, busy=busy_sources(active), fresh_run_id=fresh,
                                  options=options.size_tiered)
        if picked is None:
            return None
        chosen = list(picked[0])
    if not chosen:
        return None
    return spec_for(manifest, policy, chosen, fresh)
