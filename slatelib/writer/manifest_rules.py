"""Manifest changes a writer makes. Pure.

Format §5.5.4 and §11; the writer checkpoint follows design doc 'checkpoints and clones'.

Every function takes the latest manifest as stored (and the id it will be written under,
``next_id``) and returns the manifest to write, or None when nothing needs writing. They
are used as ``mutate`` callbacks of :func:`slatelib.txn.update_versioned`, so they are
idempotent: called again on a manifest where the change already landed (a lost response),
they return None. A higher ``writer_epoch`` in the manifest raises :class:`FencedError`.

The writer owns L0 and the replay bookkeeping (``replay_after_wal_id``,
``wal_id_last_seen``, ``last_l0_seq``, ``last_l0_clock_tick``, ``recent_snapshot_min_seq``,
``sequence_tracker``); everything else (sorted runs, compacted-L0 marker, checkpoints of
others, ``compactor_epoch``) is taken from the latest manifest, which is how a flush is
rebased on a compactor commit: 0.17's ``merge_remote_manifest``.

The writer checkpoint expires ``checkpoint_lifetime`` after it was last written (design doc
'checkpoints and clones' says never; docs/rfcs/0005-writer-wal-and-fencing.md says why slatelib
deviates): every manifest write of the writer re-establishes it with a fresh expiry, and a poll
re-establishes it once half the lifetime has passed (:func:`reestablish_reason`). The writer reads
through the manifest it pins only until a quarter of the lifetime is left (:func:`read_deadline_s`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

from slatelib.core.checkpoints import (
    check_writable_state,
    lsm_changed,
    refresh_due,
    remove_checkpoints,
    with_writer_checkpoint,
    writer_checkpoint,
)
from slatelib.core.invariants import check_writer_epoch
from slatelib.core.manifest import (
    EMPTY_SEQUENCE_TRACKER,
    Checkpoint,
    Manifest,
    SstHandle,
    SstView,
)
from slatelib.errors import FencedError, UnsupportedFeatureError
from slatelib.format.seq_tracker import Pair, decode_seq_tracker, encode_seq_tracker, track_all

READ_MARGIN = 0.25
"""Fraction of the checkpoint lifetime before its expiry at which the writer stops reading
through the manifest it pins (clock skew against GC, reads in progress)."""


def read_deadline_s(cp: Checkpoint | None, lifetime_s: float) -> float:
    """Until when (Unix seconds) the writer may read through the manifest ``cp`` pins:
    :data:`READ_MARGIN` of the lifetime before the expiry. 0 without a checkpoint (it was
    removed: nothing keeps GC away). Pure."""
    if cp is None:
        return 0.0
    if cp.expire_time_s is None:
        return math.inf
    return cp.expire_time_s - lifetime_s * READ_MARGIN


def reestablish_reason(
    local: Manifest, latest: Manifest, checkpoint_id: uuid.UUID | None, *,
    lifetime_s: float, now_s: float,
) -> str | None:
    """Why a poll that read ``latest`` must re-establish the writer checkpoint (None: it need
    not). ``local`` is the version the writer reads from, ``checkpoint_id`` its current
    checkpoint. Pure.

    - ``"lsm changed"``: a compactor changed L0 or the sorted runs (design doc
      'checkpoints and clones');
    - ``"checkpoint missing"``: someone removed it (GC after it expired, an operator);
    - ``"refresh due"``: half of its lifetime has passed.
    """
    if lsm_changed(local, latest):
        return "lsm changed"
    mine = None if checkpoint_id is None else latest.checkpoint(checkpoint_id)
    if mine is None:
        return "checkpoint missing"
    if refresh_due(mine, lifetime_s, now_s):
        return "refresh due"
    return None


@dataclass(frozen=True)
class L0Flush:
    """What one memtable flush adds to the manifest.

    ``handle`` is None when retention left no row (every row an expired merge operand);
    the bookkeeping still advances then, as in 0.17.
    """

    handle: SstHandle | None
    last_seq: int
    replay_after_wal_id: int
    wal_id_last_seen: int
    last_tick: int
    tracker: tuple[Pair, ...] = ()


def check_openable(m: Manifest, path: str, *, separate_wal: bool = False) -> None:
    """Refuse databases this writer cannot open.

    ``separate_wal``: the writer was given a separate WAL store. A V2 manifest (all 0.17
    writes) does not record one, so only a V1 manifest's ``wal_object_store_uri`` can be
    checked here; the check that the store read holds the WAL a manifest promises, whatever
    its version, is :meth:`slatelib.store.wal_store.WalStore.check_tail`.

    Raises:
        InvalidDbStateError: uninitialized (a clone being created) or destroyed.
        UnsupportedFeatureError: segments (SlateDB RFC-0024), or a V1 manifest naming a
            separate WAL object store when none was given.
    """
    check_writable_state(m, f"open writer on {path!r}")
    if m.has_segments:
        raise UnsupportedFeatureError(
            f"{path!r} uses segments (segment extractor {m.segment_extractor_name!r}); "
            "the slatelib writer does not support them"
        )
    if m.wal_object_store_uri is not None and not separate_wal:
        raise UnsupportedFeatureError(
            f"{path!r} keeps its WAL in a separate object store "
            f"({m.wal_object_store_uri!r} in its V1 manifest): pass --wal-store URL "
            "(wal_store= in Python) naming it")


def plan_writer_claim(
    m: Manifest, next_id: int, checkpoint_id: uuid.UUID, *, now_s: float, lifetime_s: float,
    path: str = "", separate_wal: bool = False,
) -> Manifest | None:
    """Claim the next writer epoch and replace every writer checkpoint with ours (design doc
    'checkpoints and clones', "Establishing Initial Checkpoint", expiring after ``lifetime_s``).
    None when our claim already landed.

    Raises:
        FencedError: our claim landed but a newer writer claimed after it.
        InvalidDbStateError / UnsupportedFeatureError: see :func:`check_openable`.
        InvalidArgumentError: see :func:`~slatelib.core.checkpoints.writer_checkpoint`.
    """
    mine = m.checkpoint(checkpoint_id)
    if mine is not None:
        if mine.writer_epoch != m.writer_epoch:
            raise FencedError(
                f"fenced while opening: writer epoch {m.writer_epoch} claimed after ours "
                f"({mine.writer_epoch})"
            )
        return None
    check_openable(m, path, separate_wal=separate_wal)
    epoch = m.writer_epoch + 1
    cp = writer_checkpoint(next_id, epoch, now_s=now_s, lifetime_s=lifetime_s,
                                    checkpoint_id=checkpoint_id)
    return replace(with_writer_checkpoint(m, cp), writer_epoch=epoch)


def prune_external_sst_ids(m: Manifest) -> Manifest:
    """Drop external SST ids no view references any more (0.17 keeps empty entries: the GC
    detaches them)."""
    if not m.external_dbs:
        return m
    used = m.referenced_sst_ids()
    pruned = tuple(
        replace(e, sst_ids=tuple(s for s in e.sst_ids if s in used)) for e in m.external_dbs
    )
    return m if pruned == m.external_dbs else replace(m, external_dbs=pruned)


def _tracker(m: Manifest, samples: Sequence[Pair]) -> bytes:
    if not samples:
        return m.sequence_tracker if m.sequence_tracker is not None else EMPTY_SEQUENCE_TRACKER
    pairs = decode_seq_tracker(m.sequence_tracker) if m.sequence_tracker else []
    return encode_seq_tracker(track_all(pairs, samples))


def plan_flush_commit(
    m: Manifest,
    next_id: int,
    flush: L0Flush,
    *,
    epoch: int,
    checkpoint_id: uuid.UUID,
    now_s: float,
    lifetime_s: float,
) -> Manifest | None:
    """Add one flushed memtable to the latest manifest (rebased on whatever a compactor
    committed), and move the writer checkpoint to ``next_id`` with a fresh expiry. None
    when this flush already landed (``last_l0_seq`` reached).

    Raises:
        FencedError: a newer writer epoch is in the manifest.
        UnsupportedFeatureError: the manifest gained segments.
    """
    check_writer_epoch(m, epoch)
    if m.last_l0_seq >= flush.last_seq:
        return None
    if m.has_segments:
        raise UnsupportedFeatureError("the manifest has segments; the writer cannot flush to it")
    out = m
    if flush.handle is not None:
        view = SstView.identity(flush.handle.id)
        out = out.with_trees(l0=(view, *m.l0), new_ssts=(flush.handle,))
    out = replace(
        out,
        replay_after_wal_id=max(m.replay_after_wal_id, flush.replay_after_wal_id),
        wal_id_last_seen=max(m.wal_id_last_seen, flush.wal_id_last_seen, flush.replay_after_wal_id),
        last_l0_seq=flush.last_seq,
        last_l0_clock_tick=max(m.last_l0_clock_tick, flush.last_tick),
        recent_snapshot_min_seq=flush.last_seq,
        sequence_tracker=_tracker(m, flush.tracker),
    )
    out = prune_external_sst_ids(out)
    cp = writer_checkpoint(next_id, epoch, now_s=now_s, lifetime_s=lifetime_s,
                                    checkpoint_id=checkpoint_id)
    return with_writer_checkpoint(out, cp)


def plan_close(m: Manifest, checkpoint_ids: set[uuid.UUID], *, epoch: int,
               last_wal_id: int) -> Manifest | None:
    """What a closing writer writes: the manifest without its checkpoints and, while it
    still owns the database (``epoch``), with ``wal_id_last_seen`` raised to its last
    acknowledged WAL id, as 0.17's close records it. A WAL-only tail is then visible in the
    manifest, so a reader or writer given the wrong WAL store refuses instead of missing it
    (:mod:`slatelib.core.wal_tail`). None when there is nothing to change.
    """
    out = remove_checkpoints(m, checkpoint_ids) or m
    if m.writer_epoch == epoch and last_wal_id > out.wal_id_last_seen:
        out = replace(out, wal_id_last_seen=last_wal_id)
    return None if out is m else out


def plan_checkpoint_move(
    m: Manifest, next_id: int, *, epoch: int, checkpoint_id: uuid.UUID, now_s: float,
    lifetime_s: float,
) -> Manifest | None:
    """Re-establish the writer checkpoint on the next version, expiring ``lifetime_s``
    from now (see :func:`reestablish_reason` for when). None when ``checkpoint_id`` is
    already there.

    Raises:
        FencedError: a newer writer epoch is in the manifest.
    """
    check_writer_epoch(m, epoch)
    if m.checkpoint(checkpoint_id) is not None:
        return None
    out = prune_external_sst_ids(m)
    return with_writer_checkpoint(out, writer_checkpoint(
        next_id, epoch, now_s=now_s, lifetime_s=lifetime_s, checkpoint_id=checkpoint_id))
