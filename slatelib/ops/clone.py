"""Clones: a new database that starts from a parent's checkpoint.

Design doc 'checkpoints and clones', "Clones", and format §5.5.6.

Steps (each one safe to repeat, so a retry after a crash anywhere completes the clone):

1. Read the clone's manifest (if any) and the parent's (it must be initialized, not
   destroyed, with safe ``external_dbs`` paths: :mod:`slatelib.core.external_dbs`).
2. An existing clone manifest must name the parent (and the checkpoint, when given) among
   its external databases, and its own ``external_dbs`` paths must be safe. If it is
   initialized, every external database must still hold its final checkpoint, and there is
   nothing left to do.
3. Otherwise check, before the first write, what the clone will need: nothing of another
   database at the clone's path, the given checkpoint (present, unexpired), the clone's
   manifest as planned from the parent (no external database inside the clone's path),
   and every inherited external database (readable, initialized, still holding the
   parent's final checkpoint that the clone's own final checkpoint is copied from). Then
   pick the source checkpoint: the given one, or a new ephemeral checkpoint of the parent's
   latest manifest that expires after 5 minutes (the window for retries).
4. Write the clone's manifest 1 (:func:`plan_clone_manifest`) with ``initialized = false``;
   when another process created it first, start over at 1.
5. For every external database, make sure the clone's final checkpoint exists there
   (no expiry, copied from the entry's source checkpoint), for nested clones too.
6. Copy the parent's WAL SSTs in ``(replay_after_wal_id, wal_id_last_seen]``.
7. Set ``initialized = true``.

Where design doc 'checkpoints and clones' and 0.17 differ, 0.17 wins where the design doc would
break: entries inherited from a clone parent use the parent's *final* checkpoint on the grandparent
as their source (the design doc keeps the parent's source checkpoint, which may be a long-expired
ephemeral one).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.core.checkpoints import add_checkpoint, new_checkpoint
from slatelib.core.external_dbs import check_external_dbs
from slatelib.core.manifest import ExternalDb, Manifest
from slatelib.errors import (
    CommitStateUnknownError,
    ConflictError,
    InvalidArgumentError,
    InvalidDbStateError,
    ManifestMissingError,
    ObjectMissingError,
)
from slatelib.ids import Ulid
from slatelib.objstore import ObjectStore
from slatelib.ops.checkpoint import as_checkpoint_id, create_checkpoint
from slatelib.ops.destroy import DELETING_MARKER, layout_objects
from slatelib.paths import DbPaths, is_under, join, normalize_path
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
    (design doc 'checkpoints and clones', step "Write a new clone manifest"). Pure.

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


def _final_checkpoint_step(
    entry: ExternalDb, clock: Clock
) -> Callable[[StoredManifest], Manifest | None]:
    """The manifest mutation that adds the clone's final checkpoint to ``entry``'s
    database (None: it is there already).

    Raises (when applied):
        InvalidDbStateError: that database is uninitialized or destroyed, or the source
            checkpoint is missing or expired.
    """
    final_id = entry.final_checkpoint_id
    assert final_id is not None

    def mutate(cur: StoredManifest) -> Manifest | None:
        if not cur.value.initialized:
            raise InvalidDbStateError(f"external database {entry.path!r} is not initialized")
        if cur.value.checkpoint(final_id) is not None:
            return None
        cp = new_checkpoint(cur.value, cur.id + 1, now_s=clock.now_ms() / 1000,
                            source=entry.source_checkpoint_id, checkpoint_id=final_id)
        return add_checkpoint(cur.value, cp)

    return mutate


def _check_final_checkpoint_step(store: ObjectStore, entry: ExternalDb, clock: Clock) -> None:
    """Apply :func:`_final_checkpoint_step` to the latest manifest of ``entry``'s database
    without writing it.

    Raises:
        InvalidDbStateError: as the step; also when that database has no manifest.
    """
    try:
        latest = ManifestStore(store, entry.path).read_latest()
    except ManifestMissingError as exc:
        raise InvalidDbStateError(f"external database {entry.path!r} has no manifest") from exc
    _final_checkpoint_step(entry, clock)(latest)


def _ensure_final_checkpoint(store: ObjectStore, entry: ExternalDb, clock: Clock) -> None:
    update_versioned(ManifestStore(store, entry.path), _final_checkpoint_step(entry, clock),
                     clock=clock)


def _check_parent(parent_root: str, parent: StoredManifest) -> None:
    """Step 1: the parent must be a live database whose external paths can be inherited.

    Raises:
        InvalidDbStateError: uninitialized or destroyed.
        CorruptObjectError: an unsafe ``external_dbs`` path.
    """
    if not parent.value.initialized or parent.value.destroyed_at_s is not None:
        state = "destroyed" if parent.value.initialized else "not initialized"
        raise InvalidDbStateError(f"parent {parent_root!r} is {state}")
    check_external_dbs(parent_root, parent.value, manifest_id=parent.id)


def _check_destination(store: ObjectStore, clone_root: str) -> None:
    """Step 3: a path without a manifest must hold nothing of another database (leftover
    WAL SSTs would be replayed into the clone; an unfinished hard destroy would delete it).

    Raises:
        InvalidDbStateError: naming what is there.
    """
    paths = DbPaths(clone_root)
    try:
        store.head(join(clone_root, DELETING_MARKER))
    except ObjectMissingError:
        pass
    else:
        raise InvalidDbStateError(
            f"cannot clone into {clone_root!r}: a hard destroy of a database there is unfinished "
            f"({DELETING_MARKER} marker); finish it with `slate --path {clone_root} destroy "
            "--hard` first; nothing was written")
    leftovers = layout_objects(store, paths)
    if leftovers:
        raise InvalidDbStateError(
            f"cannot clone into {clone_root!r}: it has no manifest but holds {len(leftovers)} "
            f"objects in SlateDB's directories (e.g. {leftovers[0]!r}); remove them (or "
            "`destroy --hard` what is there) first; nothing was written")


def _plan_checked(
    clone_root: str, parent_root: str, base: StoredManifest, source: uuid.UUID
) -> Manifest:
    """The clone's manifest 1 from the parent's manifest ``base``, with every external
    database it names checked against the clone's path.

    Raises:
        CorruptObjectError: ``base`` names an unsafe external path.
        InvalidDbStateError: an inherited external database has no final checkpoint.
        InvalidArgumentError: an external database would lie inside the clone.
    """
    check_external_dbs(parent_root, base.value, manifest_id=base.id)
    planned = plan_clone_manifest(base.value, parent_root, source)
    for e in planned.external_dbs:
        if is_under(e.path, clone_root):
            raise InvalidArgumentError(
                f"cannot clone {parent_root!r} into {clone_root!r}: the clone's external "
                f"database {e.path!r} (its parent or one of the parent's own external "
                "databases) would lie inside it, where the clone's GC and destroy delete; "
                "choose a clone path outside it; nothing was written")
    return planned


def _preflight(
    store: ObjectStore,
    clone_root: str,
    parent_ms: ManifestStore,
    parent: StoredManifest,
    wanted: uuid.UUID | None,
    clock: Clock,
) -> None:
    """Step 3 before any write: destination, checkpoint, planned manifest, inherited
    external databases.

    Raises:
        InvalidDbStateError / InvalidArgumentError / CorruptObjectError: naming the problem.
    """
    parent_root = parent_ms.root
    _check_destination(store, clone_root)
    base = parent
    if wanted is not None:
        cp = parent.value.checkpoint(wanted)
        if cp is None:
            raise InvalidDbStateError(f"checkpoint {wanted} not found in {parent_root!r}")
        if cp.is_expired(clock.now_ms() / 1000):
            raise InvalidDbStateError(
                f"checkpoint {wanted} of {parent_root!r} has expired (at {cp.expire_time_s})")
        base = parent_ms.read(cp.manifest_id)
    planned = _plan_checked(clone_root, parent_root, base, wanted or uuid.UUID(int=0))
    for entry in planned.external_dbs[:-1]:  # inherited: the last one is the parent's
        try:
            _check_final_checkpoint_step(store, entry, clock)
        except InvalidDbStateError as exc:
            raise InvalidDbStateError(
                f"cannot clone {parent_root!r} into {clone_root!r}: the parent's external "
                f"database {entry.path!r} cannot take the clone's final checkpoint: {exc}; "
                "nothing was written") from exc


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

    Everything that can be checked is checked before the first write, so a refused clone
    leaves the parent, its external databases and the clone's path unchanged. (Only a
    parent manifest written concurrently between those checks and the new ephemeral
    checkpoint can still fail the clone after it; that checkpoint then expires.)

    Raises:
        InvalidArgumentError: bad or identical paths, a clone path that contains the parent
            or one of its external databases, a bad checkpoint id.
        ManifestMissingError: the parent does not exist.
        CorruptObjectError: the parent's (or an existing clone's) manifest names an unsafe
            ``external_dbs`` path.
        InvalidDbStateError: the parent is uninitialized or destroyed, the checkpoint is
            missing or expired (also when a retry comes after the ephemeral checkpoint
            expired: the message says how to start over), an inherited external database
            cannot take the clone's final checkpoint, or another database (or what is left
            of one) is at ``clone_path``.
    """
    from slatelib.objstore import resolve_store

    clone_root = normalize_path(clone_path, what="clone path", allow_empty=False)
    parent_root = normalize_path(parent_path, what="parent path", allow_empty=False)
    if clone_root == parent_root:
        raise InvalidArgumentError(f"a database cannot be cloned onto itself ({clone_root!r})")
    if is_under(parent_root, clone_root):
        raise InvalidArgumentError(
            f"cannot clone {parent_root!r} into {clone_root!r}: the parent would lie inside "
            "the clone, where the clone's GC and destroy delete; choose a clone path outside "
            "it (a clone inside its parent's path is fine)")
    obj = resolve_store(store)
    wanted = None if parent_checkpoint is None else as_checkpoint_id(parent_checkpoint)
    clone_ms, parent_ms = ManifestStore(obj, clone_root), ManifestStore(obj, parent_root)
    for _ in range(_MAX_ATTEMPTS):
        current = clone_ms.try_read_latest()
        parent = parent_ms.read_latest()
        _check_parent(parent_root, parent)
        if current is not None:
            check_attached(current.value, parent_root, wanted)
            check_external_dbs(clone_root, current.value, manifest_id=current.id)
            if current.value.initialized:
                _check_final_checkpoints(obj, current.value)
                return _report(clone_root, parent_root, current, 0, created=False)
        else:
            _preflight(obj, clone_root, parent_ms, parent, wanted, clock)
            source = wanted or create_checkpoint(
                parent_root, obj, lifetime=EPHEMERAL_CHECKPOINT_LIFETIME_S, clock=clock).id
            cp = parent_ms.read_latest().value.checkpoint(source)
            if cp is None:
                raise InvalidDbStateError(f"checkpoint {source} not found in {parent_root!r}")
            pinned = parent_ms.read(cp.manifest_id)
            try:
                current = clone_ms.write(
                    1, _plan_checked(clone_root, parent_root, pinned, source))
            except (ConflictError, CommitStateUnknownError):
                continue  # created concurrently, or our write's outcome is unknown: re-read
        _ensure_final_checkpoints(obj, clone_root, current.value, clock)
        m = current.value
        copied = _copy_wal(obj, parent_root, clone_root, m.replay_after_wal_id, m.wal_id_last_seen)
        done = _initialize(clone_ms, clock)
        log.info("clone created [clone=%s, parent=%s, manifest_id=%d, wal_ssts=%d]",
                 clone_root, parent_root, done.id, copied)
        return _report(clone_root, parent_root, done, copied, created=True)
    raise ConflictError(f"could not create clone {clone_root!r}: it kept changing")


def _ensure_final_checkpoints(store: ObjectStore, clone_root: str, clone: Manifest,
                              clock: Clock) -> None:
    """Step 5: every external database checked first, then given its final checkpoint.

    Raises:
        InvalidDbStateError: one cannot take it (saying how to start over).
    """
    entries = [e for e in clone.external_dbs if e.final_checkpoint_id is not None]
    for step in (_check_final_checkpoint_step, _ensure_final_checkpoint):
        for entry in entries:
            try:
                step(store, entry, clock)
            except InvalidDbStateError as exc:
                raise InvalidDbStateError(
                    f"clone {clone_root!r} cannot be completed: {exc}. Its uninitialized "
                    f"manifest clones checkpoint {entry.source_checkpoint_id} of "
                    f"{entry.path!r}; remove it with `slate --path {clone_root} destroy "
                    "--hard` (slatelib.destroy(path, store, soft=False)) and clone again"
                ) from exc


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
