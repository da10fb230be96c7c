"""The writer end to end on an in-memory store: writes, reads of own writes, flushes,
reopen and replay, fencing, the writer checkpoint, back-pressure, TTL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from slatelib import NO_EXPIRY, Db, WriteBatch
from slatelib.config import load_settings
from slatelib.core.checkpoints import is_writer_checkpoint
from slatelib.core.row import TOMBSTONE, VALUE
from slatelib.errors import (
    FencedError,
    InvalidArgumentError,
    InvalidDbStateError,
    MergeOperatorMissingError,
)
from slatelib.format.seq_tracker import decode_seq_tracker
from slatelib.format.sst import SstWriterOptions, encode_sst, parse_sst
from slatelib.objstore import ObjectStore
from slatelib.ops.destroy import destroy
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.testing.clock import FakeClock
from slatelib.txn import update_versioned
from tests.unit.writer.support import compact_l0, writer_settings

PATH = "db"
WAIT_S = 10


@pytest.fixture
def db(store: ObjectStore, clock: FakeClock) -> Iterator[Db]:
    d = Db.open(PATH, store, writer_settings(), merge_operator="concat", clock=clock)
    yield d
    d.close(flush=None)


def reopen(store: ObjectStore, clock: FakeClock, **writer: object) -> Db:
    return Db.open(PATH, store, writer_settings(**writer), merge_operator="concat", clock=clock)


def writer_checkpoints(store: ObjectStore) -> list:
    return [c for c in ManifestStore(store, PATH).read_latest().value.checkpoints
            if is_writer_checkpoint(c)]


def test_writes_are_readable_by_the_writer_at_once(db: Db) -> None:
    s1 = db.put(b"a", b"1")
    s2 = db.put(b"b", b"2")
    db.delete(b"a")
    db.merge(b"m", b"x")
    db.merge(b"m", b"y")
    db.write(WriteBatch().put(b"c", b"3").put(b"d", b"4"))
    assert s2 == s1 + 1
    assert db.get(b"a") is None and db.get(b"m") == b"xy"
    assert list(db.scan()) == [(b"b", b"2"), (b"c", b"3"), (b"d", b"4"), (b"m", b"xy")]
    assert list(db.scan(b"c", b"m")) == [(b"c", b"3"), (b"d", b"4")]


def test_a_memtable_flush_writes_l0_and_the_manifest_bookkeeping(db: Db, store: ObjectStore) -> None:
    for i in range(20):
        db.put(b"k%02d" % i, b"v%d" % i)
    db.flush()
    m = ManifestStore(store, PATH).read_latest().value
    assert len(m.l0) == 1 and m.last_l0_seq == 20
    assert m.replay_after_wal_id == db.last_acked_wal_id() == m.wal_id_last_seen
    assert decode_seq_tracker(m.sequence_tracker or b"")[0][0] == 1
    assert db.get(b"k07") == b"v7" and db.manifest.l0 == m.l0
    db.put(b"k99", b"after")
    assert len(list(db.scan())) == 21


def test_reopen_replays_the_wal_and_fences_the_old_writer(store: ObjectStore, clock: FakeClock) -> None:
    first = reopen(store, clock)
    first.put(b"a", b"1")
    first.flush()
    first.put(b"b", b"2")  # WAL only
    second = reopen(store, clock)
    assert second.epoch == first.epoch + 1
    assert second.get(b"a") == b"1" and second.get(b"b") == b"2"
    for call in (lambda: first.put(b"c", b"3"), lambda: first.get(b"a"), first.flush, first.refresh):
        with pytest.raises(FencedError):
            call()
    assert second.put(b"c", b"3") > 2
    first.close()
    second.close()
    third = reopen(store, clock)
    assert list(third.scan()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    third.close()


def test_a_fenced_writer_finds_out_at_its_next_manifest_poll(store: ObjectStore, clock: FakeClock) -> None:
    first = reopen(store, clock)
    second = reopen(store, clock)
    with pytest.raises(FencedError):
        first.refresh()
    second.close()
    first.close()


def official_takeover(cur: StoredManifest) -> object:
    """What an official 0.17 writer's open does to the manifest: a new writer epoch, and
    (like every 0.17 manifest write) checkpoint metadata dropped, names kept."""
    m = cur.value
    return replace(m, writer_epoch=m.writer_epoch + 1,
                   checkpoints=tuple(replace(c, writer_epoch=None) for c in m.checkpoints))


def test_a_fenced_writer_removes_only_its_own_checkpoint_on_close(
    store: ObjectStore, clock: FakeClock
) -> None:
    first = reopen(store, clock)
    first.put(b"a", b"1")
    first.flush()
    update_versioned(ManifestStore(store, PATH), official_takeover)  # type: ignore[arg-type]
    with pytest.raises(FencedError):
        first.refresh()
    first.close()  # an official writer never removes it: the fenced writer must
    assert writer_checkpoints(store) == []
    second = reopen(store, clock)
    third = reopen(store, clock)
    update_versioned(ManifestStore(store, PATH), lambda cur: replace(  # metadata dropped
        cur.value, checkpoints=tuple(replace(c, writer_epoch=None) for c in cur.value.checkpoints)))
    [kept] = writer_checkpoints(store)
    second.close()
    assert writer_checkpoints(store) == [kept]  # the newer writer's checkpoint survives
    third.close()
    assert writer_checkpoints(store) == []


def test_a_flush_waiting_for_l0_room_ends_when_another_thread_closes_the_writer(
    store: ObjectStore, clock: FakeClock
) -> None:
    db = reopen(store, clock, l0_max_ssts=1)
    db.put(b"a", b"1")
    db.flush()
    db.put(b"b", b"2")
    errors: list[BaseException] = []

    def flush() -> None:
        try:
            db.flush()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=flush, daemon=True)
    t.start()
    while not db._flusher.blocked_on_l0:  # noqa: SLF001 - white-box wait, no sleeping
        assert t.is_alive()
        threading.Event().wait(0.01)
    db.close(flush=None)
    t.join(WAIT_S)
    assert not t.is_alive() and [type(e) for e in errors] == [InvalidDbStateError]


def test_ttl_is_not_applied_at_read_time_but_expired_rows_flush_as_tombstones(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    db.put(b"short", b"1", ttl=10)
    db.put(b"forever", b"2", NO_EXPIRY)
    clock.advance(1)
    db.put(b"later", b"3")  # advances the memtable's last tick past the expiry
    assert db.get(b"short") == b"1"
    db.flush()
    assert db.get(b"short") is None and db.get(b"forever") == b"2"
    m = ManifestStore(store, PATH).read_latest().value
    sst = parse_sst(store.get(DbPaths(PATH).compacted(m.l0[0].sst_id)))
    kinds = {r[0]: r[2] for r in sst.rows()}
    assert kinds == {b"forever": VALUE, b"later": VALUE, b"short": TOMBSTONE}


def test_the_writer_checkpoint_follows_the_writer(db: Db, store: ObjectStore, clock: FakeClock) -> None:
    [cp] = writer_checkpoints(store)
    assert cp.writer_epoch == db.epoch and cp.expire_time_s == clock.now_ms() // 1000 + 4 * 3600
    db.put(b"a", b"1")
    db.flush()
    [moved] = writer_checkpoints(store)
    assert moved.id != cp.id and moved.manifest_id == ManifestStore(store, PATH).read_latest().id
    db.close()
    assert writer_checkpoints(store) == []


def test_a_compactor_commit_is_adopted_and_the_checkpoint_moves(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    for i in range(3):
        db.put(b"k%d" % i, b"v%d" % i)
        db.flush()
    compacted = compact_l0(store, PATH, now_ms=clock.now_ms())
    db.put(b"k9", b"wal")
    db.refresh()
    assert db.manifest.l0 == () and len(db.manifest.compacted) == 1
    [cp] = writer_checkpoints(store)
    assert cp.manifest_id == compacted.id + 1
    db.flush()  # the flush commit is rebased on the compactor's manifest
    m = ManifestStore(store, PATH).read_latest().value
    assert len(m.l0) == 1 and len(m.compacted) == 1
    assert dict(db.scan()) == {b"k0": b"v0", b"k1": b"v1", b"k2": b"v2", b"k9": b"wal"}


def test_flushes_stop_at_l0_max_ssts_until_a_compaction_makes_room(
    store: ObjectStore, clock: FakeClock
) -> None:
    db = reopen(store, clock, l0_max_ssts=2)
    try:
        for i in range(2):
            db.put(b"k%d" % i, b"v")
            db.flush()
        db.put(b"blocked", b"v")
        done = threading.Event()
        t = threading.Thread(target=lambda: (db.flush(), done.set()), daemon=True)
        t.start()
        while not db._flusher.blocked_on_l0:  # noqa: SLF001 - white-box wait, no sleeping
            assert t.is_alive()
            threading.Event().wait(0.01)
        assert not done.is_set() and len(db.manifest.l0) == 2
        compact_l0(store, PATH, now_ms=clock.now_ms())
        db.refresh()
        t.join(WAIT_S)
        assert done.is_set() and len(db.manifest.l0) == 1
        assert db.get(b"blocked") == b"v" and db.get(b"k0") == b"v"
    finally:
        db.close(flush=None)


def test_writers_block_at_max_unflushed_bytes_while_l0_is_full(
    store: ObjectStore, clock: FakeClock
) -> None:
    db = reopen(store, clock, l0_max_ssts=1, l0_sst_size_bytes=200, max_unflushed_bytes=600)
    try:
        db.put(b"first", b"x" * 300)
        db.flush()
        done = threading.Event()

        def fill() -> None:
            for i in range(10):
                db.put(b"k%d" % i, b"y" * 150)
            done.set()

        t = threading.Thread(target=fill, daemon=True)
        t.start()
        while not (db._flusher.blocked_on_l0 and db._unflushed_bytes() >= 600):  # noqa: SLF001
            assert t.is_alive() and not done.is_set()
            threading.Event().wait(0.01)
        assert not done.is_set()
        for _ in range(20):
            if done.is_set():
                break
            compact_l0(store, PATH, now_ms=clock.now_ms())
            db.refresh()
            t.join(0.5)
        assert done.is_set() and db.get(b"k9") == b"y" * 150
    finally:
        db.close(flush=None)


def test_an_unacknowledged_wal_behind_a_gap_never_becomes_visible(
    store: ObjectStore, clock: FakeClock
) -> None:
    db = reopen(store, clock)
    db.put(b"acked", b"1")
    db.close(flush=None)
    nxt = db.last_acked_wal_id() + 1
    orphan = encode_sst([(b"orphan", 99, VALUE, b"x", None, 1)], SstWriterOptions.wal())
    store.put_if_absent(DbPaths(PATH).wal(nxt + 1), orphan.to_bytes())  # WAL nxt never landed
    again = reopen(store, clock)
    assert again.get(b"orphan") is None and again.get(b"acked") == b"1"
    again.put(b"after", b"2")
    again.close(flush=None)
    third = reopen(store, clock)
    assert dict(third.scan()) == {b"acked": b"1", b"after": b"2"}
    third.close()


def test_concurrent_writers_share_wal_ssts(db: Db, store: ObjectStore) -> None:
    before = db.last_acked_wal_id()
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(40):
                db.put(b"t%d-%03d" % (t, i), b"v")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 3)
    assert errors == [] and len(list(db.scan())) == 320
    assert db.last_acked_wal_id() - before <= 320


def test_merge_needs_a_merge_operator(store: ObjectStore, clock: FakeClock) -> None:
    db = Db.open(PATH, store, writer_settings(), clock=clock)
    try:
        with pytest.raises(MergeOperatorMissingError):
            db.merge(b"k", b"x")
        with pytest.raises(MergeOperatorMissingError):
            db.write(WriteBatch().merge(b"k", b"x"))
        db.put(b"ok", b"1")
    finally:
        db.close()


def test_calls_after_close_fail_and_close_is_idempotent(db: Db) -> None:
    db.put(b"a", b"1")
    db.close()
    db.close()
    with pytest.raises(InvalidDbStateError, match="closed"):
        db.put(b"b", b"2")


@pytest.mark.parametrize("bad", [{"wal_max_in_flight": 0}, {"wal_max_in_flight": 99},
                                 {"l0_max_ssts": 0}, {"default_ttl_millis": -1},
                                 {"checkpoint_lifetime": 5.0, "manifest_poll_interval": 1.0},
                                 {"checkpoint_lifetime": 3600.0}])  # < 4 x the 3600 s poll
def test_bad_writer_settings_are_refused(store: ObjectStore, bad: dict[str, object]) -> None:
    with pytest.raises(InvalidArgumentError):
        Db.open(PATH, store, writer_settings(**bad))


def test_a_destroyed_database_is_not_reopened(store: ObjectStore, clock: FakeClock) -> None:
    reopen(store, clock).close()
    destroy(PATH, store, clock=clock)
    with pytest.raises(InvalidDbStateError, match="destroyed"):
        reopen(store, clock)


def test_create_times_stay_monotonic_when_the_clock_goes_back(db: Db, clock: FakeClock) -> None:
    db.put(b"a", b"1")
    clock.advance(-60)
    db.put(b"b", b"2")
    rows = sorted(db._state.active.table.rows(), key=lambda r: r[1])  # noqa: SLF001
    assert rows[1][5] >= rows[0][5]


def test_writer_settings_come_from_files_and_the_environment(
    store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    conf = tmp_path / "writer.toml"
    conf.write_text('[writer]\nl0_sst_size_bytes = "1KiB"\nflush_interval = "5ms"\n')
    settings = load_settings(conf, env={"SLATELIB_WRITER__WAL_MAX_IN_FLIGHT": "3",
                                        "SLATELIB_SST__COMPRESSION_CODEC": "zstd"})
    assert (settings.writer.l0_sst_size_bytes, settings.writer.wal_max_in_flight) == (1024, 3)
    with Db.open(PATH, store, settings, clock=clock) as db:
        for i in range(40):
            db.put(b"k%02d" % i, b"v" * 40)  # 1 KiB memtables: several L0 flushes
        db.flush()
        assert len(db.manifest.l0) >= 2
        assert db._wal_opts.codec.name == "ZSTD"  # noqa: SLF001
