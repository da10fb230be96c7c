"""Read one database's health numbers: :func:`collect_db_stats` (the I/O shell of
:mod:`slatelib.core.db_stats`).

What it costs on an object store: one recursive listing of the database root (one LIST
request per 1,000 objects), one GET of the latest manifest (plus one probe for a newer one),
one GET per manifest a live checkpoint pins, one GET of the latest compactions file, and one
GET per slatelib claim record of the current compactor epoch (usually one). No HEAD: ages
come from the listing.
"""

from __future__ import annotations

import logging

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.core.checkpoints import live_checkpoints
from slatelib.core.compactor_claim import ClaimRecord, ClaimVerdict, judge_claim
from slatelib.core.db_stats import (
    DbListing,
    DbStats,
    ListedObject,
    activity_from_listing,
    compute_db_stats,
    index_listing,
    versions_listed,
)
from slatelib.core.gc_plan import CompactionsState
from slatelib.core.gc_rules import GcOptions, ObjectKind
from slatelib.core.manifest import Manifest
from slatelib.db_manifest import DbManifest
from slatelib.errors import CorruptObjectError, DataError, ObjectMissingError, SlateError
from slatelib.format import seam
from slatelib.objstore import ObjectStore
from slatelib.ops.gc import read_compactions_state, read_latest_manifest
from slatelib.paths import DbPaths
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.db_root import database_root

log = logging.getLogger(__name__)

__all__ = ["DbStats", "collect_db_stats", "list_database"]


def list_database(store: ObjectStore, root: str) -> list[ListedObject]:
    """Every object below ``root`` as ``(path, size, last modified ms)`` (WAL objects from
    the WAL store when ``store`` has one attached).

    Raises:
        NotADatabaseRootError: ``root`` is a file, or lies below one.
        UnavailableError / StorageError: the listing failed.
    """
    with database_root(root):
        return [(m.path, m.size, m.last_modified_ms) for m in store.list(root)]


def _compactions(store: ObjectStore, root: str, newest: int | None) -> CompactionsState:
    """The compactions file ``newest`` (the listing's newest), as GC reads it: an
    undecodable one is reported, not raised."""
    if newest is None:
        return CompactionsState()
    try:
        got = CompactionsStore(store, root).try_read(newest)
    except (CorruptObjectError, DataError) as exc:
        return CompactionsState(error=str(exc))
    if got is None:  # collected since the listing: read the latest afresh
        return read_compactions_state(store, root)
    return CompactionsState(got.id, got.value)


def _judge(store: ObjectStore, root: str, ms: DbManifest, manifest: Manifest,
           listing: DbListing, compactions: CompactionsState,
           now_ms: int) -> ClaimVerdict | None:
    """Who holds the compactor epoch (None when a read failed: logged)."""
    comp = compactions.compactions
    records: list[ClaimRecord] = []
    try:
        for path in listing.claims.get(manifest.compactor_epoch, []):
            try:
                records.append(ClaimRecord.from_json(store.get(path), path=path))
            except (ObjectMissingError, CorruptObjectError):
                continue

        def read(mid: int) -> Manifest | None:
            got = ms.try_read(mid)
            return None if got is None else got.value

        activity = activity_from_listing(listing, listing.newest(ObjectKind.MANIFEST) or 0,
                                         comp, now_ms)
        return judge_claim(manifest, records, read,
                           compactions_epoch=None if comp is None else comp.compactor_epoch,
                           activity=activity)
    except SlateError as exc:
        log.warning("health: could not judge the compactor epoch [db=%s, error=%s]", root, exc)
        return None


def collect_db_stats(
    store: ObjectStore,
    db_path: str,
    *,
    now_ms: int | None = None,
    clock: Clock = SYSTEM_CLOCK,
    gc_options: GcOptions | None = None,
) -> DbStats:
    """The :class:`DbStats` of the database at ``db_path`` in ``store`` (module docstring
    for what it reads). ``now_ms`` (default: ``clock``) is the time checkpoints expire and
    GC decides by; ``gc_options`` the options of the GC backlog (default: GC's defaults).

    Raises:
        InvalidArgumentError: a malformed ``db_path``.
        NotADatabaseRootError: no manifest at ``db_path``, or it is a file.
        CorruptObjectError / UnsupportedFormatVersionError: the latest manifest, or one a
            live checkpoint pins, does not decode.
        UnavailableError / StorageError: the store failed.
    """
    root = DbPaths.of(db_path).root
    now = clock.now_ms() if now_ms is None else now_ms
    stats = _collect(store, root, now, gc_options)
    if stats.missing_ssts:
        # A compaction may have committed between the listing and the manifest read (its
        # outputs are then referenced but were not listed): look once more before
        # reporting referenced SSTs as missing.
        stats = _collect(store, root, now, gc_options)
    return stats


def _collect(store: ObjectStore, root: str, now: int, gc_options: GcOptions | None) -> DbStats:
    raw = list_database(store, root)
    newest_manifest, newest_compactions = versions_listed(root, raw)
    latest = read_latest_manifest(store, root, newest_manifest)
    compactions = _compactions(store, root, newest_compactions)
    ms = DbManifest(store, root)
    pinned: dict[int, Manifest] = {}
    missing: list[int] = []
    for mid in sorted({c.manifest_id for c in live_checkpoints(latest.value, now / 1000)}):
        if mid == latest.id:
            continue
        got = ms.try_read(mid)
        if got is None:
            missing.append(mid)
        else:
            pinned[mid] = got.value
    ids = set(latest.value.referenced_sst_ids())
    for m in pinned.values():
        ids |= m.referenced_sst_ids()
    order = sorted(ids)
    known = dict(zip(seam.ulid_names(*DbPaths(root).compacted_parts, order), order,
                     strict=True))
    listing = index_listing(root, raw, known)
    verdict = _judge(store, root, ms, latest.value, listing, compactions, now)
    return compute_db_stats(root, latest.id, latest.value, pinned, listing, compactions,
                            now_ms=now, verdict=verdict, pinned_missing=missing,
                            gc_options=gc_options)
