"""The compactor-state file (``compactions/``) over a compaction's life. Pure transitions.

0.17.0 records every compaction in the compactions file (format §6) and its GC reads it: the
oldest compaction id (a ULID, so a creation time) in the latest file is the *low
watermark* below which unreferenced SSTs may be deleted (SlateDB RFC-0029). A compaction listed
there therefore protects every SST minted after it started, including the outputs of a
job that has not committed yet. Our job goes through 0.17's states:

``take_over``  (at fencing) claims ``epoch`` for the file, and, as the coordinator now,
               resets Scheduled entries to Submitted as 0.17 does when a compactor
               starts; Running and Compacted entries belong to the coordinator we fenced
               and will never be committed, so they become Failed (0.17 would reclaim
               them for its own workers; slatelib does not run foreign work) — or
               Completed when their outputs are already in the manifest (the coordinator
               died between its commit and recording it);
``record``     adds our compaction as Running, claimed by our worker id;
``finish``     moves it to Compacted (outputs known), Completed (manifest committed) or
               Failed.

Every write keeps the active entries plus the most recently finished one, as 0.17's
``retain_active_and_last_finished`` does, and entries are ordered by id.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import replace

from slatelib.core.compaction_plan import ACTIVE_STATUSES
from slatelib.core.compactions import (
    CompactedSsTable,
    Compaction,
    Compactions,
    CompactionStatus,
    TieredCompactionSpec,
    WorkerSpec,
)
from slatelib.core.invariants import check_compactions_claimable, check_compactions_epoch
from slatelib.core.manifest import SstHandle
from slatelib.ids import Ulid

FINISHED_STATUSES = frozenset({CompactionStatus.COMPLETED, CompactionStatus.FAILED})


def retain_active_and_last_finished(entries: Sequence[Compaction]) -> tuple[Compaction, ...]:
    """0.17's trimming: active entries plus the newest finished one, ordered by id."""
    finished = [c.id for c in entries if c.status in FINISHED_STATUSES]
    last = max(finished) if finished else None
    kept = [c for c in entries if c.status in ACTIVE_STATUSES or c.id == last]
    return tuple(sorted(kept, key=lambda c: c.id))


def _with(state: Compactions, entries: Sequence[Compaction], epoch: int) -> Compactions:
    return replace(state, compactor_epoch=epoch,
                   recent_compactions=retain_active_and_last_finished(entries))


def abandoned(state: Compactions | None) -> bool:
    """Whether the file lists Running or Compacted entries (work of a coordinator that a
    new compactor will fence: they stay active, and pin GC's low watermark, until taken
    over)."""
    return state is not None and any(
        c.status in (CompactionStatus.RUNNING, CompactionStatus.COMPACTED)
        for c in state.recent_compactions)


def take_over(state: Compactions | None, epoch: int,
              committed: Set[int] = frozenset()) -> Compactions:
    """The file as the compactor of ``epoch`` first writes it (see the module docstring).

    ``committed`` holds the SST ids the latest manifest references: a Compacted entry whose
    outputs are all there was committed by a coordinator that died before recording it, so
    it becomes Completed rather than Failed.

    Raises:
        FencedError: the file already carries ``epoch`` or a newer one.
    """
    if state is None:
        return Compactions(compactor_epoch=epoch)
    check_compactions_claimable(state, epoch)
    out = []
    for c in state.recent_compactions:
        if c.status == CompactionStatus.SCHEDULED:
            c = replace(c, status=CompactionStatus.SUBMITTED, worker=None)
        elif c.status == CompactionStatus.COMPACTED and c.output_ssts and all(
                o.id in committed for o in c.output_ssts):
            c = replace(c, status=CompactionStatus.COMPLETED, ctx=None)
        elif c.status in (CompactionStatus.RUNNING, CompactionStatus.COMPACTED):
            c = replace(c, status=CompactionStatus.FAILED, ctx=None)
        out.append(c)
    return _with(state, out, epoch)


def record(state: Compactions, epoch: int, *compactions: Compaction) -> Compactions:
    """``state`` with ``compactions`` added (idempotent: an entry with the same id is
    replaced).

    Raises:
        FencedError / InvalidDbStateError: see
            :func:`~slatelib.core.invariants.check_compactions_epoch`.
    """
    check_compactions_epoch(state, epoch)
    ids = {c.id for c in compactions}
    others = [c for c in state.recent_compactions if c.id not in ids]
    return _with(state, [*others, *compactions], epoch)


def running(compaction_id: int, spec: TieredCompactionSpec, worker_id: str,
            now_ms: int) -> Compaction:
    """Our compaction, claimed by ``worker_id`` and running."""
    return Compaction(id=Ulid(compaction_id), spec=spec, status=CompactionStatus.RUNNING,
                      worker=WorkerSpec(worker_id, now_ms))


Move = tuple[int, CompactionStatus, Sequence[SstHandle] | None]
"""One entry's transition: ``(compaction id, new status, outputs to record or None)``."""


def finish(
    state: Compactions,
    epoch: int,
    compaction_id: int,
    status: CompactionStatus,
    outputs: Sequence[SstHandle] | None = None,
) -> Compactions | None:
    """``state`` with our compaction moved to ``status`` (and its outputs recorded), or
    None when it is already there (a retried write that landed) or no longer listed.

    Raises:
        FencedError / InvalidDbStateError: see
            :func:`~slatelib.core.invariants.check_compactions_epoch`.
    """
    return finish_all(state, epoch, [(compaction_id, status, outputs)])


def finish_all(state: Compactions, epoch: int, moves: Sequence[Move]) -> Compactions | None:
    """:func:`finish` of several entries in one version (the compactions of the segments
    of one run); None when every one is already there or no longer listed.

    Raises:
        FencedError / InvalidDbStateError: see
            :func:`~slatelib.core.invariants.check_compactions_epoch`.
    """
    check_compactions_epoch(state, epoch)
    changed: dict[Ulid, Compaction] = {}
    for compaction_id, status, outputs in moves:
        current = state.compaction(Ulid(compaction_id))
        if current is None:
            continue
        updated = current
        if outputs is not None:
            updated = replace(updated, output_ssts=tuple(
                CompactedSsTable(h.id, h.info, None, h.format_version) for h in outputs))
        updated = replace(updated, status=status,
                          ctx=None if status == CompactionStatus.FAILED else updated.ctx)
        if updated != current:
            changed[current.id] = updated
    if not changed:
        return None
    others = [c for c in state.recent_compactions if c.id not in changed]
    return _with(state, [*others, *changed.values()], epoch)
