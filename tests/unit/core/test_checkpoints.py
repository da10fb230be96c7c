"""Checkpoint rules of design doc 'checkpoints and clones'."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from slatelib.core.checkpoints import (
    add_checkpoint,
    expired_checkpoints,
    new_checkpoint,
    refresh_checkpoint,
    remove_checkpoints,
)
from slatelib.core.manifest import Manifest
from slatelib.errors import InvalidDbStateError


def test_checkpoint_of_current_manifest_pins_the_next_version() -> None:
    cp = new_checkpoint(Manifest.initial(), 8, now_s=1000.4, lifetime_s=60, name="n")
    assert (cp.manifest_id, cp.create_time_s, cp.expire_time_s, cp.name) == (8, 1000, 1060, "n")


def test_checkpoint_from_source_copies_its_manifest_and_refuses_expired() -> None:
    src = new_checkpoint(Manifest.initial(), 3, now_s=100, lifetime_s=10)
    m = add_checkpoint(Manifest.initial(), src)
    assert new_checkpoint(m, 9, now_s=105, source=src.id).manifest_id == 3
    with pytest.raises(InvalidDbStateError, match="expired"):
        new_checkpoint(m, 9, now_s=111, source=src.id)
    with pytest.raises(InvalidDbStateError, match="not found"):
        new_checkpoint(m, 9, now_s=105, source=uuid.uuid4())


def test_uninitialized_or_destroyed_database_refuses_checkpoints() -> None:
    with pytest.raises(InvalidDbStateError):
        new_checkpoint(replace(Manifest.initial(), initialized=False), 2, now_s=1)
    with pytest.raises(InvalidDbStateError):
        new_checkpoint(replace(Manifest.initial(), destroyed_at_s=5), 2, now_s=1)


def test_refresh_remove_and_expiry() -> None:
    cp = new_checkpoint(Manifest.initial(), 2, now_s=100, lifetime_s=10)
    m = add_checkpoint(Manifest.initial(), cp)
    assert [c.id for c in expired_checkpoints(m, 110)] == [cp.id]
    m2 = refresh_checkpoint(m, cp.id, now_s=200, lifetime_s=30)
    assert m2.checkpoints[0].expire_time_s == 230 and not expired_checkpoints(m2, 210)
    assert refresh_checkpoint(m, cp.id, now_s=200, lifetime_s=None).checkpoints[0].expire_time_s is None
    assert remove_checkpoints(m, {uuid.uuid4()}) is None
    assert remove_checkpoints(m, {cp.id}).checkpoints == ()  # type: ignore[union-attr]
    with pytest.raises(InvalidDbStateError):
        refresh_checkpoint(Manifest.initial(), cp.id, now_s=1, lifetime_s=1)
