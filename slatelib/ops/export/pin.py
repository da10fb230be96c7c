"""The checkpoint a read or an export goes through: resolve a given one, or create one.

- :func:`pin_checkpoint`: an existing checkpoint by id, refused when it is not in the latest
  manifest (unknown or deleted) or has expired (its SSTs are no longer protected from GC).
- :func:`create_read_checkpoint`: a new named checkpoint with a lifetime that pins the next
  manifest version, with ``wal_id_last_seen`` raised to the last WAL SST found, so that it
  covers every write acknowledged before it (as a reader's checkpoint does, design doc
  'checkpoints and clones', "Establishing the Checkpoint").
- :func:`finish_partition`: the data source's temporary checkpoint is deleted by the task
  that finishes the last partition of the read: each task leaves a marker object
  ``<db>/slatelib/reads/<checkpoint>/<index>`` once its partition is drained, and the one that
  sees every marker deletes the checkpoint and the markers. A read that never drains every
  partition (``limit``, a failed job) leaves the checkpoint to expire
  (docs/rfcs/0011-spark-datasource-and-export.md).
"""

from __future__ import annotations

import logging
import math
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.core.checkpoints import check_writable_state
from slatelib.core.manifest import Checkpoint, Manifest
from slatelib.db_manifest import DbManifest
from slatelib.errors import InvalidDbStateError, ObjectMissingError
from slatelib.objstore import ObjectStore
from slatelib.ops.checkpoint import delete_checkpoint
from slatelib.store.wal_store import WalStore

log = logging.getLogger(__name__)

READ_CHECKPOINT_NAME = "slatelib-spark-read"
EXPORT_CHECKPOINT_NAME = "slatelib-export"
MARKER_DIR = "slatelib/reads"


@dataclass(frozen=True)
class PinnedCheckpoint:
    """A checkpoint and the manifest it pins."""

    checkpoint: Checkpoint
    manifest_id: int
    manifest: Manifest


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def pin_checkpoint(store: ObjectStore, path: str, checkpoint_id: uuid.UUID, *,
                   clock: Clock = SYSTEM_CLOCK) -> PinnedCheckpoint:
    """The live checkpoint ``checkpoint_id`` of the database at ``path`` and its manifest.

    Raises:
        NotADatabaseRootError: no database at ``path``.
        InvalidDbStateError: no such checkpoint in the latest manifest, it has expired, or
            the manifest it pins is gone or is not initialized.
        WalStoreMissingError: the store holds none of the WAL tail the pinned manifest
            promises (its WAL store was not given).
    """
    manifests = DbManifest(store, path)
    latest = manifests.read_latest()
    cp = latest.value.checkpoint(checkpoint_id)
    if cp is None:
        raise InvalidDbStateError(
            f"checkpoint {checkpoint_id} not found in manifest {latest.id} of database "
            f"{path!r} in {store.url} (unknown, deleted, or removed by GC after it expired)")
    now_s = clock.now_ms() / 1000
    if cp.is_expired(now_s):
        assert cp.expire_time_s is not None
        raise InvalidDbStateError(
            f"checkpoint {checkpoint_id} of database {path!r} expired at "
            f"{_iso(cp.expire_time_s)} (now {_iso(now_s)}): GC may already have deleted what "
            "it pins; create a new checkpoint")
    try:
        pinned = manifests.read(cp.manifest_id)
    except ObjectMissingError as exc:
        raise InvalidDbStateError(
            f"checkpoint {checkpoint_id} of database {path!r} pins manifest "
            f"{cp.manifest_id}, which is gone: {exc}") from exc
    if not pinned.value.initialized:
        raise InvalidDbStateError(
            f"database {path!r} is not initialized (manifest {pinned.id}): a clone that is "
            "still being created")
    WalStore(store, path).check_tail(pinned.value, manifest_id=pinned.id)
    return PinnedCheckpoint(cp, pinned.id, pinned.value)


def create_read_checkpoint(store: ObjectStore, path: str, *, name: str, lifetime_s: float,
                           clock: Clock = SYSTEM_CLOCK) -> PinnedCheckpoint:
    """A new checkpoint named ``name`` expiring ``lifetime_s`` from now (see the module).

    Raises:
        NotADatabaseRootError: no database at ``path``.
        InvalidDbStateError: the database is uninitialized or destroyed.
        InvalidArgumentError: a bad lifetime.
        WalStoreMissingError: the store holds none of the latest manifest's WAL tail (its
            WAL store was not given); nothing was written.
    """
    manifests = DbManifest(store, path)
    wal = WalStore(store, path)
    checkpoint_id = uuid.uuid4()
    latest = manifests.read_latest()
    wal.check_tail(latest.value, manifest_id=latest.id)  # before the checkpoint is written
    last_wal = wal.last_wal_id(latest.value.replay_after_wal_id)

    def seen_wal(m: Manifest) -> Manifest:
        return replace(m, wal_id_last_seen=last_wal) if last_wal > m.wal_id_last_seen else m

    cp, stored = manifests.create_checkpoint(
        clock=clock, lifetime_s=lifetime_s, name=name, checkpoint_id=checkpoint_id,
        check=lambda m: check_writable_state(m, "export checkpoint"), also=seen_wal,
        current=latest)
    pinned = stored if stored.id == cp.manifest_id else manifests.read(cp.manifest_id)
    log.info("read checkpoint created [path=%s, id=%s, manifest_id=%d, expire_time_s=%s]",
             path, cp.id, cp.manifest_id, cp.expire_time_s)
    return PinnedCheckpoint(cp, pinned.id, pinned.value)


def lifetime_from(seconds: float) -> float:
    """A checkpoint lifetime of at least one second (whole seconds)."""
    return float(max(1, math.ceil(seconds)))


def _marker_prefix(path: str, checkpoint_id: uuid.UUID) -> str:
    return f"{path.rstrip('/')}/{MARKER_DIR}/{checkpoint_id}/"


def finish_partition(store: ObjectStore, path: str, checkpoint_id: uuid.UUID, index: int,
                     total: int, *, clock: Clock = SYSTEM_CLOCK) -> bool:
    """Record that partition ``index`` of ``total`` is drained; the caller that completes
    the set deletes the checkpoint and the markers. True when this call deleted it.

    Raises:
        UnavailableError / StorageError: storage failures (the checkpoint then expires).
    """
    prefix = _marker_prefix(path, checkpoint_id)
    store.put(f"{prefix}{index:010d}", b"")
    done = [m.path for m in store.list(prefix.rstrip("/"))]
    if len(done) < total:
        return False
    deleted = delete_checkpoint(path, store, checkpoint_id, clock=clock)
    store.delete_many(done)
    if deleted:
        log.info("temporary read checkpoint deleted [path=%s, id=%s]", path, checkpoint_id)
    return deleted
