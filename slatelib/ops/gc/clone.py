"""The manifest writes of GC, each one CAS of :class:`slatelib.db_manifest.DbManifest`:
expired-checkpoint removal, releasing a clone's final checkpoint in its parent, and
dropping a detached external database from the clone's manifest.

Every mutation is recomputed on the version it is applied to, so a conflicting writer
(e.g. a reader refreshing its checkpoint) is seen on the retry and respected.
"""

from __future__ import annotations

import logging
import uuid

from slatelib.clock import Clock
from slatelib.core.manifest import Checkpoint, Manifest
from slatelib.db_manifest import DbManifest
from slatelib.objstore import ObjectStore
from slatelib.store.sequenced import Versioned

log = logging.getLogger(__name__)


def remove_expired_checkpoints(
    store: ObjectStore, root: str, clock: Clock, current: Versioned[Manifest] | None = None
) -> tuple[Versioned[Manifest], list[Checkpoint]]:
    """Remove the checkpoints that have expired by ``clock`` (0.17 keeps one while
    ``expire_time > now``), starting from ``current`` when given (the latest version, as
    read by the caller). Returns the resulting version and what was removed.

    Raises:
        ManifestMissingError: no manifest.
        ConflictError: still conflicting after the CAS loop's attempts.
    """
    got, removed = DbManifest(store, root).remove_expired_checkpoints(clock=clock,
                                                                      current=current)
    if removed:
        log.info("gc removed expired checkpoints [root=%s, count=%d, manifest=%d]",
                 root, len(removed), got.id)
    return got, removed


def release_checkpoint(store: ObjectStore, db_root: str, checkpoint_id: uuid.UUID,
                       clock: Clock) -> bool:
    """Delete checkpoint ``checkpoint_id`` from the database at ``db_root`` (idempotent;
    :meth:`DbManifest.delete_checkpoint`). True when this call removed it, False when it
    was already gone.

    Raises:
        ManifestMissingError: ``db_root`` has no manifest.
        ConflictError: still conflicting after the CAS loop's attempts.
    """
    return DbManifest(store, db_root).delete_checkpoint(checkpoint_id, clock=clock)


def drop_external_dbs(store: ObjectStore, root: str, final_ids: set[uuid.UUID],
                      clock: Clock) -> Versioned[Manifest]:
    """Remove the external databases detached under ``final_ids`` from this database's
    manifest (only entries whose ``sst_ids`` are still empty).

    Raises:
        ConflictError: still conflicting after the CAS loop's attempts.
    """
    return DbManifest(store, root).drop_external_dbs(final_ids, clock=clock)
