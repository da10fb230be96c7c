"""Checkpoints: create, refresh, delete and list, as the ``slate`` CLI does.

Design doc 'checkpoints and clones' and format §5.5.7.

A checkpoint created from the current manifest pins the version that first contains it
(latest + 1); created from another checkpoint (``source``) it pins that checkpoint's
manifest. Each change is one manifest CAS, retried on conflicts, and safe to retry after a
lost response. These are thin callers of the one home of checkpoint changes,
:class:`slatelib.db_manifest.DbManifest`.
"""

from __future__ import annotations

import logging
import uuid

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import parse_duration
from slatelib.core.checkpoints import U32_MAX
from slatelib.core.checkpoints import list_checkpoints as select_checkpoints
from slatelib.core.manifest import Checkpoint
from slatelib.db_manifest import DbManifest
from slatelib.errors import InvalidArgumentError
from slatelib.ids import parse_uuid
from slatelib.objstore import ObjectStore
from slatelib.paths import normalize_path
from slatelib.store.manifest_store import StoredManifest

log = logging.getLogger(__name__)

Lifetime = float | int | str | None
"""Seconds, a humantime string (``"7days 30min 10s"``), or None for no expiry."""


def lifetime_seconds(lifetime: Lifetime, clock: Clock = SYSTEM_CLOCK) -> float | None:
    """Seconds of a lifetime argument (None stays None).

    Raises:
        InvalidArgumentError: not a duration, negative, or so long that now + lifetime is
            past the last time a checkpoint can hold (u32 seconds, early 2106).
    """
    if lifetime is None:
        return None
    seconds = parse_duration(lifetime, what="checkpoint lifetime")
    if clock.now_ms() // 1000 + int(seconds) > U32_MAX:
        raise InvalidArgumentError(
            f"checkpoint lifetime {lifetime} puts the expiry past {U32_MAX} "
            "(2106-02-07T06:28:15Z, the last time a checkpoint can hold: u32 seconds)"
        )
    return seconds


def as_checkpoint_id(value: uuid.UUID | str) -> uuid.UUID:
    """A checkpoint id from a UUID or its text.

    Raises:
        InvalidArgumentError: not a UUID.
    """
    return value if isinstance(value, uuid.UUID) else parse_uuid(value)


def _manifests(path: str, store: ObjectStore | str) -> DbManifest:
    from slatelib.objstore import resolve_store

    return DbManifest(resolve_store(store), normalize_path(path, what="database path"))


def create_checkpoint(
    path: str,
    store: ObjectStore | str,
    *,
    lifetime: Lifetime = None,
    source: uuid.UUID | str | None = None,
    name: str | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> Checkpoint:
    """Create a checkpoint of the current manifest, or a copy of checkpoint ``source``.

    Raises:
        ManifestMissingError: no database at ``path``.
        InvalidDbStateError: the database is uninitialized or destroyed, or ``source`` is
            missing or expired.
        InvalidArgumentError: a bad lifetime or id.
    """
    cp, _ = create_checkpoint_stored(_manifests(path, store), lifetime=lifetime,
                                     source=source, name=name, clock=clock)
    return cp


def create_checkpoint_stored(
    manifests: DbManifest,
    *,
    lifetime: Lifetime = None,
    source: uuid.UUID | str | None = None,
    name: str | None = None,
    clock: Clock = SYSTEM_CLOCK,
    current: StoredManifest | None = None,
) -> tuple[Checkpoint, StoredManifest]:
    """:func:`create_checkpoint`, also returning the latest manifest it saw: the one it
    wrote (which the new checkpoint pins), or, when an earlier attempt of this call had
    landed, the latest one then. ``current``: a version just read, used for the first
    attempt instead of reading the latest again (a conflict re-reads, as always).

    Raises:
        as :func:`create_checkpoint`.
    """
    lifetime_s = lifetime_seconds(lifetime, clock)
    src = None if source is None else as_checkpoint_id(source)
    cp, stored = manifests.create_checkpoint(clock=clock, lifetime_s=lifetime_s, source=src,
                                             name=name, current=current)
    log.info("checkpoint created [path=%s, id=%s, manifest_id=%d, expire_time_s=%s]",
             manifests.root, cp.id, cp.manifest_id, cp.expire_time_s)
    return cp, stored


def refresh_checkpoint(
    path: str,
    store: ObjectStore | str,
    checkpoint_id: uuid.UUID | str,
    *,
    lifetime: Lifetime = None,
    clock: Clock = SYSTEM_CLOCK,
) -> Checkpoint:
    """Set a checkpoint's expiry to now + ``lifetime`` (None: it never expires).

    Raises:
        ManifestMissingError: no database at ``path``.
        InvalidDbStateError: no such checkpoint.
        InvalidArgumentError: a bad lifetime or id.
    """
    manifests = _manifests(path, store)
    lifetime_s = lifetime_seconds(lifetime, clock)
    return manifests.refresh_checkpoint(as_checkpoint_id(checkpoint_id), lifetime_s=lifetime_s,
                                        clock=clock)


def delete_checkpoint(
    path: str, store: ObjectStore | str, checkpoint_id: uuid.UUID | str, *, clock: Clock = SYSTEM_CLOCK
) -> bool:
    """Delete a checkpoint; False when there was none with that id (as 0.17, not an error).

    Raises:
        ManifestMissingError: no database at ``path``.
        InvalidArgumentError: a bad id.
    """
    manifests = _manifests(path, store)
    return manifests.delete_checkpoint(as_checkpoint_id(checkpoint_id), clock=clock)


def list_checkpoints(
    path: str, store: ObjectStore | str, *, name: str | None = None
) -> list[Checkpoint]:
    """Checkpoints of the latest manifest, optionally only those named ``name`` (``""``
    matches unnamed ones too, as in 0.17's ``Admin.list_checkpoints``).

    Raises:
        ManifestMissingError: no database at ``path``.
    """
    return select_checkpoints(_manifests(path, store).read_latest().value, name)
