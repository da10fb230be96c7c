"""Opening a database for writing: epoch claim, WAL fence, fence window (design docs 'manifest' and
'checkpoints and clones', 0.17).

1. Create manifest 1 when the database does not exist (create-if-absent; a lost race just
   means someone else created it).
2. Claim ``writer_epoch + 1`` with a manifest CAS that also replaces every earlier writer
   checkpoint with ours (pinned to the claiming version, expiring after
   ``checkpoint_lifetime``). Older writers fail their next manifest update.
3. Fence the WAL as 0.17 does: a zero-byte object at the first WAL id after the contiguous
   run above ``replay_after_wal_id`` (found by listing: a gap left by a crash must not be
   jumped over); when an older writer took that id first, refresh the manifest (are we
   still the newest?) and try the next free one. Every object we pass over must have been
   seen before a manifest read that still shows our epoch: the listing runs after our
   claim, so it may show the fence of a writer that claimed after us, and the id after
   that fence is where the newer writer writes its first WAL SST. 0.17 finds its WAL head
   before claiming and refreshes after every taken id, which keeps the same rule.
4. Fence window: slatelib writers keep up to ``wal_max_in_flight`` WAL writes in flight, so
   an older writer may still land WAL SSTs just after our fence, and a crashed one may have
   left some behind a gap. We also write zero-byte fences at the next
   :data:`WAL_FENCE_WINDOW` - 1 ids (and up to the highest WAL id present), in order. A
   still-running older writer's late WAL write then fails, and an object that an older
   writer already left there is replaced by a fence: its rows were never acknowledged,
   because that writer acknowledges in WAL order and lost our fence's id. Without this,
   those rows would become visible after our fence and break the "state is a prefix of
   the acknowledged writes" guarantee. Ids are filled in increasing order, so every id
   below the one being replaced exists, and no newer writer can choose it for its fence.
   Any object found in the window makes us re-read the manifest first: a fence there is
   usually a newer opener's (it claimed its epoch before fencing), and fencing the ids
   after it would fence that newer writer too, leaving no writer at all.
5. Refresh the manifest: a newer writer that claimed meanwhile fences us right away.

Replay then covers ``(replay_after_wal_id, last fence]`` and the first data WAL id is the
one after the window.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from slatelib.clock import Clock
from slatelib.core.invariants import check_writer_epoch
from slatelib.core.manifest import Manifest
from slatelib.errors import (
    AlreadyExistsError,
    CommitStateUnknownError,
    ConflictError,
    CorruptObjectError,
    ObjectMissingError,
    UnavailableError,
)
from slatelib.objstore import ObjectStore, wal_store_of
from slatelib.paths import file_name, parse_wal_name
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.store.presence import object_exists
from slatelib.store.wal_store import WalStore
from slatelib.txn import update_versioned
from slatelib.writer.manifest_rules import check_openable, plan_writer_claim

log = logging.getLogger(__name__)

WAL_FENCE_WINDOW = 8
"""Fences written on open; ``wal_max_in_flight`` may not exceed it."""
MAX_WAL_SCAN = 4096
"""How far above the fence a stray WAL object may lie before open refuses (a corrupt layout)."""
_MAX_FENCE_ATTEMPTS = 10_000


@dataclass(frozen=True)
class WriterClaim:
    """The outcome of opening: the latest manifest, our epoch and WAL position."""

    manifest: StoredManifest
    epoch: int
    checkpoint_id: uuid.UUID
    fence_wal_id: int
    last_fence_wal_id: int


def ensure_database(manifests: ManifestStore) -> StoredManifest:
    """The latest manifest, creating the database (manifest 1) when there is none."""
    latest = manifests.try_read_latest()
    while latest is None:
        try:
            return manifests.write(1, Manifest.initial())
        except ConflictError:
            latest = manifests.try_read_latest()
        except CommitStateUnknownError:
            latest = manifests.try_read_latest()
    return latest


def claim_epoch(
    manifests: ManifestStore, current: StoredManifest, clock: Clock, *, checkpoint_lifetime_s: float,
    separate_wal: bool = False,
) -> tuple[StoredManifest, int, uuid.UUID]:
    """Bump ``writer_epoch`` with our writer checkpoint (steps 2).

    Raises:
        FencedError: a newer writer claimed right after us.
        InvalidDbStateError / UnsupportedFeatureError: the database cannot be opened.
        InvalidArgumentError: a checkpoint lifetime the manifest cannot hold.
    """
    checkpoint_id = uuid.uuid4()
    path = manifests.root

    def mutate(cur: StoredManifest) -> Manifest | None:
        return plan_writer_claim(
            cur.value, cur.id + 1, checkpoint_id, now_s=clock.now_ms() / 1000,
            lifetime_s=checkpoint_lifetime_s, path=path, separate_wal=separate_wal,
        )

    stored = update_versioned(manifests, mutate, clock=clock, current=current)
    mine = stored.value.checkpoint(checkpoint_id)
    if mine is None or mine.writer_epoch is None:  # pragma: no cover - mutate guarantees it
        raise CorruptObjectError(f"writer checkpoint {checkpoint_id} missing after the claim")
    return stored, mine.writer_epoch, checkpoint_id


def _refresh_epoch(manifests: ManifestStore, epoch: int,
                   known: StoredManifest | None = None) -> StoredManifest:
    """The latest manifest, checked to still hold ``epoch``.

    ``known`` is a version this process wrote or read (our claim): when a listing shows it
    is still the latest live version, it is returned without reading and decoding the
    object again (versions are written once, with put-if-absent, so the same id holds the
    same manifest; on a 100k-SST database that read is about a fifth of a writer's open).
    Any newer version, or a GC boundary at or above it, takes the full read.

    Raises:
        FencedError: a newer writer claimed the database.
    """
    if known is not None:
        ids = manifests.list_ids()
        if ids and ids[-1] == known.id and known.id > manifests.read_boundary():
            check_writer_epoch(known.value, epoch)
            return known
    latest = manifests.read_latest()
    check_writer_epoch(latest.value, epoch)
    return latest


def _wal_sizes_above(store: ObjectStore, wal: WalStore, after: int) -> dict[int, int]:
    """Listed WAL ids above ``after`` and their object sizes."""
    sizes: dict[int, int] = {}
    for meta in store.list(wal.paths.wal_dir, start_after=wal.path(after)):
        wid = parse_wal_name(file_name(meta.path))
        if wid is not None and wid > after:
            sizes[wid] = meta.size
    return sizes


def _wal_ids_above(store: ObjectStore, wal: WalStore, after: int) -> list[int]:
    return sorted(_wal_sizes_above(store, wal, after))


def _head_above(store: ObjectStore, wal: WalStore, after: int) -> tuple[int, bool]:
    """The first free WAL id above ``after`` of the contiguous run of listed objects, and
    whether that run (the objects a fence there would jump over) holds a zero-byte one."""
    sizes = _wal_sizes_above(store, wal, after)
    head = first_gap(after, sorted(sizes))
    return head, any(sizes[i] == 0 for i in range(after + 1, head))


def first_gap(after: int, ids: list[int]) -> int:
    """The first WAL id above ``after`` that ``ids`` (sorted) does not contain. Pure."""
    expected = after + 1
    for wid in ids:
        if wid == expected:
            expected += 1
        elif wid > expected:
            break
    return expected


def fence_wal(
    store: ObjectStore, wal: WalStore, manifests: ManifestStore, manifest: Manifest, epoch: int,
    *, known: StoredManifest | None = None,
) -> int:
    """Write the zero-byte fence at the first free WAL id (step 3); returns its id.

    ``known``: the stored version ``manifest`` came from (our claim), which spares the
    epoch checks below a manifest read while it is still the latest (``_refresh_epoch``).

    The WAL head is found by listing, not by 0.17's exponential probe, which would jump over
    a gap that a crashed writer with several WAL writes in flight can leave behind.

    A listing that moves the fence past a zero-byte object is followed by a manifest read
    before the next put: an empty object listed after our claim may be the fence of a
    writer that claimed after us, and taking the id after it would fence that newer writer
    (its first WAL write goes there) while our own open then fails its final refresh,
    leaving no writer. A manifest read after the listing that still shows our epoch proves
    every listed object older than any newer writer's fence (0.17 claims before fencing).
    A newer writer's WAL SSTs always lie above its own zero-byte fence and window, which
    a listing that shows them shows too; so a jump over WAL SSTs alone (chasing an older
    writer that keeps writing) needs no read, and the chase stays as fast as that writer.

    Raises:
        FencedError: a newer writer owns the database.
        UnavailableError: the fence could not be placed after many attempts.
    """
    after = manifest.replay_after_wal_id
    wal_id, empty = _head_above(store, wal, after)
    if empty:
        _refresh_epoch(manifests, epoch, known)  # a fence listed after our claim: whose?
    for _ in range(_MAX_FENCE_ATTEMPTS):
        path = wal.path(wal_id)
        try:
            store.put_if_absent(path, b"")
            return wal_id
        except AlreadyExistsError:
            pass
        except CommitStateUnknownError:
            if not object_exists(store, path):
                continue  # it did not land: retry the same id
            # An empty object is there: ours or another opener's; take the next id.
        # An older writer is still writing: jump to its current head (0.17 steps by one,
        # which a fast writer can outrun for as long as it keeps writing). List first, then
        # check the epoch: the objects jumped over are then known to be older writers'.
        wal_id, empty = _head_above(store, wal, wal_id - 1)  # the taken id is jumped too
        if empty:
            _refresh_epoch(manifests, epoch, known)
    raise UnavailableError(f"could not place a WAL fence after {_MAX_FENCE_ATTEMPTS} attempts")


def _highest_wal_above(store: ObjectStore, wal: WalStore, wal_id: int) -> int:
    return max(_wal_ids_above(store, wal, wal_id), default=wal_id)


def _neutralize(
    store: ObjectStore, manifests: ManifestStore, path: str, epoch: int
) -> None:
    """Make sure the object at ``path`` is a zero-byte fence.

    Raises:
        FencedError: a newer writer owns the database (for example, the fence found at
            ``path`` is its own: we must not fence the ids after it, where it writes).
    """
    for _ in range(5):
        try:
            data = store.get(path)
        except ObjectMissingError:
            try:
                store.put_if_absent(path, b"")
                return
            except AlreadyExistsError:
                continue
        # Someone else's object. A fence here is usually a newer writer's (it claimed its
        # epoch before fencing, so the manifest shows it): stop before fencing its WAL.
        _refresh_epoch(manifests, epoch)
        if not data:
            return
        log.warning("replacing an unacknowledged WAL SST of an older writer with a fence "
                    "[path=%s, bytes=%d]", path, len(data))
        store.put(path, b"")
        return
    raise UnavailableError(f"could not fence {path}: it keeps changing")


def fill_fence_window(
    store: ObjectStore, wal: WalStore, manifests: ManifestStore, fence_id: int, epoch: int,
    window: int = WAL_FENCE_WINDOW,
) -> int:
    """Fence ``fence_id + 1 ..`` the end of the window (step 4); returns the last fenced id.

    Raises:
        FencedError: a newer writer owns the database.
        CorruptObjectError: WAL objects far above the WAL head.
    """
    top = _highest_wal_above(store, wal, fence_id)
    if top - fence_id > MAX_WAL_SCAN:
        raise CorruptObjectError(
            f"WAL object {top} lies {top - fence_id} ids above the WAL head {fence_id}; "
            "refusing to open (the WAL layout is not one SlateDB writes)",
            path=wal.path(top),
        )
    last = max(fence_id + window - 1, top)
    for wal_id in range(fence_id + 1, last + 1):
        path = wal.path(wal_id)
        try:
            store.put_if_absent(path, b"")
        except (AlreadyExistsError, CommitStateUnknownError):
            _neutralize(store, manifests, path, epoch)
    return last


def open_for_write(
    store: ObjectStore, manifests: ManifestStore, wal: WalStore, clock: Clock,
    *, checkpoint_lifetime_s: float, window: int = WAL_FENCE_WINDOW,
) -> WriterClaim:
    """Steps 1-5 of the module docstring. Before the claim (the first write), the WAL
    tail the manifest promises must be in ``wal``'s store (:meth:`WalStore.check_tail`):
    otherwise this writer would fence and write at WAL ids another store holds, and its
    first flush would move ``replay_after_wal_id`` over writes it never read.

    Raises:
        FencedError: a newer writer claimed the database while we opened it.
        InvalidDbStateError: uninitialized or destroyed database.
        UnsupportedFeatureError: segments, or a V1 manifest naming a WAL store not given.
        WalStoreMissingError: the store holds none of the manifest's WAL tail.
        InvalidArgumentError: a checkpoint lifetime the manifest cannot hold.
    """
    separate = wal_store_of(wal.store) is not None
    current = ensure_database(manifests)
    check_openable(current.value, manifests.root, separate_wal=separate)
    wal.check_tail(current.value, manifest_id=current.id)
    claimed, epoch, checkpoint_id = claim_epoch(manifests, current, clock,
                                                checkpoint_lifetime_s=checkpoint_lifetime_s,
                                                separate_wal=separate)
    if claimed.value.wal_id_last_seen > current.value.wal_id_last_seen:
        wal.check_tail(claimed.value, manifest_id=claimed.id)  # moved meanwhile: again
    fence_id = fence_wal(store, wal, manifests, claimed.value, epoch, known=claimed)
    last = fill_fence_window(store, wal, manifests, fence_id, epoch, window)
    latest = _refresh_epoch(manifests, epoch, claimed)
    log.info("writer opened [path=%s, epoch=%d, fence_wal_id=%d, last_fence_wal_id=%d]",
             manifests.root, epoch, fence_id, last)
    return WriterClaim(latest, epoch, checkpoint_id, fence_id, last)
