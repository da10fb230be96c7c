"""The checkpoint a read goes through: pinned by id (refused when unknown or expired),
created (covering WAL-only writes), and released by the last finished partition."""

from __future__ import annotations

import uuid

import pytest

from slatelib import DbReader, create_checkpoint, list_checkpoints
from slatelib.errors import InvalidDbStateError, NotADatabaseRootError
from slatelib.ops.export.pin import (
    MARKER_DIR,
    create_read_checkpoint,
    finish_partition,
    pin_checkpoint,
)
from slatelib.ops.export.scan import plan_scan, scan_task_rows
from slatelib.testing.clock import FakeClock
from tests.unit.ops.export.support import NOW_MS, PATH, build_db
from tests.unit.writer.support import memory_store


def test_created_checkpoint_covers_wal_only_writes() -> None:
    clock = FakeClock(NOW_MS)
    store, model = build_db(clock)
    pinned = create_read_checkpoint(store, PATH, name="export", lifetime_s=60, clock=clock)
    assert pinned.checkpoint.name == "export"
    assert pinned.checkpoint.expire_time_s == NOW_MS // 1000 + 60
    assert pinned.manifest.wal_id_last_seen > pinned.manifest.replay_after_wal_id
    tasks = plan_scan(store, PATH, pinned.manifest, manifest_id=pinned.manifest_id,
                      checkpoint_id=pinned.checkpoint.id, merge_operator="concat")
    assert {r[0]: r[3] for t in tasks for rows in scan_task_rows(t, store=store)
            for r in rows} == model
    with DbReader.open(PATH, store, checkpoint=pinned.checkpoint.id,
                       merge_operator="concat") as reader:
        assert dict(reader.scan()) == model


def test_pin_refuses_an_unknown_checkpoint() -> None:
    store, _ = build_db()
    unknown = uuid.uuid4()
    with pytest.raises(InvalidDbStateError, match=f"checkpoint {unknown} not found"):
        pin_checkpoint(store, PATH, unknown)


def test_pin_refuses_an_expired_checkpoint() -> None:
    clock = FakeClock(NOW_MS)
    store, _ = build_db(clock)
    cp = create_checkpoint(PATH, store, lifetime=10, clock=clock)
    assert pin_checkpoint(store, PATH, cp.id, clock=clock).checkpoint.id == cp.id
    clock.advance(11)
    with pytest.raises(InvalidDbStateError, match=f"checkpoint {cp.id} .* expired at"):
        pin_checkpoint(store, PATH, cp.id, clock=clock)


def test_pin_and_create_refuse_a_missing_database() -> None:
    store = memory_store()
    with pytest.raises(NotADatabaseRootError):
        pin_checkpoint(store, "nowhere", uuid.uuid4())
    with pytest.raises(NotADatabaseRootError):
        create_read_checkpoint(store, "nowhere", name="x", lifetime_s=60)


def test_the_last_finished_partition_deletes_the_checkpoint_and_markers() -> None:
    store, _ = build_db()
    cp = create_read_checkpoint(store, PATH, name="r", lifetime_s=60).checkpoint
    assert finish_partition(store, PATH, cp.id, 2, 3) is False
    assert finish_partition(store, PATH, cp.id, 0, 3) is False
    assert finish_partition(store, PATH, cp.id, 2, 3) is False  # a retried task: same marker
    assert cp.id in {c.id for c in list_checkpoints(PATH, store)}
    assert finish_partition(store, PATH, cp.id, 1, 3) is True
    assert cp.id not in {c.id for c in list_checkpoints(PATH, store)}
    assert list(store.list(f"{PATH}/{MARKER_DIR}")) == []
