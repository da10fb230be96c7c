"""Checkpoint rules (seed 002, as 0.17.0 applies them). Pure manifest transformations.

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
        InvalidArgumentError: a negative lifetime or a time outside u32.
    """
    if lifetime_s is not None and lifetime_s < 0:
        raise InvalidArgumentError(f"checkpoint lifetime must not be negative: {lifetime_s}")
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
    return [c for c in m.checkpoints if name is None or c.name == name]
