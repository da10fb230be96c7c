"""Checkpoint rules, as 0.17.0 applies them. Pure manifest transformations.

The rules are those of design doc 'checkpoints and clones' (docs/design.md).

A checkpoint pins a manifest version against GC. Created from the current manifest it pins
the version that first contains it (``latest + 1``); created from another checkpoint it
copies that checkpoint's ``manifest_id``. Expiry and creation times are Unix seconds (u32);
no expiry is stored as 0 and modelled as None.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import replace

from slatelib.core.manifest import Checkpoint, Manifest
from slatelib.errors import InvalidArgumentError, InvalidDbStateError

U32_MAX = 0xFFFFFFFF


def _secs(value: float, what: str) -> int:
    s = int(math.floor(value))
    if not 0 <= s <= U32_MAX:
        raise InvalidArgumentError(f"{what} {s} is outside the u32 range of checkpoint times")
    return s


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates, e.g. undecodable bytes in argv
        return False
    return True


def check_writable_state(m: Manifest, what: str = "operation") -> None:
    """Raise :class:`InvalidDbStateError` for an uninitialized or destroyed database."""
    if not m.initialized:
        raise InvalidDbStateError(f"{what}: the database is not initialized")
    if m.destroyed_at_s is not None:
        raise InvalidDbStateError(f"{what}: the database was destroyed at {m.destroyed_at_s}")


def new_checkpoint(
    m: Manifest,
    next_manifest_id: int,
    *,
    now_s: float,
    lifetime_s: float | None = None,
    source: uuid.UUID | None = None,
    name: str | None = None,
    checkpoint_id: uuid.UUID | None = None,
    writer_epoch: int | None = None,
) -> Checkpoint:
    """A checkpoint to add to ``m`` when writing it as ``next_manifest_id``.

    Raises:
        InvalidDbStateError: the database is uninitialized or destroyed, or ``source`` is
            missing or expired.
        InvalidArgumentError: a negative lifetime, a time outside u32, or the reserved
            name :data:`WRITER_CHECKPOINT_NAME`.
    """
    if lifetime_s is not None and lifetime_s < 0:
        raise InvalidArgumentError(f"checkpoint lifetime must not be negative: {lifetime_s}")
    if name is not None and not _is_utf8(name):
        raise InvalidArgumentError(f"checkpoint name {name!r} is not valid UTF-8")
    if name == WRITER_CHECKPOINT_NAME:
        raise InvalidArgumentError(
            f"the checkpoint name {name!r} is reserved for writer checkpoints (the next writer "
            "would drop such a checkpoint)"
        )
    if source is None:
        check_writable_state(m, "create checkpoint")
        manifest_id = next_manifest_id
    else:
        if m.destroyed_at_s is not None:
            raise InvalidDbStateError("create checkpoint: the database was destroyed")
        src = m.checkpoint(source)
        if src is None:
            raise InvalidDbStateError(f"create checkpoint: source checkpoint {source} not found")
        if src.is_expired(now_s):
            raise InvalidDbStateError(f"create checkpoint: source checkpoint {source} has expired")
        manifest_id = src.manifest_id
    expire = None if lifetime_s is None else _secs(now_s + lifetime_s, "expiry time")
    return Checkpoint(
        id=checkpoint_id or uuid.uuid4(),
        manifest_id=manifest_id,
        expire_time_s=expire,
        create_time_s=_secs(now_s, "creation time"),
        writer_epoch=writer_epoch,
        name=name,
    )


def add_checkpoint(m: Manifest, cp: Checkpoint) -> Manifest:
    if m.checkpoint(cp.id) is not None:
        raise InvalidArgumentError(f"checkpoint {cp.id} already exists")
    return replace(m, checkpoints=(*m.checkpoints, cp))


def remove_checkpoints(m: Manifest, ids: set[uuid.UUID]) -> Manifest | None:
    """``m`` without the given checkpoints, or None when none of them is present."""
    kept = tuple(c for c in m.checkpoints if c.id not in ids)
    if len(kept) == len(m.checkpoints):
        return None
    return replace(m, checkpoints=kept)


def refresh_checkpoint(
    m: Manifest, checkpoint_id: uuid.UUID, *, now_s: float, lifetime_s: float | None
) -> Manifest:
    """Set a checkpoint's expiry to ``now + lifetime`` (None: never expires).

    Raises:
        InvalidDbStateError: no such checkpoint.
    """
    found = False
    out = []
    for c in m.checkpoints:
        if c.id == checkpoint_id:
            found = True
            expire = None if lifetime_s is None else _secs(now_s + lifetime_s, "expiry time")
            c = replace(c, expire_time_s=expire)
        out.append(c)
    if not found:
        raise InvalidDbStateError(f"refresh checkpoint: checkpoint {checkpoint_id} not found")
    return replace(m, checkpoints=tuple(out))


def expired_checkpoints(m: Manifest, now_s: float) -> list[Checkpoint]:
    return [c for c in m.checkpoints if c.is_expired(now_s)]


def live_checkpoints(m: Manifest, now_s: float) -> list[Checkpoint]:
    return [c for c in m.checkpoints if not c.is_expired(now_s)]


def list_checkpoints(m: Manifest, name: str | None = None) -> list[Checkpoint]:
    """The checkpoints named exactly ``name`` (None: all; ``""``: unnamed ones and those
    named ``""``, as 0.17's ``Admin.list_checkpoints``)."""
    if name is None:
        return list(m.checkpoints)
    if name == "":
        return [c for c in m.checkpoints if not c.name]
    return [c for c in m.checkpoints if c.name == name]


# ------------------------------------------------------------------ writer checkpoints
WRITER_CHECKPOINT_NAME = "slatelib-writer"
"""Name slatelib gives its writer checkpoints, besides the ``WriterCheckpoint`` metadata:
0.17.0 drops checkpoint metadata when it rewrites a manifest but keeps names, so the name
still identifies the checkpoint after an official process has written the manifest."""


def is_writer_checkpoint(c: Checkpoint) -> bool:
    """A writer's checkpoint: ``WriterCheckpoint`` metadata (design doc
    'checkpoints and clones') or slatelib's name."""
    return c.writer_epoch is not None or c.name == WRITER_CHECKPOINT_NAME


def writer_checkpoint(
    next_manifest_id: int, epoch: int, *, now_s: float, lifetime_s: float,
    checkpoint_id: uuid.UUID | None = None,
) -> Checkpoint:
    """The checkpoint a writer of ``epoch`` keeps on the manifest it writes next (design doc
    'checkpoints and clones': pins ``V + 1``, ``WriterCheckpoint { epoch }``, plus slatelib's name).
    Design doc 'checkpoints and clones' lets it never expire; slatelib's expires ``lifetime_s`` from
    now (docs/rfcs/0005-writer-wal-and-fencing.md).

    Raises:
        InvalidArgumentError: a negative lifetime, or a time outside the u32 seconds of the
            manifest format.
    """
    if lifetime_s < 0:
        raise InvalidArgumentError(f"writer checkpoint lifetime must not be negative: {lifetime_s}")
    expire = math.floor(now_s + lifetime_s)
    if expire > U32_MAX:
        raise InvalidArgumentError(
            f"writer checkpoint expiry {expire} (now + {lifetime_s}s) is beyond the u32 "
            "seconds a manifest can hold; lower writer.checkpoint_lifetime"
        )
    return Checkpoint(
        id=checkpoint_id or uuid.uuid4(),
        manifest_id=next_manifest_id,
        expire_time_s=_secs(expire, "expiry time"),
        create_time_s=_secs(now_s, "creation time"),
        writer_epoch=epoch,
        name=WRITER_CHECKPOINT_NAME,
    )


def with_writer_checkpoint(m: Manifest, cp: Checkpoint) -> Manifest:
    """``m`` with every writer checkpoint replaced by ``cp``."""
    kept = tuple(c for c in m.checkpoints if not is_writer_checkpoint(c))
    return replace(m, checkpoints=(*kept, cp))


def without_writer_checkpoints(m: Manifest) -> Manifest:
    return replace(m, checkpoints=tuple(c for c in m.checkpoints if not is_writer_checkpoint(c)))


def replace_checkpoint(m: Manifest, old_id: uuid.UUID | None, new: Checkpoint) -> Manifest:
    """Remove ``old_id`` (when present) and add ``new`` in one manifest version (0.17's
    ``replace_checkpoint``)."""
    kept = tuple(c for c in m.checkpoints if c.id != old_id and c.id != new.id)
    return replace(m, checkpoints=(*kept, new))


# ------------------------------------------------------------------ reader checkpoints
def refresh_due(cp: Checkpoint, lifetime_s: float, now_s: float) -> bool:
    """A reader refreshes its checkpoint once less than half of its lifetime is left."""
    if cp.expire_time_s is None:
        return False
    return now_s > cp.expire_time_s - lifetime_s / 2


def tree_changed(current: Manifest, latest: Manifest) -> bool:
    """Whether a reader must re-establish its checkpoint (0.17's
    ``should_reestablish_checkpoint``): compacted L0s, new L0 flushes, other sorted runs or
    segments."""
    return (
        latest.last_compacted_l0_sst_view_id != current.last_compacted_l0_sst_view_id
        or latest.last_l0_seq > current.last_l0_seq
        or latest.compacted != current.compacted
        or (latest.segments or ()) != (current.segments or ())
    )


def lsm_changed(current: Manifest, latest: Manifest) -> bool:
    """Whether the set of L0 views or sorted runs differs (a writer re-establishes its
    checkpoint then)."""
    return latest.l0 != current.l0 or latest.compacted != current.compacted or (
        (latest.segments or ()) != (current.segments or ())
    )


def plan_reader_checkpoint(
    m: Manifest,
    next_id: int,
    checkpoint_id: uuid.UUID,
    *,
    lifetime_s: float,
    now_s: float,
    last_wal_id: int,
    old_id: uuid.UUID | None = None,
) -> Manifest | None:
    """A reader establishes (or re-establishes, replacing ``old_id``) its checkpoint against
    the version it writes (design doc 'checkpoints and clones', "Establishing the Checkpoint"):
    ``manifest_id`` = that version, expiry ``now + lifetime``, no metadata, and ``wal_id_last_seen``
    raised to the last WAL id the reader found. None when ``checkpoint_id`` is already there.

    Raises:
        InvalidDbStateError: the database is uninitialized or destroyed.
    """
    if m.checkpoint(checkpoint_id) is not None:
        return None
    check_writable_state(m, "reader checkpoint")
    cp = new_checkpoint(m, next_id, now_s=now_s, lifetime_s=lifetime_s,
                        checkpoint_id=checkpoint_id)
    out = replace_checkpoint(m, old_id, cp)
    if last_wal_id > out.wal_id_last_seen:
        out = replace(out, wal_id_last_seen=last_wal_id)
    return out
