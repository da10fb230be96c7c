"""Destroying a database (design doc 'checkpoints and clones', "Deleting a Database").

Soft (default): fence the writer (bump ``writer_epoch`` and write a WAL fence), drop the
writer checkpoint, then set ``destroyed_at_s``; the garbage collector deletes the database
after its grace period once no checkpoint is left. The same CAS also bumps
``compactor_epoch``: a running compactor would otherwise write the next manifest and, like
every 0.17.0 process, erase ``destroyed_at_s`` (see ``docs/rfcs/0002-destroyed-at-slot.md``).

Hard: refuse while any checkpoint is unexpired, a running slatelib writer's included (design doc
'checkpoints and clones' leaves stopping the writer to the user; a soft destroy first fences it);
otherwise set ``destroyed_at_s`` (fencing writer and compactor), remove this database's final
checkpoints from the databases it was cloned from (as 0.17's ``Admin.delete_db``), write a
``.deleting`` marker, delete every object of the database's layout (``manifest/``, ``wal/``,
``compacted/``, ``compactions/``, ``gc/``) with the current manifest last, then the marker. A rerun
after a crash finishes the job: the manifest (deleted last) or the marker proves the path is a
database. Objects under the path outside that layout (for example another database nested below it)
are left alone and reported.

A database with a separate WAL store (0.17's ``with_wal_object_store``) is destroyed through a
store that has it attached (``wal_store``): the WAL fence is written there and a hard destroy
deletes its ``wal/`` there, and also whatever lies in the main store's ``wal/``, as 0.17's
``Admin.delete_db`` given the WAL store does.

Both check everything they can before their first write, so that a refused destroy leaves
the database (and its parents) byte for byte unchanged: that the store holds the WAL tail
the latest manifest promises (:meth:`slatelib.store.wal_store.WalStore.check_tail`), the
``external_dbs`` paths of the
latest manifest (:mod:`slatelib.core.external_dbs`; a soft destroy hands them to GC, which
refuses unsafe ones), and, hard, the unexpired checkpoints and that every parent holding a
final checkpoint of this database can be read. A parent without any manifest has nothing to
release (as in 0.17's ``Admin.delete_db``); it is reported in ``missing_parents``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.core.checkpoints import (
    is_writer_checkpoint,
    live_checkpoints,
    without_writer_checkpoints,
)
from slatelib.core.external_dbs import check_external_dbs
from slatelib.core.invariants import check_writer_epoch
from slatelib.core.manifest import Checkpoint, Manifest
from slatelib.db_manifest import DbManifest
from slatelib.errors import (
    CorruptObjectError,
    InvalidDbStateError,
    ManifestMissingError,
)
from slatelib.objstore import ObjectStore, main_store_of
from slatelib.paths import DbPaths, is_under, join, normalize_path
from slatelib.store.manifest_store import StoredManifest
from slatelib.store.presence import object_exists
from slatelib.store.wal_store import WalStore
from slatelib.writer.fencing import fence_wal

log = logging.getLogger(__name__)

DELETING_MARKER = ".deleting"


@dataclass(frozen=True)
class DestroyReport:
    """What :func:`destroy` did."""

    path: str
    soft: bool
    destroyed_at_s: int | None
    deleted_objects: int = 0
    released_parents: tuple[str, ...] = ()
    kept_objects: tuple[str, ...] = ()
    missing_parents: tuple[str, ...] = ()
    """Parents named in ``external_dbs`` with a final checkpoint but no manifest (already
    destroyed, or not in this store: a clone's parents resolve relative to the store root
    the clone was created in)."""


def blocking_checkpoints(m: Manifest, now_s: float) -> list[Checkpoint]:
    """Unexpired checkpoints that block a hard destroy, writer checkpoints included: a live
    slatelib writer would write its next WAL SSTs and manifests onto the freed ids (an
    acknowledged write in a deleted database, a manifest naming deleted SSTs). A killed
    writer's checkpoint expires after ``writer.checkpoint_lifetime``; a soft destroy fences
    the writer and drops it at once."""
    return live_checkpoints(m, now_s)


def _describe_blocking(c: Checkpoint) -> str:
    expires = c.expire_time_s if c.expire_time_s is not None else "never"
    if is_writer_checkpoint(c):
        return (f"writer checkpoint {c.id} (manifest {c.manifest_id}, expires {expires}: a "
                "slatelib writer may still be running; close it, or soft-destroy first, "
                "which fences it and drops this checkpoint)")
    return f"{c.id} (manifest {c.manifest_id}, expires {expires})"


def plan_hard_destroy_mark(m: Manifest, now_s: int) -> Manifest | None:
    """Fence writer and compactor, drop writer checkpoints, set ``destroyed_at_s`` (one
    CAS, hard destroy). None when the database is already marked.

    Raises:
        InvalidDbStateError: unexpired checkpoints remain.
    """
    live = blocking_checkpoints(m, now_s)
    if live:
        raise InvalidDbStateError(
            "refusing to hard-destroy a database with unexpired checkpoints: "
            + ", ".join(_describe_blocking(c) for c in live)
        )
    if m.destroyed_at_s is not None:
        return None
    return replace(without_writer_checkpoints(m), writer_epoch=m.writer_epoch + 1,
                   compactor_epoch=m.compactor_epoch + 1, destroyed_at_s=now_s)


def destroy(
    path: str, store: ObjectStore | str, soft: bool = True, *, clock: Clock = SYSTEM_CLOCK,
    wal_store: ObjectStore | str | None = None,
) -> DestroyReport:
    """Destroy the database at ``path`` (soft by default; see the module docstring).
    ``wal_store``: the object store (or URL) that keeps its WAL (None: ``store``'s own).

    Nothing is written when it raises any of these but ``FencedError``.

    Raises:
        InvalidArgumentError: ``path`` is not a valid database path.
        ManifestMissingError: no database at ``path`` (and, hard, no unfinished deletion).
        CorruptObjectError: the latest manifest names an unsafe ``external_dbs`` path, or
            (hard) a parent holding a final checkpoint of this database does not decode.
        InvalidDbStateError: (hard) unexpired checkpoints remain, or the path holds objects
            but no database.
        FencedError: (soft) a writer opened the database while it was being destroyed.
        WalStoreMissingError: the store holds none of the latest manifest's WAL tail (its
            WAL store was not given).
    """
    from slatelib.objstore import resolve_store, with_wal_store

    root = normalize_path(path, what="database path", allow_empty=False)
    obj = with_wal_store(resolve_store(store), wal_store)
    manifests = DbManifest(obj, root)
    if soft:
        return _soft(obj, manifests, clock)
    return _hard(obj, manifests, clock)


def _check_externals(root: str, stored: StoredManifest) -> None:
    check_external_dbs(root, stored.value, manifest_id=stored.id)


def _soft(store: ObjectStore, manifests: DbManifest, clock: Clock) -> DestroyReport:
    latest = manifests.read_latest()
    _check_externals(manifests.root, latest)
    if latest.value.destroyed_at_s is not None:
        return DestroyReport(manifests.root, True, latest.value.destroyed_at_s)
    WalStore(store, manifests.root).check_tail(latest.value, manifest_id=latest.id)

    def claim(cur: StoredManifest) -> Manifest | None:
        _check_externals(manifests.root, cur)
        m = cur.value
        if m.destroyed_at_s is not None:
            return None
        return replace(without_writer_checkpoints(m), writer_epoch=m.writer_epoch + 1,
                       compactor_epoch=m.compactor_epoch + 1)

    claimed = manifests.update(claim, clock=clock, current=latest, what="soft destroy fence")
    epoch = claimed.value.writer_epoch
    if claimed.value.destroyed_at_s is None:
        wal = WalStore(store, manifests.root)
        fence_wal(wal.store, wal, manifests, claimed.value, epoch)

    def mark(cur: StoredManifest) -> Manifest | None:
        if cur.value.destroyed_at_s is not None:
            return None
        return replace(cur.value, destroyed_at_s=clock.now_ms() // 1000)

    done = manifests.update(mark, clock=clock, fence=lambda m: check_writer_epoch(m, epoch),
                            what="soft destroy")
    log.info("database soft-destroyed [path=%s, destroyed_at_s=%s]", manifests.root,
             done.value.destroyed_at_s)
    return DestroyReport(manifests.root, True, done.value.destroyed_at_s)


def layout_objects(store: ObjectStore, paths: DbPaths) -> list[str]:
    """Every object in the SlateDB directories of the database at ``paths.root``."""
    out: list[str] = []
    for d in _dirs(paths):
        out.extend(m.path for m in store.list(d))
    return out


def _check_parents(store: ObjectStore, root: str, stored: StoredManifest) -> None:
    """Read every parent holding a final checkpoint of ``root`` (one whose latest manifest
    does not decode could not be released after the database is marked)."""
    seen: set[str] = set()
    for i, e in enumerate(stored.value.external_dbs):
        if e.final_checkpoint_id is None or e.path in seen:
            continue
        seen.add(e.path)
        try:
            DbManifest(store, e.path).try_read_latest()
        except CorruptObjectError as exc:
            raise CorruptObjectError(
                f"refusing to hard-destroy {root!r} (manifest {stored.id}): its parent "
                f"external_dbs[{i}] {e.path!r} holds its final checkpoint "
                f"{e.final_checkpoint_id}, but the parent's latest manifest does not decode "
                f"({exc}); nothing was changed"
            ) from exc


def _release_parents(
    store: ObjectStore, root: str, m: Manifest, clock: Clock
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    released: list[str] = []
    missing: list[str] = []
    for e in m.external_dbs:
        final = e.final_checkpoint_id
        if final is None:
            continue
        parent = DbManifest(store, e.path)
        try:
            parent.delete_checkpoint(final, clock=clock)
        except ManifestMissingError:
            # Nothing left to release (as 0.17's delete_db), or not this store's database.
            log.warning("destroy found no parent manifest [root=%s, parent=%s, store=%s]",
                        root, e.path, store.url)
            missing.append(e.path)
            continue
        released.append(e.path)
    return tuple(released), tuple(missing)


def _hard(store: ObjectStore, manifests: DbManifest, clock: Clock) -> DestroyReport:
    root = manifests.root
    paths = DbPaths(root)
    marker = join(root, DELETING_MARKER)
    latest = manifests.try_read_latest()
    released: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    destroyed_at: int | None = None
    if latest is None:
        if not object_exists(store, marker):
            leftovers = layout_objects(store, paths)
            if leftovers:
                raise InvalidDbStateError(
                    f"{root!r} holds {len(leftovers)} objects but no manifest and no "
                    f"{DELETING_MARKER} marker: not deleting something that is not a database"
                )
            raise ManifestMissingError(f"no database at {root!r}", path=paths.manifest_dir)
    else:
        _check_externals(root, latest)
        plan_hard_destroy_mark(latest.value, clock.now_ms() // 1000)  # checkpoints
        if not object_exists(store, marker):  # a rerun may have deleted the WAL already
            WalStore(store, root).check_tail(latest.value, manifest_id=latest.id)
        _check_parents(store, root, latest)

        def mark(cur: StoredManifest) -> Manifest | None:
            _check_externals(root, cur)
            return plan_hard_destroy_mark(cur.value, clock.now_ms() // 1000)

        latest = manifests.update(mark, clock=clock, current=latest, what="hard destroy mark")
        destroyed_at = latest.value.destroyed_at_s
        released, missing = _release_parents(store, root, latest.value, clock)
        store.put(marker, b"")
    current = None if latest is None else manifests.path(latest.id)
    objects = [p for p in layout_objects(store, paths) if p != current]
    store.delete_many(objects)
    main = main_store_of(store)
    if main is not store:  # what the main store's own wal/ holds (0.17 deletes it too)
        strays = [m.path for m in main.list(paths.wal_dir)]
        main.delete_many(strays)
        objects += strays
    if current is not None:
        store.delete(current)
        objects.append(current)
    kept = tuple(m.path for m in store.list(root)
                 if m.path != marker and not any(is_under(m.path, d) for d in _dirs(paths)))
    store.delete(marker)
    log.info("database hard-destroyed [path=%s, deleted=%d, kept=%d]", root, len(objects), len(kept))
    return DestroyReport(root, False, destroyed_at, len(objects), released, kept, missing)


def _dirs(paths: DbPaths) -> tuple[str, ...]:
    return (paths.manifest_dir, paths.wal_dir, paths.compacted_dir, paths.compactions_dir,
            paths.gc_dir, paths.claims_dir, paths.rescale_dir)
