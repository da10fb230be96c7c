"""Clones: a new database that starts from one or more sources' checkpoints, each source
optionally projected to a key range (a union when there are several).

Design doc 'checkpoints and clones', "Clones" and "Manifest Projection and Union", format
§5.5.6, and docs/rfcs/0007-projection-and-union-clones.md (the 0.17 rules; the planning is
pure, in :mod:`slatelib.core.clone_plan`).

Steps (each one safe to repeat, so a retry after a crash anywhere completes the clone):

1. Validate the arguments (paths, duplicates, projections). Read the clone's manifest (if
   any) and every source's (each must be initialized, not destroyed, with safe
   ``external_dbs`` paths: :mod:`slatelib.core.external_dbs`).
2. An existing clone manifest must name the sources (with their checkpoints, when given)
   among its external databases, and its own ``external_dbs`` paths must be safe. If it is
   initialized, every external database must still hold its final checkpoint, and there is
   nothing left to do.
3. Otherwise check, before the first write, what the clone will need: nothing of another
   database at the clone's path, the given checkpoints (present, unexpired), no data WAL
   SSTs after the last L0 flush of any source when projecting or unioning (0.17: "Projection
   and/or union with WAL is not supported"), the clone's manifest as planned from the
   sources (disjoint ranges, no external database inside the clone's path), and every
   inherited external database (readable, initialized, still holding the final checkpoint
   that the clone's own final checkpoint is copied from). With ``dry_run``, stop here and
   report the planned manifest. Then pick the source checkpoints: the given ones, or new
   ephemeral checkpoints of the sources' latest manifests that expire after 5 minutes (the
   window for retries), and check the WAL again on the pinned manifests.
4. Write the clone's manifest 1 (:func:`slatelib.core.clone_plan.plan_clone`) with
   ``initialized = false``; when another process created it first, start over at 1.
5. For every external database, make sure the clone's final checkpoint exists there
   (no expiry, copied from the entry's source checkpoint), for nested clones too.
6. One source: copy its WAL SSTs in ``(replay_after_wal_id, wal_id_last_seen]`` (only
   fences when projected). A union copies nothing: its WAL starts empty.
7. Set ``initialized = true``.

Where design doc 'checkpoints and clones' and 0.17 differ, 0.17 wins: entries inherited from a
clone parent use the parent's *final* checkpoint on the grandparent as their source (the
design doc keeps the parent's source checkpoint, which may be a long-expired ephemeral one),
and a one-source clone keeps the source's writer epoch (the design doc says + 1; 0.17 copies
it, docs/rfcs/0007-projection-and-union-clones.md).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.core.clone_plan import (
    CloneSource,
    PinnedSource,
    owned_sst_ids,
    plan_clone,
    plan_single_clone,
    unflushed_wal_ids,
    validate_sources,
    wants_empty_wal,
)
from slatelib.core.external_dbs import check_external_dbs
from slatelib.core.manifest import ExternalDb, Manifest
from slatelib.db_manifest import DbManifest, checkpoint_step
from slatelib.errors import (
    CommitStateUnknownError,
    ConflictError,
    InvalidArgumentError,
    InvalidDbStateError,
    ManifestMissingError,
    ObjectMissingError,
)
from slatelib.objstore import ObjectStore
from slatelib.ops.checkpoint import as_checkpoint_id, create_checkpoint_stored
from slatelib.ops.destroy import DELETING_MARKER, layout_objects
from slatelib.paths import DbPaths, is_under, join, normalize_path
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.store.wal_store import WalStore

log = logging.getLogger(__name__)

__all__ = [
    "EPHEMERAL_CHECKPOINT_LIFETIME_S",
    "PLANNED_EPHEMERAL_CHECKPOINT",
    "CloneReport",
    "CloneSource",
    "check_attached",
    "create_clone",
    "create_clone_from_sources",
    "owned_sst_ids",
    "plan_clone_manifest",
]

EPHEMERAL_CHECKPOINT_LIFETIME_S = 300.0
PLANNED_EPHEMERAL_CHECKPOINT = uuid.UUID(int=0)
"""In a dry run's planned manifest: the id of an ephemeral checkpoint not created yet."""
_MAX_ATTEMPTS = 16


@dataclass(frozen=True)
class CloneReport:
    """What :func:`create_clone` / :func:`create_clone_from_sources` did (or, with
    ``dry_run``, would do)."""

    clone_path: str
    parent_path: str
    """The (first) source's path."""
    source_checkpoint_id: uuid.UUID
    """The (first) source's checkpoint (:data:`PLANNED_EPHEMERAL_CHECKPOINT` in a dry run
    that would create it; the nil UUID too when a source left no external entry)."""
    manifest_id: int
    """The clone's latest manifest id (0 in a dry run that would create the clone)."""
    wal_ssts_copied: int
    created: bool
    sources: tuple[CloneSource, ...] = ()
    """The sources: normalized paths, checkpoints as resolved (when known)."""
    planned_manifest: Manifest | None = None
    """``dry_run`` only: the manifest 1 that would be written (``initialized = false``;
    ``slatelib.cli.render.render_manifest`` prints it as ``slate manifest`` does); None
    when the clone exists and is initialized already."""
    dry_run: bool = False


def plan_clone_manifest(
    parent: Manifest,
    parent_path: str,
    source_checkpoint_id: uuid.UUID,
    *,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
) -> Manifest:
    """The first manifest of a full clone of one parent, from the parent's manifest at the
    source checkpoint (:func:`slatelib.core.clone_plan.plan_single_clone`). Pure.

    Raises:
        InvalidDbStateError: an inherited external database has no final checkpoint.
    """
    return plan_single_clone(parent, parent_path, source_checkpoint_id, new_id=new_id)


def check_attached(clone: Manifest, parent_path: str, checkpoint: uuid.UUID | None) -> None:
    """Step 2: an existing clone must come from this parent (and checkpoint).

    Raises:
        InvalidDbStateError: it does not.
    """
    if not _attached(clone, parent_path, checkpoint):
        which = "" if checkpoint is None else f" at checkpoint {checkpoint}"
        raise InvalidDbStateError(
            f"a database that is not a clone of {parent_path!r}{which} already exists there"
        )


def _attached(clone: Manifest, path: str, checkpoint: uuid.UUID | None) -> bool:
    return any(e.path == path and (checkpoint is None or e.source_checkpoint_id == checkpoint)
               for e in clone.external_dbs)


def _check_attached_to_sources(clone: Manifest, sources: Sequence[CloneSource]) -> None:
    """Step 2 for several sources: every source the clone names must match (its checkpoint,
    when given), and it must name at least one. (A union source that kept no SSTs of its
    own leaves no entry; 0.17 then refuses every rerun, slatelib accepts it.)

    Raises:
        InvalidDbStateError: the clone is not one of these sources.
    """
    named = [s for s in sources if any(e.path == s.path for e in clone.external_dbs)]
    for s in named or sources[:1]:
        check_attached(clone, s.path, s.checkpoint)


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
    return checkpoint_step(final_id, clock=clock, source=entry.source_checkpoint_id,
                           check=partial(_check_initialized, entry.path))


def _check_initialized(path: str, m: Manifest) -> None:
    if not m.initialized:
        raise InvalidDbStateError(f"external database {path!r} is not initialized")


def _check_final_checkpoint_step(store: ObjectStore, entry: ExternalDb, clock: Clock
                                  ) -> StoredManifest:
    """Apply :func:`_final_checkpoint_step` to the latest manifest of ``entry``'s database
    without writing it; returns that manifest.

    Raises:
        InvalidDbStateError: as the step; also when that database has no manifest.
    """
    try:
        latest = DbManifest(store, entry.path).read_latest()
    except ManifestMissingError as exc:
        raise InvalidDbStateError(f"external database {entry.path!r} has no manifest") from exc
    _final_checkpoint_step(entry, clock)(latest)
    return latest


def _ensure_final_checkpoint(store: ObjectStore, entry: ExternalDb, clock: Clock,
                             current: StoredManifest | None = None) -> None:
    """Step 5 for one external database (``current``: its manifest as just read, tried
    first; a newer one makes the write conflict and the loop read again)."""
    DbManifest(store, entry.path).update(_final_checkpoint_step(entry, clock), clock=clock,
                                         current=current, what="final checkpoint")


def _check_parent(parent_root: str, parent: StoredManifest) -> None:
    """Step 1: a source must be a live database whose external paths can be inherited.

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


def _check_no_data_wal(store: ObjectStore, sources: Sequence[tuple[str, Manifest]],
                       *, written: str) -> None:
    """Step 3: projection and union need every source's WAL SSTs after its last L0 flush
    to be fences (empty objects), as 0.17 checks; a missing one is refused too (0.17 fails
    on it).

    Raises:
        InvalidDbStateError: naming each source and its WAL ids.
    """
    problems = []
    for path, m in sources:
        data, missing = [], []
        for wal_id in unflushed_wal_ids(m):
            try:
                size = store.head(DbPaths(path).wal(wal_id)).size
            except ObjectMissingError:
                missing.append(wal_id)
                continue
            if size > 0:
                data.append(wal_id)
        if data:
            problems.append(f"{path!r} has data in WAL SSTs {data} after its last L0 flush "
                            f"(replay_after_wal_id={m.replay_after_wal_id})")
        if missing:
            problems.append(f"{path!r} is missing WAL SSTs {missing} in "
                            f"({m.replay_after_wal_id}, {m.wal_id_last_seen}]")
    if problems:
        raise InvalidDbStateError(
            "projection and/or union with WAL is not supported (as in SlateDB 0.17): "
            + "; ".join(problems) + ". Flush the sources' memtables to L0 first (a writer's "
            "flush of the memtable, or close with a memtable flush), or clone each source "
            f"whole without a projection; {written}")


def _plan_checked(clone_root: str, sources: Sequence[tuple[StoredManifest, PinnedSource]]
                  ) -> Manifest:
    """The clone's manifest 1 from the sources' manifests, with every external database
    it names checked against the clone's path.

    Raises:
        CorruptObjectError: a source names an unsafe external path.
        InvalidDbStateError: an inherited external database has no final checkpoint.
        InvalidArgumentError: an external database would lie inside the clone; overlapping
            ranges; a union of sources with different segment extractors.
    """
    for stored, s in sources:
        check_external_dbs(s.path, stored.value, manifest_id=stored.id)
    planned = plan_clone([s for _, s in sources])
    parents = {s.path for _, s in sources}
    for e in planned.external_dbs:
        if is_under(e.path, clone_root):
            which = "its parent" if e.path in parents else "one of the parent's own"
            raise InvalidArgumentError(
                f"cannot clone into {clone_root!r}: the clone's external database {e.path!r} "
                f"({which} external databases) would lie inside it, where the clone's GC and "
                "destroy delete; choose a clone path outside it; nothing was written")
    return planned


def _at_checkpoint(ms: ManifestStore, latest: StoredManifest, wanted: uuid.UUID,
                   clock: Clock) -> StoredManifest:
    """The manifest a source checkpoint pins.

    Raises:
        InvalidDbStateError: the checkpoint is missing or expired.
    """
    cp = latest.value.checkpoint(wanted)
    if cp is None:
        raise InvalidDbStateError(f"checkpoint {wanted} not found in {ms.root!r}")
    if cp.is_expired(clock.now_ms() / 1000):
        raise InvalidDbStateError(
            f"checkpoint {wanted} of {ms.root!r} has expired (at {cp.expire_time_s})")
    if cp.manifest_id == latest.id:
        return latest  # the version it pins is the one in hand (versions never change)
    return ms.read(cp.manifest_id)


def _preflight(store: ObjectStore, clone_root: str, sources: Sequence[CloneSource],
               latest: Sequence[StoredManifest], clock: Clock) -> Manifest:
    """Step 3 before any write; returns the planned manifest 1 (ephemeral checkpoints not
    created yet appear as :data:`PLANNED_EPHEMERAL_CHECKPOINT`).

    Raises:
        InvalidDbStateError / InvalidArgumentError / CorruptObjectError: naming the
            problem.
    """
    _check_destination(store, clone_root)
    bases = []
    for s, cur in zip(sources, latest, strict=True):
        ms = DbManifest(store, s.path)
        base = cur if s.checkpoint is None else _at_checkpoint(ms, cur, s.checkpoint, clock)
        cp = s.checkpoint or PLANNED_EPHEMERAL_CHECKPOINT
        bases.append((base, PinnedSource(s.path, cp, base.value, s.projection)))
    if wants_empty_wal(sources):
        _check_no_data_wal(store, [(p.path, p.manifest) for _, p in bases],
                           written="nothing was written")
    planned = _plan_checked(clone_root, bases)
    for entry in planned.external_dbs:
        if entry.source_checkpoint_id == PLANNED_EPHEMERAL_CHECKPOINT:
            continue  # its source checkpoint is created next, from the latest manifest
        try:
            _check_final_checkpoint_step(store, entry, clock)
        except InvalidDbStateError as exc:
            raise InvalidDbStateError(
                f"cannot clone into {clone_root!r}: the parent's external database "
                f"{entry.path!r} cannot take the clone's final checkpoint: {exc}; "
                "nothing was written") from exc
    return planned


def _pin(store: ObjectStore, sources: Sequence[CloneSource], latest: Sequence[StoredManifest],
         clock: Clock) -> list[tuple[StoredManifest, PinnedSource]]:
    """Step 3: each source's checkpoint (a new ephemeral one when none was given) and the
    manifest it pins.

    ``latest``: each source's latest manifest as read by this attempt. A new ephemeral
    checkpoint is written on top of it (a newer version makes that write conflict and read
    again) and pins the version it writes, which is then known without reading it back
    (versions are written once, with put-if-absent). A given checkpoint is looked up in a
    fresh read of the latest manifest, as before.

    Raises:
        InvalidDbStateError: a checkpoint vanished meanwhile.
    """
    out = []
    for s, cur in zip(sources, latest, strict=True):
        ms = DbManifest(store, s.path)
        if s.checkpoint is None:
            cp, stored = create_checkpoint_stored(
                ms, lifetime=EPHEMERAL_CHECKPOINT_LIFETIME_S, clock=clock, current=cur)
            pinned = _at_checkpoint(ms, stored, cp.id, clock)
            source = cp.id
        else:
            source = s.checkpoint
            pinned = _at_checkpoint(ms, ms.read_latest(), source, clock)
        out.append((pinned, PinnedSource(s.path, source, pinned.value, s.projection)))
    return out


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


def _initialize(manifests: DbManifest, clock: Clock,
                current: StoredManifest | None = None) -> StoredManifest:
    """Step 7 (``current``: the clone's manifest as last written or read by this attempt,
    tried first; a newer one makes the write conflict and the loop read again)."""
    def mutate(cur: StoredManifest) -> Manifest | None:
        return None if cur.value.initialized else replace(cur.value, initialized=True)

    return manifests.update(mutate, clock=clock, current=current, what="initialize clone")


def create_clone(
    clone_path: str,
    parent_path: str,
    store: ObjectStore | str,
    parent_checkpoint: uuid.UUID | str | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    wal_store: ObjectStore | str | None = None,
) -> CloneReport:
    """Create ``clone_path`` as a full clone of ``parent_path``: one source, no projection
    (:func:`create_clone_from_sources`; steps in the module docstring).

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
    wanted = None if parent_checkpoint is None else as_checkpoint_id(parent_checkpoint)
    return create_clone_from_sources(clone_path, [CloneSource(parent_path, wanted)], store,
                                     clock=clock, wal_store=wal_store)


def create_clone_from_sources(
    clone_path: str,
    sources: Sequence[CloneSource],
    store: ObjectStore | str,
    *,
    clock: Clock = SYSTEM_CLOCK,
    dry_run: bool = False,
    wal_store: ObjectStore | str | None = None,
) -> CloneReport:
    """Create ``clone_path`` as a clone of ``sources``, each at its checkpoint (default: a
    new ephemeral one) and projected to its key range (default: all keys); several sources
    make a union (disjoint ranges). The manifest equals what SlateDB 0.17's clone builder
    writes (docs/rfcs/0007-projection-and-union-clones.md); steps in the module docstring.

    Everything that can be checked is checked before the first write, so a refused clone
    leaves the sources, their external databases and the clone's path unchanged (only a
    source written concurrently, between the checks and its new ephemeral checkpoint, can
    still fail it after that checkpoint; it then expires). A rerun after a crash completes
    the clone; one on a finished clone returns ``created=False``.

    Args:
        dry_run: check everything, write nothing, and return the planned manifest 1.
        wal_store: the object store (or URL) that keeps the sources' and the clone's WAL
            (0.17's ``with_wal_object_store``; None: ``store``'s own): the sources' WAL
            tails are read and the clone's WAL SSTs written there, as 0.17's clone builder
            of an ``Admin`` given that WAL store does.

    Raises:
        InvalidArgumentError: no source, bad or identical paths, the same source twice, an
            empty projection or one with an excluded start, overlapping key ranges, a clone
            path that contains a source or one of its external databases; a union of sources
            with different segment extractors (SlateDB RFC-0024).
        ManifestMissingError: a source does not exist.
        CorruptObjectError: a source's (or an existing clone's) manifest names an unsafe
            ``external_dbs`` path.
        InvalidDbStateError: a source is uninitialized or destroyed, a checkpoint is
            missing or expired (also when a retry comes after an ephemeral checkpoint
            expired: the message says how to start over), a projected or unioned source has
            data WAL SSTs after its last L0 flush (naming the source and WAL ids), an
            inherited external database cannot take the clone's final checkpoint, or another
            database (or what is left of one) is at ``clone_path``.
    """
    from slatelib.objstore import resolve_store, with_wal_store

    clone_root = normalize_path(clone_path, what="clone path", allow_empty=False)
    wanted = validate_sources(clone_root, sources)
    obj = with_wal_store(resolve_store(store), wal_store)
    clone_ms = DbManifest(obj, clone_root)
    for _ in range(_MAX_ATTEMPTS):
        current = clone_ms.try_read_latest()
        latest = [DbManifest(obj, s.path).read_latest() for s in wanted]
        for s, cur in zip(wanted, latest, strict=True):
            _check_parent(s.path, cur)
        if current is not None:
            _check_attached_to_sources(current.value, wanted)
            check_external_dbs(clone_root, current.value, manifest_id=current.id)
            if current.value.initialized:
                _check_final_checkpoints(obj, current.value)
                return _report(clone_root, wanted, current, 0, created=False, dry_run=dry_run)
            if dry_run:
                return _report(clone_root, wanted, current, 0, created=False, dry_run=True,
                               planned=current.value)
        else:
            for s, cur in zip(wanted, latest, strict=True):
                WalStore(obj, s.path).check_tail(cur.value, manifest_id=cur.id)
            planned = _preflight(obj, clone_root, wanted, latest, clock)
            if dry_run:
                return _planned_report(clone_root, wanted, planned)
            pinned = _pin(obj, wanted, latest, clock)
            for _, p in pinned:  # an existing checkpoint pins an older WAL tail
                WalStore(obj, p.path).check_tail(p.manifest)
            if wants_empty_wal(wanted):
                _check_no_data_wal(obj, [(p.path, p.manifest) for _, p in pinned], written=(
                    "the new ephemeral checkpoints of the sources expire in "
                    f"{EPHEMERAL_CHECKPOINT_LIFETIME_S:.0f}s; nothing else was written"))
            try:
                current = clone_ms.write(1, _plan_checked(clone_root, pinned))
            except (ConflictError, CommitStateUnknownError):
                continue  # created concurrently, or our write's outcome is unknown: re-read
        _ensure_final_checkpoints(obj, clone_root, current.value, clock)
        m = current.value
        copied = 0
        if len(wanted) == 1:
            copied = _copy_wal(obj, wanted[0].path, clone_root, m.replay_after_wal_id,
                               m.wal_id_last_seen)
        done = _initialize(clone_ms, clock, current)
        _check_not_destroyed_meanwhile(obj, clone_root, done)
        log.info("clone created [clone=%s, sources=%s, manifest_id=%d, wal_ssts=%d]",
                 clone_root, ",".join(s.path for s in wanted), done.id, copied)
        return _report(clone_root, wanted, done, copied, created=True)
    raise ConflictError(f"could not create clone {clone_root!r}: it kept changing")


def _ensure_final_checkpoints(store: ObjectStore, clone_root: str, clone: Manifest,
                              clock: Clock) -> None:
    """Step 5: every external database checked first, then given its final checkpoint.

    Raises:
        InvalidDbStateError: one cannot take it (saying how to start over).
    """
    entries = [e for e in clone.external_dbs if e.final_checkpoint_id is not None]
    checked: list[StoredManifest] = []
    for step in ("check", "ensure"):
        for i, entry in enumerate(entries):
            try:
                if step == "check":
                    checked.append(_check_final_checkpoint_step(store, entry, clock))
                else:
                    _ensure_final_checkpoint(store, entry, clock, checked[i])
            except InvalidDbStateError as exc:
                raise InvalidDbStateError(
                    f"clone {clone_root!r} cannot be completed: {exc}. Its uninitialized "
                    f"manifest clones checkpoint {entry.source_checkpoint_id} of "
                    f"{entry.path!r}; remove it with `slate --path {clone_root} destroy "
                    "--hard` (slatelib.destroy(path, store, soft=False)) and clone again"
                ) from exc


def _check_not_destroyed_meanwhile(store: ObjectStore, clone_root: str,
                                   done: StoredManifest) -> None:
    """After the ``initialized`` write: a hard destroy that ran meanwhile released the clone's
    final checkpoints and deleted its objects, so our write landed in an emptied directory.
    Remove that orphan manifest (nothing pins its SSTs any more) and fail.

    Raises:
        InvalidDbStateError: the clone was destroyed while it was being created.
    """
    try:
        _check_final_checkpoints(store, done.value)
    except InvalidDbStateError as exc:
        store.delete(DbPaths(clone_root).manifest(done.id))
        raise InvalidDbStateError(
            f"clone {clone_root!r} was destroyed while it was being created ({exc}); its "
            "last manifest was removed again: clone again"
        ) from exc


def _check_final_checkpoints(store: ObjectStore, clone: Manifest) -> None:
    for e in clone.external_dbs:
        if e.final_checkpoint_id is None:
            continue
        ext = DbManifest(store, e.path).read_latest().value
        if ext.checkpoint(e.final_checkpoint_id) is None:
            raise InvalidDbStateError(
                f"final checkpoint {e.final_checkpoint_id} of the clone is missing in {e.path!r}"
            )


def _resolved(clone: Manifest, sources: Sequence[CloneSource]) -> tuple[CloneSource, ...]:
    """The sources with the checkpoints the clone records for them (the last entry of
    each path: a direct parent comes after inherited entries)."""
    out = []
    for s in sources:
        cp = next((e.source_checkpoint_id for e in reversed(clone.external_dbs)
                   if e.path == s.path), s.checkpoint)
        out.append(replace(s, checkpoint=cp))
    return tuple(out)


def _report(clone: str, sources: Sequence[CloneSource], stored: StoredManifest, copied: int,
            *, created: bool, dry_run: bool = False, planned: Manifest | None = None
            ) -> CloneReport:
    resolved = _resolved(stored.value, sources)
    first = resolved[0]
    return CloneReport(clone, first.path, first.checkpoint or PLANNED_EPHEMERAL_CHECKPOINT,
                       stored.id, copied, created, resolved, planned, dry_run)


def _planned_report(clone: str, sources: Sequence[CloneSource], planned: Manifest
                    ) -> CloneReport:
    resolved = tuple(replace(s, checkpoint=s.checkpoint or PLANNED_EPHEMERAL_CHECKPOINT)
                     for s in sources)
    first = resolved[0]
    assert first.checkpoint is not None
    return CloneReport(clone, first.path, first.checkpoint, 0, 0, False, resolved, planned,
                       dry_run=True)
