"""Clones (seed 002 "Clones"): a new database that starts from a parent's checkpoint.

Steps (each one safe to repeat, so a retry after a crash anywhere completes the clone):

1. Read the clone's manifest (if any) and the parent's (it must be initialized).
2. An existing clone manifest must name the parent (and the checkpoint, when given) among
   its external databases. If it is initialized, every external database must still hold
   its final checkpoint, and there is nothing left to do.
3. Otherwise pick the source checkpoint: the given one, or a new ephemeral checkpoint of the
   parent's latest manifest that expires after 5 minutes (the window for retries).
4. Write the clone's manifest 1 (:func:`plan_clone_manifest`) with ``initialized = false``;
   when another process created it first, start over at 1.
5. For every external database, make sure the clone's final checkpoint exists there
   (no expiry, copied from the entry's source checkpoint), for nested clones too.
6. Copy the parent's WAL SSTs in ``(replay_after_wal_id, wal_id_last_seen]``.
7. Set ``initialized = true``.

Where seed 002 and 0.17 differ, 0.17 wins where the seed would break: entries inherited from
a clone parent use the parent's *final* checkpoint on the grandparent as their source (the
seed keeps the parent's source checkpoint, which may be a long-expired ephemeral one).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.core.checkpoints import add_checkpoint, new_checkpoint
from slatelib.core.manifest import ExternalDb, Manifest
from slatelib.errors import (
    CommitStateUnknownError,
    ConflictError,
    InvalidArgumentError,
    InvalidDbStateError,
    ObjectMissingError,
)
from slatelib.ids import Ulid
from slatelib.objstore import ObjectStore
from slatelib.ops.checkpoint import as_checkpoint_id, create_checkpoint
from slatelib.paths import DbPaths, normalize_path
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.txn import update_versioned

log = logging.getLogger(__name__)

EPHEMERAL_CHECKPOINT_LIFETIME_S = 300.0
_MAX_ATTEMPTS = 16


@dataclass(frozen=True)
class CloneReport:
    """What :func:`create_clone` did."""

    clone_path: str
    parent_path: str
    source_checkpoint_id: uuid.UUID
    manifest_id: int
    wal_ssts_copied: int
    created: bool


def owned_sst_ids(m: Manifest) -> tuple[Ulid, ...]:
    """SST ids stored under the database's own path (referenced, not external)."""
    external = {s for e in m.external_dbs for s in e.sst_ids}
    seen: dict[Ulid, None] = {}
    for v in m.all_views():
        if v.sst_id not in external:
            seen.setdefault(v.sst_id, None)
    return tuple(seen)


def plan_clone_manifest(
    parent: Manifest,
    parent_path: str,
    source_checkpoint_id: uuid.UUID,
    *,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
) -> Manifest:
    """The clone's first manifest from the parent's manifest at the source checkpoint
    (seed 002 step "Write a new clone manifest"). Pure.

    Raises:
        InvalidDbStateError: an inherited external database has no final checkpoint.
    """
    external: list[ExternalDb] = []
    for e in parent.external_dbs:
        if not e.sst_ids:
            continue
        if e.final_checkpoint_id is None:
            raise InvalidDbStateError(
                f"the parent's external database {e.path!r} has no final checkpoint"
            )
        external.append(ExternalDb(e.path, e.final_checkpoint_id, new_id(), e.sst_ids))
    external.append(ExternalDb(parent_path, source_checkpoint_id, new_id(), owned_sst_ids(parent)))
    return replace(
        parent,
        external_dbs=tuple(external),
        checkpoints=(),
        initialized=False,
        writer_epoch=parent.writer_epoch + 1,
        destroyed_at_s=None,
    )


def check_attached(clone: Manifest, parent_path: str, checkpoint: uuid.UUID | None) -> None:
    """Step 2: an existing clone must come from this parent (and checkpoint).

    Raises:
        InvalidDbStateError: it does not.
    """
    if not any(
        e.path == parent_path and (checkpoint is None or e.source_checkpoint_id == checkpoint)
        for e in clone.external_dbs
    ):
        which = "" if checkpoint is None else f" at checkpoint {checkpoint}"
        raise InvalidDbStateError(
            f"a database that is not a clone of {parent_path!r}{which} already exists there"
        )


def _ensure_final_checkpoint(store: ObjectStore, entry: ExternalDb, clock: Clock) -> None:
    final_id = entry.final_checkpoint_id
    assert final_id is not None
    manifests = ManifestStore(store, entry.path)

    def mutate(cur: StoredManifest) -> Manifest | None:
        if not cur.value.initialized:
            raise InvalidDbStateError(f"external database {entry.path!r} is not initialized")
        if cur.value.checkpoint(final_id) is not None:
            return None
        cp = new_checkpoint(cur.value, cur.id + 1, now_s=clock.now_ms() / 1000,
                            source=entry.source_checkpoint_id, checkpoint_id=final_id)
        return add_checkpoint(cur.value, cp)

    update_versioned(manifests, mutate, clock=clock)


def _copy_wal(store: ObjectStore, parent: str, clone: str, after: int, last: int) -> int:
    src, dst = DbPaths(parent), DbPaths(clone)
    copied = 0
    for wal_id in range(after + 1, last + 1):
        try:
            data = store.get(src.wal(wal_id))
        except ObjectMissingError:
            # Nothing past a gap is readable (replay stops there), so nothing to copy.
            log.warning("parent WAL missing; copying stops there [parent=%s, wal_id=%d]",
                        parent, wal_id)
            break
        store.put(dst.wal(wal_id), data)
        copied += 1
    return copied


def _initialize(manifests: ManifestStore, clock: Clock) -> StoredManifest:
    def mutate(cur: StoredManifest) -> Manifest | None:
        return None if cur.value.initialized else replace(cur.value, initialized=True)

    return update_versioned(manifests, mutate, clock=clock)


def create_clone(
    clone_path: str,
    parent_path: str,
    store: ObjectStore | str,
    parent_checkpoint: uuid.UUID | str | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
) -> CloneReport:
    """Create ``clone_path`` as a clone of ``parent_path`` (steps in the module docstring).

    Raises:
        InvalidArgumentError: bad or identical paths, a bad checkpoint id.
        ManifestMissingError: the parent does not exist.
        InvalidDbStateError: the parent is uninitialized or destroyed, the checkpoint is
            missing or expired (also when a retry comes after the ephemeral checkpoint
            expired: the message says how to start over), or another database is at
            ``clone_path``.
    """
    from slatelib.reader import resolve_store

    clone_root = normalize_path(clone_path, what="clone path", allow_empty=False)
    parent_root = normalize_path(parent_path, what="parent path", allow_empty=False)
    if clone_root == parent_root:
        raise InvalidArgumentError(f"a database cannot be cloned onto itself ({clone_root!r})")
    obj = resolve_store(store)
    wanted = None if parent_checkpoint is None else as_checkpoint_id(parent_checkpoint)
    clone_ms, parent_ms = ManifestStore(obj, clone_root), ManifestStore(obj, parent_root)
    for _ in range(_MAX_ATTEMPTS):
        current = clone_ms.try_read_latest()
        parent = parent_ms.read_latest()
        if not parent.value.initialized or parent.value.destroyed_at_s is not None:
            state = "destroyed" if parent.value.initialized else "not initialized"
            raise InvalidDbStateError(f"parent {parent_root!r} is {state}")
        if current is not None:
            check_attached(current.value, parent_root, wanted)
            if current.value.initialized:
                _check_final_checkpoints(obj, current.value)
                return _report(clone_root, parent_root, current, 0, created=False)
        else:
            source = wanted or create_checkpoint(
                parent_root, obj, lifetime=EPHEMERAL_CHECKPOINT_LIFETIME_S, clock=clock).id
            cp = parent_ms.read_latest().value.checkpoint(source)
            if cp is None:
                raise InvalidDbStateError(f"checkpoint {source} not found in {parent_root!r}")
            pinned = parent_ms.read(cp.manifest_id)
            try:
                current = clone_ms.write(1, plan_clone_manifest(pinned.value, parent_root, source))
            except (ConflictError, CommitStateUnknownError):
                continue  # created concurrently, or our write's outcome is unknown: re-read
        for entry in current.value.external_dbs:
            if entry.final_checkpoint_id is not None:
                try:
                    _ensure_final_checkpoint(obj, entry, clock)
                except InvalidDbStateError as exc:
                    raise InvalidDbStateError(
                        f"clone {clone_root!r} cannot be completed: {exc}. Its uninitialized "
                        f"manifest clones checkpoint {entry.source_checkpoint_id} of "
                        f"{entry.path!r}; remove it with `slate --path {clone_root} destroy "
                        "--hard` (slatelib.destroy(path, store, soft=False)) and clone again"
                    ) from exc
        m = current.value
        copied = _copy_wal(obj, parent_root, clone_root, m.replay_after_wal_id, m.wal_id_last_seen)
        done = _initialize(clone_ms, clock)
        log.info("clone created [clone=%s, parent=%s, manifest_id=%d, wal_ssts=%d]",
                 clone_root, parent_root, done.id, copied)
        return _report(clone_root, parent_root, done, copied, created=True)
    raise ConflictError(f"could not create clone {clone_root!r}: it kept changing")


def _check_final_checkpoints(store: ObjectStore, clone: Manifest) -> None:
    for e in clone.external_dbs:
        if e.final_checkpoint_id is None:
            continue
        ext = ManifestStore(store, e.path).read_latest().value
        if ext.checkpoint(e.final_checkpoint_id) is None:
            raise InvalidDbStateError(
                f"final checkpoint {e.final_checkpoint_id} of the clone is missing in {e.path!r}"
            )


def _report(clone: str, parent: str, stored: StoredManifest, copied: int, *, created: bool) -> CloneReport:
    source = next(e.source_checkpoint_id for e in reversed(stored.value.external_dbs)
                  if e.path == parent)
    return CloneReport(clone, parent, source, stored.id, copied, created)
