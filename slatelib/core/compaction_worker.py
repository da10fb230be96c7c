"""The worker side of 0.17's coordinator/worker split (SlateDB RFC-0025, SlateDB RFC-0028). Pure.

An official coordinator (``compactor_options.worker = null``) schedules compactions and
commits them; workers execute them. Everything goes through the compactions file
(``compactions/<20-digit id>.compactions``), one new version per step, written with
create-if-absent of the next id. A worker never writes the manifest and never changes
``compactor_epoch``. The steps, as the pinned 0.17.0 package writes them (see
``docs/rfcs/0009-compaction-worker.md``):

================  =====================================================================
coordinator       Submitted (no worker) -> Scheduled, after validating the spec
``claim``         Scheduled and unclaimed -> Running, ``worker = (id, now_ms)``
``heartbeat``     Running and ours: ``last_heartbeat_ms = now_ms``, and the progress
                  context (``ctx``: one :class:`Subcompaction` per key range, with the
                  SSTs written for it so far) when it changed
``compacted``     Running and ours -> Compacted, ``output_ssts`` = the new run's SSTs in
                  key order, ``ctx`` cleared, heartbeat refreshed
``release``       Running and ours -> Scheduled, worker cleared, ``ctx`` kept (a job that
                  failed here, or a worker stopping)
coordinator       Running with a heartbeat older than ``worker_heartbeat_timeout``
                  -> Scheduled/Submitted, worker cleared (it keeps ``ctx``);
                  Compacted -> manifest commit -> Completed (or Failed)
================  =====================================================================

A worker that finds its entry gone, or claimed by another worker, or no longer Running,
has lost it: it must not write anything for it again, and its SSTs are left to GC.

Segments (SlateDB RFC-0024): a tiered entry names its tree in ``segment``; the worker
executes it against that tree of the manifest like any other. A Scheduled entry a worker
will not execute (:func:`declined_reason`) is reported, never skipped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from slatelib.core.compaction_plan import CompactionSpec, Policy
from slatelib.core.compaction_source import SourceId
from slatelib.core.compactions import (
    CompactedSsTable,
    Compaction,
    Compactions,
    CompactionStatus,
    DrainSegmentSpec,
    Subcompaction,
    TieredCompactionContext,
    TieredCompactionSpec,
    WorkerSpec,
)
from slatelib.core.manifest import Manifest, SstHandle
from slatelib.core.ranges import Bound, BoundKind, BytesRange
from slatelib.core.segments import ROOT, segment_label, try_tree
from slatelib.errors import ConflictError, UnsupportedFeatureError
from slatelib.ids import Ulid, ulid_to_str

__all__ = [
    "RangeWork",
    "claim",
    "claimable",
    "compacted",
    "declined_reason",
    "heartbeat",
    "owned",
    "progress_context",
    "release",
    "remaining_work",
    "scheduled",
    "spec_of",
]


def scheduled(state: Compactions | None) -> list[Compaction]:
    """Every Scheduled, unclaimed entry, oldest first: the work waiting for a worker."""
    if state is None:
        return []
    return [c for c in state.recent_compactions
            if c.status == CompactionStatus.SCHEDULED and c.worker is None]


def declined_reason(entry: Compaction) -> str | None:
    """Why a slatelib worker will not execute this Scheduled entry, or None (it will).

    0.17 hands workers tiered compactions only, of the top-level tree or of a segment
    (SlateDB RFC-0024): its coordinators execute a ``DrainSegmentSpec`` themselves, from
    Submitted straight to Completed (docs/rfcs/0018-segments.md). A Scheduled drain (or
    any other spec) is therefore not ours to run: the worker says so rather than skip it.
    """
    spec = entry.spec
    if isinstance(spec, DrainSegmentSpec):
        return ("a segment drain (DrainSegmentSpec): 0.17 coordinators execute drains "
                "themselves and never schedule them for workers, so a slatelib worker does "
                "not execute them")
    if not isinstance(spec, TieredCompactionSpec):  # pragma: no cover - a future variant
        return f"a compaction spec slatelib does not know ({type(spec).__name__})"
    return None


def claimable(state: Compactions | None) -> list[Compaction]:
    """Entries a worker may claim, oldest first: Scheduled, unclaimed, tiered (of the
    top-level tree or of a segment). 0.17 workers never act on Submitted entries (the
    coordinator validates those first); the other Scheduled entries are
    :func:`declined_reason`'s."""
    return [c for c in scheduled(state) if declined_reason(c) is None]


def owned(state: Compactions | None, compaction_id: Ulid, worker_id: str) -> Compaction | None:
    """The entry if it is still Running and claimed by ``worker_id``, else None (lost)."""
    c = None if state is None else state.compaction(compaction_id)
    if c is None or c.status != CompactionStatus.RUNNING or c.worker is None:
        return None
    return c if c.worker.worker_id == worker_id else None


def _replace_entries(state: Compactions, new: Mapping[Ulid, Compaction]) -> Compactions:
    return replace(state, recent_compactions=tuple(
        new.get(c.id, c) for c in state.recent_compactions))


def claim(state: Compactions, ids: Sequence[Ulid], worker_id: str, now_ms: int,
          ) -> tuple[Compactions | None, list[Ulid]]:
    """Claim the entries ``ids`` that are still claimable. Returns the new version (None
    when none is) and the ids it claims. Entries already claimed by ``worker_id`` (a claim
    whose response was lost) count as claimed without a new write when nothing else is."""
    free = {c.id for c in claimable(state)}
    mine = [i for i in ids if owned(state, i, worker_id) is not None]
    take = [i for i in ids if i in free]
    if not take:
        return None, mine
    spec = WorkerSpec(worker_id, now_ms)
    by_id = {c.id: c for c in state.recent_compactions}
    new = {i: replace(by_id[i], status=CompactionStatus.RUNNING, worker=spec) for i in take}
    return _replace_entries(state, new), take + mine


def heartbeat(state: Compactions, worker_id: str, now_ms: int,
              progress: Mapping[Ulid, TieredCompactionContext | None],
              ) -> tuple[Compactions | None, set[Ulid]]:
    """Refresh the heartbeat of every entry in ``progress`` that is still ours, and set
    its context when one is given. Returns the new version (None when nothing is ours)
    and the ids that are lost."""
    spec = WorkerSpec(worker_id, now_ms)
    new: dict[Ulid, Compaction] = {}
    lost: set[Ulid] = set()
    for cid, ctx in progress.items():
        c = owned(state, cid, worker_id)
        if c is None:
            lost.add(cid)
            continue
        new[cid] = replace(c, worker=spec, ctx=c.ctx if ctx is None else ctx)
    return (_replace_entries(state, new) if new else None), lost


def compacted(state: Compactions, compaction_id: Ulid, worker_id: str, now_ms: int,
              outputs: Sequence[SstHandle]) -> Compactions | None:
    """Report the outputs: Running and ours -> Compacted. None when the entry is lost, or
    already Compacted by us with these outputs (a lost response that landed)."""
    c = owned(state, compaction_id, worker_id)
    if c is None:
        return None
    done = replace(c, status=CompactionStatus.COMPACTED, ctx=None,
                   worker=WorkerSpec(worker_id, now_ms),
                   output_ssts=tuple(_compacted_sst(h) for h in outputs))
    return _replace_entries(state, {compaction_id: done})


def reported(state: Compactions | None, compaction_id: Ulid, worker_id: str,
             outputs: Sequence[SstHandle]) -> bool:
    """Whether our Compacted report (these outputs) is in ``state``: the coordinator may
    since have committed it (Completed) too."""
    c = None if state is None else state.compaction(compaction_id)
    if c is None or c.worker is None or c.worker.worker_id != worker_id:
        return False
    return (c.status in (CompactionStatus.COMPACTED, CompactionStatus.COMPLETED)
            and tuple(o.id for o in c.output_ssts) == tuple(h.id for h in outputs))


def release(state: Compactions, compaction_id: Ulid, worker_id: str) -> Compactions | None:
    """Hand an entry back: Running and ours -> Scheduled, worker cleared, context kept.
    None when it is not ours any more."""
    c = owned(state, compaction_id, worker_id)
    if c is None:
        return None
    return _replace_entries(state, {compaction_id: replace(
        c, status=CompactionStatus.SCHEDULED, worker=None)})


def _compacted_sst(h: SstHandle) -> CompactedSsTable:
    return CompactedSsTable(h.id, h.info, None, h.format_version)


def _handle(s: CompactedSsTable) -> SstHandle:
    return SstHandle(s.id, s.info, s.format_version)


def spec_of(entry: Compaction, manifest: Manifest) -> CompactionSpec:
    """The compaction to execute for a claimed entry, against the manifest read after the
    claim, with 0.17's retention parameters from that manifest (``retention_min_seq``:
    the lower of the manifest's and the context's, so a resumed job keeps at least what
    its first ranges kept).

    Raises:
        ConflictError: the entry's sources (or its segment) are not, or not in this order,
            in the manifest (the claim raced a manifest write: release it).
        UnsupportedFeatureError: not a tiered compaction (:func:`declined_reason`).
    """
    spec = entry.spec
    why = declined_reason(entry)
    if why is not None or not isinstance(spec, TieredCompactionSpec):
        raise UnsupportedFeatureError(f"compaction {ulid_to_str(entry.id)}: {why}")
    segment = spec.segment or ROOT
    t = try_tree(manifest, segment)
    if t is None:
        raise ConflictError(
            f"compaction {ulid_to_str(entry.id)}: its segment {segment_label(segment)!r} is "
            "not in the latest manifest")
    view_ids = tuple(spec.l0_view_ids or spec.ssts)
    wanted_views = set(view_ids)
    l0 = tuple(v for v in t.l0 if v.id in wanted_views)
    wanted_runs = set(spec.sorted_runs)
    runs = tuple(r for r in t.compacted if r.id in wanted_runs)
    if tuple(v.id for v in l0) != view_ids or tuple(r.id for r in runs) != spec.sorted_runs:
        raise ConflictError(
            f"compaction {ulid_to_str(entry.id)}: its sources are not in the latest manifest "
            f"as listed (segment {segment_label(segment)!r}: L0 views "
            f"{len(l0)}/{len(view_ids)}, sorted runs {[r.id for r in runs]} of "
            f"{list(spec.sorted_runs)})")
    last_run = t.compacted[-1].id if t.compacted else None
    retention = manifest.recent_snapshot_min_seq
    if entry.ctx is not None and entry.ctx.retention_min_seq:
        retention = min(retention, entry.ctx.retention_min_seq)
    return CompactionSpec(
        policy=Policy.SOURCES,
        sources=tuple(SourceId.l0(v) for v in view_ids) + tuple(
            SourceId.run(r) for r in spec.sorted_runs),
        destination=spec.destination,
        l0_views=l0,
        runs=runs,
        bottom=last_run is None or last_run == spec.destination,
        retention_min_seq=retention,
        clock_tick=manifest.last_l0_clock_tick,
        segment=segment,
    )


@dataclass(frozen=True)
class RangeWork:
    """One key range of a claimed compaction: the range of its subcompaction, the SSTs
    already written for it (kept, in order), and what is left to compact (None: done)."""

    range: BytesRange
    done: tuple[SstHandle, ...]
    todo: BytesRange | None


def _after(key: bytes, rng: BytesRange) -> BytesRange | None:
    """The part of ``rng`` above ``key`` (None when empty)."""
    rest = BytesRange(Bound(BoundKind.EXCLUDED, key), rng.end)
    e = rng.end
    if e.kind == BoundKind.EXCLUDED and e.key is not None and e.key <= key:
        return None
    if e.kind == BoundKind.INCLUDED and e.key is not None and e.key <= key:
        return None
    return rest


def remaining_work(ctx: TieredCompactionContext | None,
                   fresh: Sequence[BytesRange]) -> list[RangeWork]:
    """What a worker still has to do for a job: without a context (a fresh claim), every
    range of ``fresh``; with one (a job another worker or an earlier run of ours started),
    the context's ranges, each resumed after the last key of its last output SST, as
    0.17 resumes a subcompaction (a finished range has nothing left)."""
    if ctx is None or not ctx.subcompactions:
        return [RangeWork(r, (), r) for r in fresh]
    out = []
    for sub in ctx.subcompactions:
        done = tuple(_handle(s) for s in sub.output_ssts)
        last = done[-1].info.last_entry if done else None
        if done and last is None:  # no last key recorded: redo the range from scratch
            out.append(RangeWork(sub.range, (), sub.range))
            continue
        out.append(RangeWork(sub.range, done,
                             sub.range if last is None else _after(last, sub.range)))
    return out


def progress_context(work: Sequence[RangeWork], written: Mapping[int, Sequence[SstHandle]],
                     retention_min_seq: int) -> TieredCompactionContext:
    """The context to publish: per range, the SSTs kept from before plus those written
    since (``written``: by range index, for ranges whose task finished)."""
    subs = []
    for i, w in enumerate(work):
        outs = tuple(w.done) + tuple(written.get(i, ()))
        subs.append(Subcompaction(w.range, tuple(_compacted_sst(h) for h in outs)))
    return TieredCompactionContext(tuple(subs), retention_min_seq)


def outputs_in_order(work: Sequence[RangeWork],
                     written: Mapping[int, Sequence[SstHandle]]) -> list[SstHandle]:
    """The new run's SSTs in key order: each range's kept SSTs, then its new ones."""
    out: list[SstHandle] = []
    for i, w in enumerate(work):
        out.extend(w.done)
        out.extend(written.get(i, ()))
    return out


def ids_of(entries: Iterable[Compaction]) -> list[Ulid]:
    return [c.id for c in entries]
