"""What GC reads before it decides: manifests, compactor state, boundaries, listings.

Every read that a deletion depends on happens here, so that the orchestrator
(:mod:`slatelib.ops.gc.collect`) can repeat it right before deleting (0.17 re-reads the
manifest at the start of every GC task).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from slatelib.core.gc_plan import CompactionsState, LiveSet, checkpoint_manifest_ids
from slatelib.core.manifest import Manifest
from slatelib.db_manifest import DbManifest
from slatelib.errors import (
    AlreadyExistsError,
    ConflictError,
    CorruptObjectError,
    DataError,
    ManifestMissingError,
    NotADatabaseRootError,
    ObjectMissingError,
    StorageError,
)
from slatelib.objstore import ObjectMeta, ObjectStore
from slatelib.paths import DbPaths, join
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.db_root import database_root
from slatelib.store.sequenced import Versioned

log = logging.getLogger(__name__)

MAX_PROBES = 64
BOUNDARY_ATTEMPTS = 16
NO_IF_MATCH_HINT = (
    "on a store without conditional overwrites (If-Match) run GC with [gc] "
    "boundary_files_enabled = false (--no-boundary-files, 0.17's disable_boundary_files) and a "
    "manifest and compactions min_age longer than any writer may stall "
    "(docs/rfcs/0013-gc-options.md); nothing of this kind was deleted")


GC_REFUSAL = (", GC refuses to run here (to collect every database below a prefix, use "
              "--discover)")


def read_latest_manifest(
    store: ObjectStore, root: str, known_id: int | None = None, *, refusal: str = GC_REFUSAL
) -> Versioned[Manifest]:
    """The latest manifest, probed forward by id (``id + 1, id + 2, ...``) from ``known_id``
    (a version this run already read, so no listing is needed, as 0.17 probes from its
    cached id) or else from the newest listed version above the boundary, so that a stale
    listing cannot hide a newer version. ``refusal`` ends the message of a root without a
    manifest (GC's by default).

    Raises:
        NotADatabaseRootError: there is no manifest at all, or the root is a file (or lies
            below one).
        CorruptObjectError / UnsupportedFormatVersionError: the latest does not decode.
    """
    ms = DbManifest(store, root)
    got = ms.try_read(known_id) if known_id is not None else None
    if got is None:
        got = ms.try_read_latest()
    if got is None:
        raise NotADatabaseRootError(root, detail=refusal)
    for _ in range(MAX_PROBES):
        nxt = ms.try_read(got.id + 1)
        if nxt is None:
            return got
        got = nxt
    return ms.read_latest()


def read_compactions_state(store: ObjectStore, root: str) -> CompactionsState:
    """The latest compactions file, or why there is none GC can use (never raises for a
    missing or undecodable file: GC then deletes nothing in ``compacted/``).

    Raises:
        UnavailableError / StorageError: the store itself failed.
        NotADatabaseRootError: the root is a file, or lies below one.
    """
    cs = CompactionsStore(store, root)
    try:
        got = cs.try_read_latest()
    except NotADatabaseRootError:
        raise
    except (CorruptObjectError, DataError) as exc:
        log.warning("gc compactions state unreadable [root=%s, error=%s]", root, exc)
        return CompactionsState(error=str(exc))
    if got is None:
        return CompactionsState()
    return CompactionsState(got.id, got.value)


def read_live_set(store: ObjectStore, root: str, latest: Versioned[Manifest]) -> LiveSet:
    """The latest manifest plus every manifest its checkpoints pin.

    Raises:
        ManifestMissingError: a checkpoint pins a manifest that does not exist (GC refuses:
            it could not tell what the checkpoint protects).
        CorruptObjectError: a pinned manifest does not decode.
    """
    ms = DbManifest(store, root)
    pinned: dict[int, Manifest] = {}
    for mid in checkpoint_manifest_ids(latest.value):
        if mid == latest.id:
            continue
        got = ms.try_read(mid)
        if got is None:
            holders = [str(c.id) for c in latest.value.checkpoints if c.manifest_id == mid]
            raise ManifestMissingError(
                f"checkpoint {', '.join(holders)} of {root!r} pins manifest {mid}, which is "
                "missing: GC refuses to run on a database whose checkpoints it cannot resolve",
                path=ms.path(mid),
            )
        pinned[mid] = got.value
    return LiveSet(latest.id, latest.value, pinned)


def check_listed(root: str, directory: str, meta: ObjectMeta) -> ObjectMeta:
    """Refuse a listed object that is not below ``<root>/<directory>/``: the store
    returned something GC did not ask for, so nothing it returned can be trusted.

    Raises:
        StorageError: naming the object and the directory.
    """
    prefix = join(root, directory) + "/"
    if not meta.path.startswith(prefix):
        raise StorageError(
            f"listing of {prefix!r} returned {meta.path!r}, which is outside it: GC refuses "
            "to delete anything based on this listing"
        )
    return meta


def list_directory(
    store: ObjectStore, root: str, directory: str,
    start_after: str | None = None, end_before: str | None = None,
) -> Iterator[ObjectMeta]:
    """Every object below ``<root>/<directory>/`` (validated by :func:`check_listed`).

    Raises:
        StorageError: the listing returned a path outside the directory.
        NotADatabaseRootError: the root is a file, or lies below one.
    """
    prefix = join(root, directory)
    with database_root(root):
        for meta in store.list(prefix, start_after=start_after, end_before=end_before):
            yield check_listed(root, directory, meta)


# ------------------------------------------------------------------------- boundaries
def boundary_path(root: str, kind: str) -> str:
    """``<root>/gc/manifest.boundary`` for ``kind == "manifest"``, else the compactions one."""
    paths = DbPaths.of(root)
    return paths.manifest_boundary if kind == "manifest" else paths.compactions_boundary


def read_boundary(store: ObjectStore, path: str) -> tuple[int, str | None, bool]:
    """``(value, e_tag, exists)`` of a boundary file (0 when missing).

    Raises:
        CorruptObjectError: the file does not hold a decimal id.
    """
    try:
        data, meta = store.get_with_meta(path)
    except ObjectMissingError:
        return 0, None, False
    text = data.decode("ascii", errors="replace").strip()
    if not text.isdigit():
        raise CorruptObjectError(f"boundary file holds {text!r}", path=path)
    return int(text), meta.e_tag, True


def advance_boundary(store: ObjectStore, path: str, target: int) -> tuple[int, int]:
    """Raise the boundary file to ``target`` (SlateDB RFC-0026) as 0.17 does: create it when
    missing, else overwrite it conditionally on the ETag just read; re-read and retry when
    another GC moved it. Never lowers it. Returns ``(before, after)``.

    On a local disk the conditional overwrite is slatelib's own (a lock file next to the
    boundary, docs/rfcs/0006-local-conditional-put.md), so unlike 0.17's GC, which cannot
    overwrite there, slatelib advances the boundary on every run.

    A store without conditional overwrites (``If-Match``; it reports no ETag, or refuses
    the overwrite) cannot advance an existing boundary: the error says to run GC there with
    ``boundary_files_enabled = false`` (0.17's option for such stores,
    docs/rfcs/0013-gc-options.md), which never calls this.

    Raises:
        StorageError: the store reports no ETag for an existing boundary file, or cannot
            overwrite conditionally.
        ConflictError: still racing after several attempts.
    """
    before: int | None = None
    for _ in range(BOUNDARY_ATTEMPTS):
        current, e_tag, exists = read_boundary(store, path)
        before = current if before is None else before
        if current >= target:
            return before, current
        if exists and e_tag is None:
            raise StorageError(f"{path}: the store reports no ETag, so the boundary cannot be "
                               f"advanced safely; {NO_IF_MATCH_HINT}")
        try:
            store.put_if_match(path, str(target).encode("ascii"), e_tag if exists else None)
        except (AlreadyExistsError, ConflictError):
            log.info("gc boundary moved concurrently, retrying [path=%s]", path)
            continue
        except StorageError as exc:
            verb = "overwrite" if exists else "create"
            raise StorageError(f"{path}: the store cannot {verb} the boundary conditionally "
                               f"({exc}); {NO_IF_MATCH_HINT}") from exc
        log.info("gc advanced boundary [path=%s, from=%d, to=%d]", path, current, target)
        return before, target
    raise ConflictError(f"{path}: boundary kept changing; gave up advancing it to {target}")
