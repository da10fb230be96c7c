"""Rescale sources: reading the WAL tail and the writer's activity, moving the tail into an
L0 without losing an acknowledged write, the job checkpoint."""

from __future__ import annotations

import uuid

import pytest

from slatelib import Db, DbReader
from slatelib.config import CompactionSettings, Settings
from slatelib.errors import (
    InvalidArgumentError,
    InvalidDbStateError,
    NotADatabaseRootError,
    WriterActiveError,
)
from slatelib.objstore import ObjectStore
from slatelib.ops.rescale.source import (
    check_flushable,
    check_live,
    ensure_checkpoint,
    flush_wal_to_l0,
    read_source,
    remaining_wal_data,
)
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from tests.unit.ops.rescale.support import make_source, read
from tests.unit.store_snapshot import snapshot
from tests.unit.writer.support import writer_settings


def test_read_source_sees_the_wal_tail_and_no_live_writer(store: ObjectStore,
                                                          clock: FakeClock) -> None:
    make_source(store, clock, wal_tail=4)
    before = snapshot(store)
    info = read_source(store, "src", clock, live_window_s=300)
    assert snapshot(store) == before
    assert info.needs_flush and info.wal_rows == 5 and not info.wal_has_merges
    assert info.live_evidence == ()
    assert info.wal_span is not None and info.wal_span.contains(b"kw0003")
    assert info.to_dict()["data_wal_ssts"] == len(info.data_wal_ids) > 0


def test_a_flushed_source_needs_no_flush(store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock, wal_tail=0)
    info = read_source(store, "src", clock, live_window_s=300)
    assert not info.needs_flush and info.wal_span is None


def test_read_source_refuses_what_is_not_a_database(store: ObjectStore, clock: FakeClock,
                                                    ) -> None:
    with pytest.raises(NotADatabaseRootError):
        read_source(store, "nothing", clock, live_window_s=300)


def test_a_live_writer_is_evidence_and_refused_without_a_flag(store: ObjectStore,
                                                              clock: FakeClock) -> None:
    db = Db.open("src", store, writer_settings(), clock=clock)
    db.put(b"a", b"1")
    info = read_source(store, "src", clock, live_window_s=300)
    assert len(info.live_evidence) == 3  # writer checkpoint, WAL SST, manifest
    with pytest.raises(WriterActiveError):
        check_live(info, fence_source=False, allow_live_source=False)
    check_live(info, fence_source=True, allow_live_source=False)
    check_live(info, fence_source=False, allow_live_source=True)
    with pytest.raises(WriterActiveError, match="--fence-source"):
        check_flushable(info, Settings(), allow_live_source=True, fence_source=False)
    db.close(flush=None)


def test_merge_operands_in_the_tail_need_a_merge_operator(store: ObjectStore,
                                                          clock: FakeClock) -> None:
    with Db.open("src", store, writer_settings(), merge_operator="concat", clock=clock) as db:
        db.merge(b"m", b"+1")
        db.close(flush="wal")
    info = read_source(store, "src", clock, live_window_s=0)
    assert info.wal_has_merges
    with pytest.raises(InvalidArgumentError, match="merge_operator"):
        check_flushable(info, Settings(), allow_live_source=False, fence_source=False)
    with_op = Settings(compaction=CompactionSettings(merge_operator="concat"))
    check_flushable(info, with_op, allow_live_source=False, fence_source=False)
    flush_wal_to_l0(store, "src", with_op, clock)
    with DbReader.open("src", store, mode="latest", merge_operator="concat") as r:
        assert dict(r.scan()) == {b"m": b"+1"}


def test_flush_moves_every_acknowledged_write_into_an_l0(store: ObjectStore,
                                                         clock: FakeClock) -> None:
    model = make_source(store, clock, wal_tail=30)
    before = ManifestStore(store, "src").read_latest().value
    latest = flush_wal_to_l0(store, "src", Settings(), clock)
    m = latest.value
    assert m.writer_epoch == before.writer_epoch + 1
    assert len(m.l0) == len(before.l0) + 1
    assert m.replay_after_wal_id == m.wal_id_last_seen >= before.replay_after_wal_id
    assert remaining_wal_data(store, "src", m) is None
    assert m.checkpoints == ()  # the flushing writer's checkpoint is gone again
    with DbReader.open("src", store, mode="latest") as r:  # the L0s alone, no WAL replay
        assert dict(r.scan()) == model
    assert not read_source(store, "src", clock, live_window_s=0).needs_flush


def test_flush_never_creates_a_database(store: ObjectStore, clock: FakeClock) -> None:
    with pytest.raises(NotADatabaseRootError):
        flush_wal_to_l0(store, "nothing", Settings(), clock)
    assert snapshot(store) == {}


def test_flush_never_waits_for_a_compactor_at_l0_max_ssts(store: ObjectStore,
                                                          clock: FakeClock) -> None:
    settings = writer_settings(l0_max_ssts=2)
    db = Db.open("src", store, settings, clock=clock)
    for i in range(2):
        db.put(b"k%d" % i, b"v")
        db.flush()
    db.put(b"tail", b"v")
    db.close(flush="wal")
    flush_wal_to_l0(store, "src", settings, clock)  # a third L0, above the limit
    assert len(ManifestStore(store, "src").read_latest().value.l0) == 3


def test_ensure_checkpoint_is_idempotent_and_renews(store: ObjectStore, clock: FakeClock,
                                                    ) -> None:
    make_source(store, clock, wal_tail=0)
    cp = uuid.uuid4()
    first = ensure_checkpoint(store, "src", cp, lifetime_s=60, clock=clock)
    pinned = first.value.checkpoint(cp)
    assert pinned is not None
    clock.advance(30)
    again = ensure_checkpoint(store, "src", cp, lifetime_s=60, clock=clock).value.checkpoint(cp)
    assert again is not None and again.manifest_id == pinned.manifest_id
    assert again.expire_time_s is not None and pinned.expire_time_s is not None
    assert again.expire_time_s == pinned.expire_time_s + 30


def test_ensure_checkpoint_refuses_a_destroyed_source(store: ObjectStore, clock: FakeClock,
                                                      ) -> None:
    from slatelib import destroy

    make_source(store, clock, wal_tail=0)
    destroy("src", store, clock=clock)
    with pytest.raises(InvalidDbStateError):
        read_source(store, "src", clock, live_window_s=0)


def test_wal_rows_already_in_an_l0_are_skipped_not_replayed(store: ObjectStore,
                                                            clock: FakeClock) -> None:
    """0.17 leaves the WAL SST written right before a memtable flush above
    ``replay_after_wal_id`` (and then refuses to project the database)."""
    from dataclasses import replace

    with Db.open("src", store, writer_settings(), clock=clock) as db:
        db.put(b"a", b"1")
        db.flush()
    ms = ManifestStore(store, "src")
    cur = ms.read_latest()
    flushed = cur.value
    ms.write(cur.id + 1, replace(flushed, replay_after_wal_id=flushed.replay_after_wal_id - 1))
    info = read_source(store, "src", clock, live_window_s=0)
    assert info.needs_flush and info.wal_rows == 0  # a WAL SST, its rows in the L0
    latest = flush_wal_to_l0(store, "src", Settings(), clock)
    assert latest.value.replay_after_wal_id > flushed.replay_after_wal_id
    assert latest.value.l0 == flushed.l0  # nothing new to flush
    assert remaining_wal_data(store, "src", latest.value) is None
    assert read(store, "src") == {b"a": b"1"}
