"""DbReader's checkpoint protocol (design doc 'checkpoints and clones') against a live slatelib
writer.

Background polling is off (``auto_refresh=False``); each test polls with ``refresh()`` and
moves a fake clock, so nothing depends on timing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from slatelib import Db, DbReader, destroy
from slatelib.config import ReaderSettings, Settings
from slatelib.errors import InvalidArgumentError, InvalidDbStateError, UnavailableError
from slatelib.objstore import ObjectStore
from slatelib.ops.checkpoint import create_checkpoint, delete_checkpoint
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore
from tests.unit.writer.support import compact_l0, memory_store, writer_settings

PATH = "db"
LIFETIME = 60.0


@pytest.fixture
def store() -> ObjectStore:
    return memory_store()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_750_000_000_000)


@pytest.fixture
def db(store: ObjectStore, clock: FakeClock) -> Iterator[Db]:
    d = Db.open(PATH, store, writer_settings(), clock=clock)
    for i in range(5):
        d.put(b"k%d" % i, b"v%d" % i)
    d.flush()
    d.put(b"wal", b"only")
    yield d
    d.close(flush=None)


def open_reader(store: ObjectStore, clock: FakeClock, **kw: object) -> DbReader:
    return DbReader.open(PATH, store, settings=writer_settings(), clock=clock, auto_refresh=False,
                         **kw)  # type: ignore[arg-type]


def manifests(store: ObjectStore) -> ManifestStore:
    return ManifestStore(store, PATH)


def reader_checkpoints(store: ObjectStore) -> list:
    return [c for c in manifests(store).read_latest().value.checkpoints if c.writer_epoch is None]


def test_managed_reader_establishes_a_checkpoint_on_the_next_version(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    before = manifests(store).read_latest().id
    with open_reader(store, clock) as r:
        [cp] = reader_checkpoints(store)
        assert r.checkpoint == cp and cp.manifest_id == before + 1 == r.manifest_id
        assert cp.expire_time_s == int(clock.now_ms() / 1000 + LIFETIME)
        assert cp.name is None
        assert manifests(store).read(cp.manifest_id).value.wal_id_last_seen == db.last_acked_wal_id()
        assert r.get(b"k3") == b"v3" and r.get(b"wal") == b"only"
    assert reader_checkpoints(store) == []


def test_new_wal_writes_are_replayed_without_a_new_checkpoint(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    with open_reader(store, clock) as r:
        cp = r.checkpoint
        db.put(b"new", b"1")
        assert r.get(b"new") is None
        assert r.refresh() is True
        assert r.get(b"new") == b"1" and r.checkpoint == cp
        assert r.refresh() is False


def test_a_flush_and_a_compaction_move_the_checkpoint_and_purge_replayed_rows(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    with open_reader(store, clock) as r:
        first = r.checkpoint
        assert first is not None
        replayed = sum(len(t.table) for t in r._wal_tables)  # noqa: SLF001
        assert replayed == 1
        db.put(b"more", b"x")
        db.flush()
        r.refresh()
        second = r.checkpoint
        assert second is not None and second.id != first.id
        assert [c.id for c in reader_checkpoints(store)] == [second.id]
        assert sum(len(t.table) for t in r._wal_tables) == 0  # noqa: SLF001 - all in L0 now
        compact_l0(store, PATH, now_ms=clock.now_ms())
        r.refresh()
        third = r.checkpoint
        assert third is not None and third.id != second.id
        assert len(r.manifest.compacted) == 1 and r.manifest.l0 == ()
        assert [c.id for c in reader_checkpoints(store)] == [third.id]
        assert dict(r.scan()) == {**{b"k%d" % i: b"v%d" % i for i in range(5)},
                                  b"wal": b"only", b"more": b"x"}


def test_expiry_is_refreshed_once_half_the_lifetime_has_passed(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    with open_reader(store, clock) as r:
        cp = r.checkpoint
        assert cp is not None and cp.expire_time_s is not None
        clock.advance(LIFETIME * 0.4)
        before = manifests(store).read_latest().id
        r.refresh()
        assert manifests(store).read_latest().id == before  # nothing written yet
        clock.advance(LIFETIME * 0.2)
        r.refresh()
        refreshed = r.checkpoint
        assert refreshed is not None and refreshed.id == cp.id
        assert refreshed.expire_time_s == int(clock.now_ms() / 1000 + LIFETIME)


def test_a_deleted_reader_checkpoint_is_re_established(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    with open_reader(store, clock) as r:
        cp = r.checkpoint
        assert cp is not None and delete_checkpoint(PATH, store, cp.id, clock=clock)
        r.refresh()
        assert r.checkpoint is not None and r.checkpoint.id != cp.id
        assert [c.id for c in reader_checkpoints(store)] == [r.checkpoint.id]


def test_replayed_wal_goes_into_bounded_memtables(db: Db, store: ObjectStore, clock: FakeClock) -> None:
    for i in range(30):
        db.put(b"w%02d" % i, b"x" * 100)
    settings = replace(writer_settings(), reader=replace(
        writer_settings().reader, max_memtable_bytes=1000))
    with DbReader.open(PATH, store, settings=settings, clock=clock, auto_refresh=False) as r:
        assert len(r._wal_tables) > 1  # noqa: SLF001
        assert all(t.table.size_bytes < 1000 + 200 for t in r._wal_tables)  # noqa: SLF001
        assert r.get(b"w29") == b"x" * 100 and len(list(r.scan(b"w"))) == 31


def test_latest_mode_and_fixed_checkpoints_write_nothing(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    cp = create_checkpoint(PATH, store, clock=clock)
    ids = manifests(store).list_ids()
    with open_reader(store, clock, mode="latest") as r:
        db.put(b"later", b"1")
        assert r.get(b"later") is None and r.refresh() and r.get(b"later") == b"1"
        assert r.checkpoint is None
    with open_reader(store, clock, checkpoint=str(cp.id)) as r:
        # the checkpoint's manifest saw WALs up to the last flush only (wal_id_last_seen)
        assert r.get(b"k1") == b"v1" and r.get(b"wal") is None and r.get(b"later") is None
        assert r.refresh() is False and r.mode == "checkpoint"
    assert manifests(store).list_ids() == ids


def test_managed_mode_validates_its_timing(store: ObjectStore, db: Db, clock: FakeClock) -> None:
    bad = replace(Settings(), reader=replace(ReaderSettings(), checkpoint_lifetime=1.0,
                                             manifest_poll_interval=1.0))
    with pytest.raises(InvalidArgumentError, match="twice"):
        DbReader.open(PATH, store, settings=bad, clock=clock)
    with pytest.raises(InvalidArgumentError, match="mode"):
        DbReader.open(PATH, store, mode="sometimes")  # type: ignore[arg-type]


def test_a_destroyed_database_cannot_get_a_new_reader_checkpoint(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    destroy(PATH, store, clock=clock)
    with pytest.raises(InvalidDbStateError, match="destroyed"):
        open_reader(store, clock)
    with open_reader(store, clock, mode="latest") as r:
        assert r.get(b"k1") == b"v1"


def test_unknown_checkpoint(store: ObjectStore, db: Db, clock: FakeClock) -> None:
    with pytest.raises(InvalidDbStateError, match="not found"):
        open_reader(store, clock, checkpoint=uuid.uuid4())


def test_readers_stop_at_a_gap_in_the_wal(db: Db, store: ObjectStore, clock: FakeClock) -> None:
    """A crashed writer with several WAL writes in flight can leave WAL n+2 without n+1:
    readers replay up to the gap, as 0.17's do, instead of failing."""
    from slatelib.core.row import VALUE
    from slatelib.format.sst import SstWriterOptions, encode_sst
    from slatelib.paths import DbPaths

    db.close(flush=None)
    nxt = db.last_acked_wal_id() + 1
    orphan = encode_sst([(b"beyond", 999, VALUE, b"x", None, 1)], SstWriterOptions.wal())
    store.put_if_absent(DbPaths(PATH).wal(nxt + 1), orphan.to_bytes())
    for mode in ("latest", "managed"):
        with open_reader(store, clock, mode=mode) as r:
            assert r.get(b"wal") == b"only" and r.get(b"beyond") is None
            assert r.refresh() is False


def test_a_failed_re_establish_leaves_no_stray_checkpoint(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    flaky = FlakyObjectStore(store)
    with open_reader(flaky, clock) as r:  # type: ignore[arg-type]
        db.put(b"more", b"x")
        db.flush()
        db.put(b"wal2", b"y")
        flaky.fail_before("get", path="db/wal/")  # the WAL replay after the new checkpoint
        with pytest.raises(UnavailableError):
            r.refresh()
        r.refresh()
        assert [c.id for c in reader_checkpoints(store)] == [r.checkpoint.id]  # type: ignore[union-attr]
        assert r.get(b"wal2") == b"y" and r.get(b"more") == b"x"
    assert reader_checkpoints(store) == []


def test_the_poller_survives_an_unexpected_error_and_stops_when_closed(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    r = open_reader(store, clock)
    calls: list[int] = []

    def refresh() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in one poll")
        r._stop.set()  # noqa: SLF001 - end the loop after the second poll
        return False

    r.refresh = refresh  # type: ignore[method-assign]
    r._poll_loop(0.0)  # noqa: SLF001 - the poller thread's body, run here
    assert len(calls) == 2
    r.close()
    assert reader_checkpoints(store) == []
