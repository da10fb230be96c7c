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

**Segments** (SlateDB RFC-0024, docs/rfcs/0018-segments.md): a database with a segment
extractor has one tree per segment (:mod:`slatelib.core.segments`), and every rule above
applies per tree: a compaction's sources come from one tree, its output run goes into that
tree, and "bottom" means the last run of that tree. Run ids are global: a fresh
destination is above every run of every tree and every in-flight destination.
:func:`plan_compactions` plans each tree once per run: ``l0`` and ``full`` every tree that
has something to compact (in manifest order), ``size-tiered`` 0.17's scheduler per tree,
trees with more L0 views first (0.17's priority), each fresh destination taken in that
order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from slatelib.core.compaction_source import (
    SourceId,
    estimate_run_size,
    estimate_view_size,
    tree_sources,
)
from slatelib.core.compactions import (
    Compaction,
    Compactions,
    CompactionStatus,
    DrainSegmentSpec,
    TieredCompactionSpec,
)
from slatelib.core.manifest import Manifest, SortedRun, SstView
from slatelib.core.segments import ROOT, Tree, root_tree, segment_label, trees
from slatelib.core.size_tiered import SizedSource, SizeTieredOptions, pick_size_tiered
from slatelib.errors import InvalidArgumentError, InvalidDbStateError

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
    segment: bytes = ROOT
    """The tree the compaction belongs to: ``b""`` the top-level tree, else a segment."""

    @property
    def segment_label(self) -> str:
        return segment_label(self.segment)

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
            destination=self.destination, segment=self.segment,
        )


def check_compactable(manifest: Manifest) -> None:
    """Raise when this database cannot be compacted by slatelib.

    Raises:
        InvalidDbStateError: uninitialized or destroyed.
    """
    if not manifest.initialized:
        raise InvalidDbStateError("compaction: the database is not initialized (a clone "
                                  "being created?)")
    if manifest.destroyed_at_s is not None:
        raise InvalidDbStateError(f"compaction: the database was destroyed at "
                                  f"{manifest.destroyed_at_s}")


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


def busy_sources(active: Iterable[Compaction], segment: bytes = ROOT) -> set[SourceId]:
    """Sources and destination runs of in-flight compactions of the tree ``segment``
    (0.17's ``ConflictChecker``, which looks at the target tree's compactions only; a
    drain's sources are busy too, it has no destination)."""
    busy: set[SourceId] = set()
    for c in active:
        spec = c.spec
        if isinstance(spec, DrainSegmentSpec):
            if spec.segment == segment:
                busy.update(SourceId.l0(v) for v in spec.l0_view_ids)
                busy.update(SourceId.run(r) for r in spec.sorted_runs)
            continue
        if (spec.segment or ROOT) != segment:
            continue
        view_ids = spec.l0_view_ids or spec.ssts
        busy.update(SourceId.l0(v) for v in view_ids)
        busy.update(SourceId.run(r) for r in spec.sorted_runs)
        busy.add(SourceId.run(spec.destination))
    return busy


def source_tree(manifest: Manifest, sources: Sequence[SourceId]) -> Tree:
    """The one tree (top-level or segment) that holds every source.

    Raises:
        InvalidArgumentError: a source is in no tree of the latest manifest, or the
            sources come from more than one tree (0.17 rejects such a spec).
    """
    found: dict[bytes, Tree] = {}
    missing: list[SourceId] = []
    all_trees = trees(manifest)
    for src in sources:
        holder = next((t for t in all_trees if src in tree_sources(t.l0, t.compacted)), None)
        if holder is None:
            missing.append(src)
        else:
            found[holder.prefix] = holder
    if missing:
        raise InvalidArgumentError(
            f"compaction sources not in the latest manifest: {sorted(map(str, missing))}")
    if len(found) > 1:
        raise InvalidArgumentError(
            "compaction sources must come from one tree (the top-level tree or one "
            "segment, SlateDB RFC-0024); these come from "
            + ", ".join(repr(segment_label(p)) for p in sorted(found)))
    if not found:
        raise InvalidArgumentError("a compaction needs at least one source")
    return next(iter(found.values()))


def order_sources(manifest: Manifest, sources: Sequence[SourceId],
                  t: Tree | None = None) -> tuple[SourceId, ...]:
    """``sources`` in logical order, checked to be a consecutive window of their tree
    (``t``, else the tree that holds them: :func:`source_tree`).

    Raises:
        InvalidArgumentError: empty, duplicated, unknown or non-consecutive sources,
            sources of several trees, or L0 sources that leave an older L0 view behind.
    """
    if not sources:
        raise InvalidArgumentError("a compaction needs at least one source")
    wanted = set(sources)
    if len(wanted) != len(sources):
        raise InvalidArgumentError("compaction sources are listed more than once")
    t = t or source_tree(manifest, sources)
    order = tree_sources(t.l0, t.compacted)
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
    l0_count = len(t.l0)
    if ordered[0].is_l0 and positions[-1] < l0_count - 1:
        raise InvalidArgumentError(
            "L0 sources must include the oldest L0 view "
            f"({order[l0_count - 1]}): writers drop every L0 view older than the newest "
            "compacted one")
    return ordered


def spec_for(manifest: Manifest, policy: Policy, sources: Sequence[SourceId],
             fresh_id: int, t: Tree | None = None) -> CompactionSpec:
    """Build the spec of ``sources`` (already in logical order, see :func:`order_sources`)
    of the tree ``t`` (default: the top-level tree) of ``manifest``; ``fresh_id`` is the
    destination when no run is a source."""
    t = t or root_tree(manifest)
    view_ids = {s.view_id for s in sources if s.is_l0}
    run_ids = {s.run_id for s in sources if not s.is_l0}
    runs = tuple(r for r in t.compacted if r.id in run_ids)
    destination = min(run_ids) if run_ids else fresh_id  # type: ignore[type-var]
    assert destination is not None
    last_run = t.compacted[-1].id if t.compacted else None
    return CompactionSpec(
        policy=policy,
        sources=tuple(sources),
        destination=destination,
        l0_views=tuple(v for v in t.l0 if v.id in view_ids),
        runs=runs,
        bottom=last_run is None or last_run == destination,
        retention_min_seq=manifest.recent_snapshot_min_seq,
        clock_tick=manifest.last_l0_clock_tick,
        segment=t.prefix,
    )


def _sized(manifest: Manifest, t: Tree) -> tuple[list[SizedSource], list[SizedSource]]:
    l0 = [SizedSource(SourceId.l0(v.id), estimate_view_size(v, manifest.sst(v.sst_id).info))
          for v in t.l0]
    runs = [SizedSource(SourceId.run(r.id), estimate_run_size(r, manifest))
            for r in t.compacted]
    return l0, runs


def _pointless(t: Tree) -> bool:
    """A tree a ``full`` compaction would not change: nothing, or one empty run."""
    return not t.l0 and (not t.compacted
                         or (len(t.compacted) == 1 and not t.compacted[0].views))


def plan_compactions(
    manifest: Manifest, compactions: Compactions | None, options: PlanOptions
) -> list[CompactionSpec]:
    """The compactions to run now, at most one per tree (the top-level tree and each
    segment; see the module docstring), in the order their destinations were taken;
    empty when the policy finds nothing to do.

    ``compactions`` is the compactor state (its active entries reserve run ids and, for
    the size-tiered policy, their sources).

    Raises:
        InvalidDbStateError: see :func:`check_compactable`.
        InvalidArgumentError: explicit sources that are not a valid compaction.
    """
    check_compactable(manifest)
    active = active_compactions(compactions)
    fresh = fresh_run_id(manifest, active)
    policy = options.policy
    if policy == Policy.SOURCES:
        t = source_tree(manifest, options.sources)
        return [spec_for(manifest, policy, order_sources(manifest, options.sources, t),
                         fresh, t)]
    out: list[CompactionSpec] = []
    if policy == Policy.SIZE_TIERED:
        # 0.17 (size_tiered_compaction.rs `propose`): trees with more L0 views first, the
        # top-level tree first among equals (a stable sort of [root, segments...]).
        for t in sorted(trees(manifest), key=lambda t: -len(t.l0)):
            l0, runs = _sized(manifest, t)
            picked = pick_size_tiered(l0, runs, busy=busy_sources(active, t.prefix),
                                      fresh_run_id=fresh, options=options.size_tiered)
            if picked is None:
                continue
            out.append(spec_for(manifest, policy, picked[0], fresh, t))
            if picked[1] == fresh:
                fresh += 1
        return out
    for t in trees(manifest):
        if policy == Policy.L0:
            chosen = [SourceId.l0(v.id) for v in t.l0]
        elif _pointless(t):
            chosen = []
        else:
            chosen = tree_sources(t.l0, t.compacted)
        if not chosen:
            continue
        spec = spec_for(manifest, policy, chosen, fresh, t)
        out.append(spec)
        if spec.destination == fresh:
            fresh += 1
    return out


def idle_reason(manifest: Manifest, compactions: Compactions | None,
                options: PlanOptions) -> str:
    """Why :func:`plan_compactions` found nothing to do, in a few words for a headline:
    ``no L0 SSTs to compact (2 sorted runs, 9 SSTs): ...``, ``the database holds no SSTs``,
    or the size-tiered threshold no group of sources met."""
    l0 = sum(len(t.l0) for t in trees(manifest))
    runs = sum(len(t.compacted) for t in trees(manifest))
    ssts = sum(len(r.views) for t in trees(manifest) for r in t.compacted)
    shape = f"{runs} sorted run{'s' if runs != 1 else ''}, {ssts} SST{'s' if ssts != 1 else ''}"
    if options.policy == Policy.L0:
        return f"no L0 SSTs to compact ({shape}): the writer has flushed nothing new"
    if options.policy == Policy.FULL:
        return f"the database holds no SSTs ({shape})"
    busy = len(active_compactions(compactions))
    st = options.size_tiered
    why = (f"fewer than {st.min_compaction_sources} sources of similar size (min_compaction_"
           f"sources; {l0} L0 SST{'s' if l0 != 1 else ''}, {shape})")
    return why + (f"; {busy} compaction(s) already running" if busy else "")


def plan_compaction(
    manifest: Manifest, compactions: Compactions | None, options: PlanOptions
) -> CompactionSpec | None:
    """The first compaction :func:`plan_compactions` plans (the only one of a database
    without segments), or None when the policy finds nothing to do.

    Raises:
        InvalidDbStateError: see :func:`check_compactable`.
        InvalidArgumentError: explicit sources that are not a valid compaction.
    """
    specs = plan_compactions(manifest, compactions, options)
    return specs[0] if specs else None
