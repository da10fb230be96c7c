"""Driver-side writes of a compaction: fencing, the ``compactions/`` record, the commit CAS.

Order (the same as 0.17.0's compactor):

1. :func:`fence_compactor` bumps ``compactor_epoch`` in the manifest (a CAS; every other
   compactor now fails its next write) -- but only when no other compactor may hold the
   epoch (:mod:`slatelib.core.compactor_claim`; 0.17 has no such check) -- then claims the same epoch in the compactions file
   (creating it when the database never had a compactor) and takes over its entries;
2. :func:`record_compaction` lists our compaction as Running — from here 0.17's GC keeps
   every SST minted after the compaction id's time (the low watermark, SlateDB RFC-0029);
3. after execution, :func:`mark_compaction` records the outputs (Compacted), then
   :func:`commit_manifest` applies the compaction with one manifest CAS, rebased on conflict
   (:mod:`slatelib.core.compaction_apply`); finally Completed (or Failed).

Every step goes through :func:`slatelib.txn.transact` ("fence, deadline, did it land"),
whose steps here are pure and idempotent: after a lost response the latest version is
re-read and a write that landed is recognised (the epoch is ours; the entry is there; the
commit's checkpoint marker is there), so nothing is done twice. The fence's I/O (reading
the compactions file and the claim records, writing our claim record) happens before its
CAS loop, so a retried CAS repeats none of it. A fenced compactor stops at once and leaves
its outputs to GC.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field, replace

from slatelib.clock import Clock
from slatelib.core.checkpoints import (
    add_checkpoint,
    check_writable_state,
    new_checkpoint,
    remove_checkpoints,
)
from slatelib.core.compaction_apply import apply_compactions, is_committed
from slatelib.core.compaction_plan import CompactionSpec, check_compactable
from slatelib.core.compaction_state import Move, finish_all, record, take_over
from slatelib.core.compactions import Compaction, Compactions, CompactionStatus
from slatelib.core.compactor_claim import (
    CLAIM_EPOCHS_KEPT,
    CLAIM_MARKER_LIFETIME_S,
    ClaimRecord,
    ClaimState,
    ClaimVerdict,
    fence_marker_landed,
)
from slatelib.core.invariants import check_compactor_epoch
from slatelib.core.manifest import Manifest, SstHandle
from slatelib.db_manifest import DbManifest
from slatelib.errors import CompactorActiveError, ConflictError, SlateError
from slatelib.store.claim_store import ClaimStore, judge_manifest
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.sequenced import Versioned
from slatelib.txn import Deadline, transact

log = logging.getLogger(__name__)



def _deadline(clock: Clock, timeout_s: float, what: str) -> Deadline:
    """The ``manifest_update_timeout`` of one driver-side write, from now."""
    return Deadline.starting_now(clock, timeout_s, what)


@dataclass(frozen=True)
class CompactorClaim:
    """The epoch we own and the manifest version written by the epoch bump."""

    epoch: int
    manifest: Versioned[Manifest]
    verdict: ClaimVerdict | None = None
    marker: uuid.UUID | None = None
    """The fence manifest's marker checkpoint, dropped again by the commit."""


@dataclass(frozen=True)
class ClaimIdentity:
    """Who is claiming: written into slatelib's claim records."""

    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    mode: str = "job"
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)


def fence_compactor(manifests: DbManifest, compactions: CompactionsStore, *,
                    clock: Clock, timeout_s: float, takeover: bool = False,
                    identity: ClaimIdentity | None = None) -> CompactorClaim:
    """Become the database's compactor (step 1 of the module docstring).

    The bump is refused, on the very version it would replace, when another compactor may
    hold the epoch (:mod:`slatelib.core.compactor_claim`), unless ``takeover``. A claim
    record (``claiming``) is written before the CAS and updated (``claimed``) after it; the
    fence manifest carries the record's marker checkpoint.

    Raises:
        CompactorActiveError: another compactor may hold the epoch (nothing written to the
            manifest; only our own claim record, marked lost).
        FencedError: another compactor claimed a newer epoch meanwhile.
        InvalidDbStateError / UnsupportedFeatureError: the database cannot be compacted.
        ConflictError / UnavailableError: could not write within the retries/timeout.
    """
    who = identity or ClaimIdentity()
    claims = ClaimStore(manifests.store, manifests.root)
    deadline = _deadline(clock, timeout_s, "fence manifest")
    tried: list[ClaimRecord] = []
    verdicts: list[ClaimVerdict] = []

    def landed(m: Manifest) -> bool:
        return any(fence_marker_landed(m, r) for r in tried)

    written: Versioned[Manifest] | None = None
    while written is None:  # one round per compactor epoch seen (a new judgement)
        cur = manifests.read_latest()
        check_compactable(cur.value)
        if landed(cur.value):  # our fence landed; its response was lost
            written = cur
            break
        # I/O before the CAS loop: judge the epoch, write our claim record.
        comp = compactions.try_read_latest()
        verdict = judge_manifest(manifests, claims, cur.value, compactions_epoch=None
                                 if comp is None else comp.value.compactor_epoch)
        verdicts.append(verdict)
        if not verdict.may_fence:
            for r in tried:
                claims.put(replace(r, state=ClaimState.LOST, at_ms=clock.now_ms()))
            if not takeover:
                raise CompactorActiveError(verdict.refusal(manifests.root))
            log.warning("taking the compactor epoch over (--takeover) [db=%s, epoch=%d, "
                        "holder=%s]", manifests.root, verdict.epoch, verdict.reason)
        record = ClaimRecord(
            epoch=cur.value.compactor_epoch + 1, run_id=who.run_id, state=ClaimState.CLAIMING,
            base_manifest_id=cur.id, marker=uuid.uuid4(), mode=who.mode, host=who.host,
            pid=who.pid, at_ms=clock.now_ms(),
        )
        stale = claims.markers_up_to(cur.value.compactor_epoch)
        if verdict.record is not None:
            stale = stale | {verdict.record.marker}
        claims.put(record)
        tried.append(record)
        try:
            written = manifests.update(
                fence_step(record, stale, clock), clock=clock, current=cur, landed=landed,
                deadline=deadline, what=f"fence of {manifests.root!r}")
        except _EpochMoved:
            continue  # another compactor fenced meanwhile: judge the new epoch
    epoch = written.value.compactor_epoch
    mine = next((r for r in tried if fence_marker_landed(written.value, r)), None)
    if mine is None:  # pragma: no cover - transact checked that it landed
        raise ConflictError(f"fence of {manifests.root!r} did not land")
    claims.put(replace(mine, state=ClaimState.CLAIMED, manifest_id=written.id,
                       at_ms=clock.now_ms()))
    try:
        claims.prune_below(epoch - CLAIM_EPOCHS_KEPT + 1)
    except SlateError as exc:
        log.warning("could not prune old claim records [db=%s, error=%s]", manifests.root, exc)
    claim_compactions(compactions, epoch, clock=clock, timeout_s=timeout_s,
                      committed=written.value.referenced_sst_ids())
    log.info("compactor fenced [epoch=%d, manifest_id=%d]", epoch, written.id)
    return CompactorClaim(epoch, written, verdicts[0] if verdicts else None, mine.marker)


class _EpochMoved(Exception):
    """The compactor epoch changed since it was judged: the fence needs a new judgement."""


def fence_step(record: ClaimRecord, stale: Set[uuid.UUID], clock: Clock
               ) -> Callable[[Versioned[Manifest]], Manifest | None]:
    """The fence CAS step of claim ``record``: a pure function of the version it is given.
    It bumps ``compactor_epoch`` to ``record.epoch``, adds the record's marker checkpoint
    (pinning the fence manifest) and drops the ``stale`` markers of earlier runs of ours
    (a run that failed after its fence left its marker pinning its fence manifest, and
    the SSTs that manifest references, for a day: finding K3).

    Raises (when applied):
        _EpochMoved: the version is at another epoch than the one judged.
        InvalidDbStateError / UnsupportedFeatureError: the database cannot be compacted.
    """
    def bump(cur: Versioned[Manifest]) -> Manifest | None:
        check_compactable(cur.value)
        if cur.value.compactor_epoch + 1 != record.epoch:
            raise _EpochMoved()
        base = cur.value
        if stale & {c.id for c in base.checkpoints}:
            base = remove_checkpoints(base, set(stale)) or base  # earlier runs' fence markers
        marker = new_checkpoint(base, cur.id + 1, now_s=clock.now_ms() / 1000.0,
                                lifetime_s=CLAIM_MARKER_LIFETIME_S, checkpoint_id=record.marker)
        return replace(add_checkpoint(base, marker), compactor_epoch=base.compactor_epoch + 1)

    return bump


def claim_compactions(compactions: CompactionsStore, epoch: int, *, clock: Clock,
                      timeout_s: float, committed: Set[int] = frozenset(),
                      ) -> Versioned[Compactions]:
    """Write ``epoch`` into the compactions file, creating it if needed, and take over the
    entries of the fenced coordinator (``committed``: SST ids the manifest references).

    Raises:
        FencedError: the file already carries ``epoch`` or a newer one from someone else.
    """
    if compactions.try_read_latest() is None:
        try:
            return compactions.write(1, take_over(None, epoch))
        except ConflictError:
            pass  # someone created it first: take over from their version

    def claim(cur: Versioned[Compactions]) -> Compactions | None:
        if cur.value.compactor_epoch == epoch:
            return None  # our own write, whose response was lost
        return take_over(cur.value, epoch, committed)

    return transact(compactions, claim, clock=clock,
                    deadline=_deadline(clock, timeout_s, "claim compactions"))


def record_compaction(compactions: CompactionsStore, epoch: int, *entries: Compaction,
                      clock: Clock, timeout_s: float) -> None:
    """List our compactions ``entries`` (Running) in the compactions file, in one version.

    Raises:
        FencedError: a newer compactor took over.
    """
    def add(cur: Versioned[Compactions]) -> Compactions | None:
        if cur.value.compactor_epoch == epoch and all(
                cur.value.compaction(c.id) == c for c in entries):
            return None
        return record(cur.value, epoch, *entries)

    transact(compactions, add, clock=clock, deadline=_deadline(clock, timeout_s,
                                                                 "record compaction"))


def mark_compaction(compactions: CompactionsStore, epoch: int, compaction_id: int,
                    status: CompactionStatus, outputs: Sequence[SstHandle] | None = None, *,
                    clock: Clock, timeout_s: float) -> None:
    """Move our compaction to ``status`` (recording ``outputs`` when given).

    Raises:
        FencedError: a newer compactor took over.
    """
    mark_compactions(compactions, epoch, [(compaction_id, status, outputs)], clock=clock,
                     timeout_s=timeout_s)


def mark_compactions(compactions: CompactionsStore, epoch: int, moves: Sequence[Move], *,
                     clock: Clock, timeout_s: float) -> None:
    """Move several of our compactions (``(id, status, outputs or None)``) in one version.

    Raises:
        FencedError: a newer compactor took over.
    """
    what = "mark compaction " + "/".join(sorted({m[1].name for m in moves}))

    def move(cur: Versioned[Compactions]) -> Compactions | None:
        return finish_all(cur.value, epoch, moves)

    transact(compactions, move, clock=clock, deadline=_deadline(clock, timeout_s, what))


def mark_compaction_quietly(compactions: CompactionsStore, epoch: int,
                            compaction_id: int | Sequence[int],
                            status: CompactionStatus, *, clock: Clock, timeout_s: float,
                            outputs: Sequence[SstHandle] | None = None) -> bool:
    """:func:`mark_compaction` (of one id, or of several to the same ``status`` without
    outputs), logging instead of raising (for cleanup paths)."""
    ids = [compaction_id] if isinstance(compaction_id, int) else list(compaction_id)
    moves: list[Move] = [(i, status, outputs if len(ids) == 1 else None) for i in ids]
    try:
        mark_compactions(compactions, epoch, moves, clock=clock, timeout_s=timeout_s)
        return True
    except SlateError as exc:
        log.warning("could not mark compaction %s [ids=%s, error=%s]", status.name, ids, exc)
        return False


@dataclass(frozen=True)
class CommitOutcome:
    manifest: Versioned[Manifest]
    rebases: int
    marker: uuid.UUID


def commit_manifest(
    manifests: DbManifest,
    specs: Sequence[CompactionSpec],
    outputs: Sequence[Sequence[SstHandle]],
    *,
    epoch: int,
    checkpoint_lifetime_s: float,
    clock: Clock,
    timeout_s: float,
    marker: uuid.UUID | None = None,
    drop_checkpoint: uuid.UUID | None = None,
) -> CommitOutcome:
    """Apply the compactions (``outputs[i]`` of ``specs[i]``: one compaction, or one per
    tree of a segmented database) to the latest manifest with one CAS, rebasing on
    conflicts.

    The CAS adds a checkpoint (id ``marker``) pinning the version the compactions were
    applied to; finding that checkpoint (or our outputs) after a lost response means the
    commit landed, so it is never applied twice.

    Raises:
        FencedError: another compactor took over (nothing committed).
        SourcesChangedError: a source is gone (nothing committed).
        ConflictError / UnavailableError: no commit within the retries/timeout.
    """
    marker = marker or uuid.uuid4()
    output_ids = {h.id for outs in outputs for h in outs}
    attempts = 0

    def landed(m: Manifest) -> bool:
        return is_committed(m, marker) or bool(output_ids & m.referenced_sst_ids())

    def apply(cur: Versioned[Manifest]) -> Manifest | None:
        nonlocal attempts
        check_writable_state(cur.value, "compaction commit")
        attempts += 1
        cp = new_checkpoint(cur.value, cur.id, now_s=clock.now_ms() / 1000.0,
                            lifetime_s=checkpoint_lifetime_s, checkpoint_id=marker)
        base = cur.value
        if drop_checkpoint is not None:
            base = remove_checkpoints(base, {drop_checkpoint}) or base
        return apply_compactions(base, specs, outputs, epoch=epoch, checkpoint=cp)

    result = manifests.update(apply, clock=clock, landed=landed,
                              fence=lambda m: check_compactor_epoch(m, epoch),
                              deadline=_deadline(clock, timeout_s, "compaction commit"),
                              what="compaction commit")
    log.info("compaction committed [manifest_id=%d, rebases=%d, compactions=%d, outputs=%d]",
             result.id, max(0, attempts - 1), len(specs), len(output_ids))
    return CommitOutcome(result, max(0, attempts - 1), marker)
