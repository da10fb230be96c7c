"""The writer checkpoint's expiry (docs/rfcs/0005-writer-wal-and-fencing.md): set on every
re-establish, refreshed by polls after half the lifetime, and reads refused once it cannot be
refreshed in time.

The writer settings of these tests (``writer_settings``) give the checkpoint 4 hours and poll
only when asked (``db.refresh()``, or a read past its deadline); time is a FakeClock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import replace

import pytest

from slatelib import Db
from slatelib.core.checkpoints import expired_checkpoints, is_writer_checkpoint, remove_checkpoints
from slatelib.core.manifest import Checkpoint, Manifest
from slatelib.errors import InvalidDbStateError, UnavailableError
from slatelib.objstore import ObjectStore
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.store.wal_store import WalStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore
from slatelib.txn import update_versioned
from tests.unit.writer.support import compact_l0, writer_settings

PATH = "db"
LIFETIME = 4 * 3600
HOUR = 3600


@pytest.fixture
def flaky(store: ObjectStore) -> FlakyObjectStore:
    return FlakyObjectStore(store)


@pytest.fixture
def db(flaky: FlakyObjectStore, clock: FakeClock) -> Iterator[Db]:
    d = Db.open(PATH, flaky, writer_settings(), clock=clock)
    yield d
    flaky.clear()
    d.close(flush=None)


def latest(store: ObjectStore) -> StoredManifest:
    return ManifestStore(store, PATH).read_latest()


def writer_checkpoint_of(store: ObjectStore) -> Checkpoint:
    [cp] = [c for c in latest(store).value.checkpoints if is_writer_checkpoint(c)]
    return cp


def now_s(clock: FakeClock) -> int:
    return clock.now_ms() // 1000


def fail_manifest_writes(flaky: FlakyObjectStore) -> None:
    flaky.fail_before("put_if_absent", path="/manifest/", times=None)


def test_the_writer_checkpoint_expires_and_is_refreshed_after_half_its_lifetime(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    opened = writer_checkpoint_of(store)
    assert opened.expire_time_s == now_s(clock) + LIFETIME
    version = latest(store).id
    for i in range(20):
        db.put(b"k%d" % i, b"v")
    clock.advance(HOUR)
    db.refresh()
    assert latest(store).id == version  # no manifest version per write, none before it is due
    clock.advance(HOUR + 1)
    db.refresh()
    refreshed = writer_checkpoint_of(store)
    assert latest(store).id == version + 1 and refreshed.id != opened.id
    assert (refreshed.manifest_id, refreshed.expire_time_s) == (version + 1, now_s(clock) + LIFETIME)
    assert db.get(b"k7") == b"v"


def test_a_flush_commit_renews_the_expiry_in_the_same_manifest_write(
    db: Db, store: ObjectStore, clock: FakeClock
) -> None:
    clock.advance(HOUR)
    db.put(b"a", b"1")
    db.flush()
    flushed = latest(store)
    cp = writer_checkpoint_of(store)
    assert flushed.value.l0 and cp.manifest_id == flushed.id
    assert cp.expire_time_s == now_s(clock) + LIFETIME
    clock.advance(1.5 * HOUR)  # 2.5 h since open, but only 1.5 h since the flush: not due
    db.refresh()
    assert latest(store).id == flushed.id


def test_a_killed_writers_checkpoint_expires_so_gc_can_release_it(
    store: ObjectStore, clock: FakeClock
) -> None:
    db = Db.open(PATH, store, writer_settings(), clock=clock)
    db.put(b"a", b"1")
    db.flush()
    # SIGKILL: the threads stop and nothing removes the checkpoint; then an official 0.17
    # writer takes over (new epoch, checkpoint metadata dropped, the checkpoint kept).
    db._flusher.stop()  # noqa: SLF001
    db._wal.abort(InvalidDbStateError("killed"))  # noqa: SLF001
    update_versioned(ManifestStore(store, PATH), lambda cur: replace(
        cur.value, writer_epoch=cur.value.writer_epoch + 1,
        checkpoints=tuple(replace(c, writer_epoch=None) for c in cur.value.checkpoints)))
    left = writer_checkpoint_of(store)
    assert expired_checkpoints(latest(store).value, now_s(clock) + LIFETIME - 1) == []
    assert expired_checkpoints(latest(store).value, now_s(clock) + LIFETIME) == [left]


def test_reads_are_refused_while_the_checkpoint_cannot_be_refreshed_and_resume_after(
    db: Db, flaky: FlakyObjectStore, store: ObjectStore, clock: FakeClock
) -> None:
    db.put(b"a", b"1")
    db.flush()
    before = writer_checkpoint_of(store)
    fail_manifest_writes(flaky)
    clock.advance(2 * HOUR + 1)
    with pytest.raises(UnavailableError):
        db.refresh()  # the refresh fails; the writer keeps going
    db.put(b"b", b"2")
    assert db.get(b"a") == b"1"  # three quarters of the lifetime are not over yet
    clock.advance(HOUR)
    with pytest.raises(UnavailableError, match=f"refused.*{before.id}"):
        db.get(b"a")
    with pytest.raises(UnavailableError, match="refused"):
        db.scan()
    assert db.put(b"c", b"3") > 0  # writes need no checkpoint
    assert writer_checkpoint_of(store) == before
    flaky.clear()
    assert db.get(b"a") == b"1"  # re-established by the read itself
    renewed = writer_checkpoint_of(store)
    assert renewed.id != before.id and renewed.expire_time_s == now_s(clock) + LIFETIME
    assert dict(db.scan()) == {b"a": b"1", b"b": b"2", b"c": b"3"}


def test_a_removed_writer_checkpoint_is_reestablished_and_reads_wait_for_it(
    db: Db, flaky: FlakyObjectStore, store: ObjectStore, clock: FakeClock
) -> None:
    db.put(b"a", b"1")
    cp = writer_checkpoint_of(store)

    def remove(cur: StoredManifest) -> Manifest | None:
        return remove_checkpoints(cur.value, {cp.id})

    update_versioned(ManifestStore(store, PATH), remove)  # GC (expired) or an operator
    fail_manifest_writes(flaky)
    with pytest.raises(UnavailableError):
        db.refresh()
    with pytest.raises(UnavailableError, match="was removed"):
        db.get(b"a")
    flaky.clear()
    db.refresh()
    again = writer_checkpoint_of(store)
    assert again.id != cp.id and again.expire_time_s == now_s(clock) + LIFETIME
    assert db.get(b"a") == b"1"


def test_wal_ssts_of_concurrent_writers_stay_under_the_byte_cap(
    store: ObjectStore, clock: FakeClock
) -> None:
    release = threading.Event()
    flaky = FlakyObjectStore(store, sleep=lambda _s: release.wait(10))
    cap = 300
    db = Db.open(PATH, flaky, writer_settings(wal_batch_max_bytes=cap), clock=clock)
    try:
        first_wal = db.last_acked_wal_id() + 1
        flaky.delay("put_if_absent", path="/wal/", seconds=1, times=1)  # holds the first WAL
        threads = [threading.Thread(target=db.put, args=(b"k%02d" % i, b"v" * 100))
                   for i in range(9)]
        for t in threads:
            t.start()
        while db._wal._appended < 9:  # noqa: SLF001 - white-box wait, no sleeping
            threading.Event().wait(0.01)
        release.set()
        for t in threads:
            t.join(10)
        last = db.last_acked_wal_id()
    finally:
        db.close(flush=None)
    wal = WalStore(store, PATH)
    sizes = []
    for wal_id in range(first_wal, last + 1):
        rows = wal.read_rows(wal_id)
        sizes.append(sum(len(r[0]) + len(r[3]) + 32 for r in rows))
    assert sum(sizes) == 9 * 135 and max(sizes) <= cap  # 8 piled-up writes: 4 WAL SSTs
    assert len(sizes) == 1 + 4


def test_a_checkpoint_move_with_a_lost_response_stops_reads_through_the_unpinned_version(
    db: Db, flaky: FlakyObjectStore, store: ObjectStore, clock: FakeClock
) -> None:
    db.put(b"a", b"1")
    db.flush()
    old_l0 = latest(store).value.l0[0].sst_id
    compact_l0(store, PATH, now_ms=clock.now_ms())
    flaky.fail_after("put_if_absent", path="/manifest/")  # the move lands, its response is lost
    with pytest.raises(UnavailableError):
        db.refresh()
    moved = latest(store)
    assert writer_checkpoint_of(store).manifest_id == moved.id and moved.value.l0 == ()
    store.delete(DbPaths(PATH).compacted(old_l0))  # nothing pins the old L0 now: GC may do this
    assert db.get(b"a") == b"1"


def test_a_removed_checkpoint_stops_reads_even_when_the_tree_changed_too(
    db: Db, flaky: FlakyObjectStore, store: ObjectStore, clock: FakeClock
) -> None:
    db.put(b"a", b"1")
    db.flush()
    compact_l0(store, PATH, now_ms=clock.now_ms())
    update_versioned(ManifestStore(store, PATH),
                     lambda cur: remove_checkpoints(cur.value, {writer_checkpoint_of(store).id}))
    fail_manifest_writes(flaky)
    with pytest.raises(UnavailableError):
        db.refresh()
    assert db._flusher.read_deadline_s == 0  # noqa: SLF001
    with pytest.raises(UnavailableError, match="refused"):
        db.get(b"a")


def test_a_poll_requested_while_the_flusher_stops_is_answered(
    store: ObjectStore, clock: FakeClock
) -> None:
    requested: list[Future[None]] = []

    def stop_during_the_poll(_seconds: float) -> None:  # runs on the flusher thread
        requested.append(db._flusher.request_poll())  # noqa: SLF001 - a read past its deadline
        db._flusher.stop()  # noqa: SLF001 - close() stopping the flusher meanwhile

    flaky = FlakyObjectStore(store, sleep=stop_during_the_poll)
    db = Db.open(PATH, flaky, writer_settings(), clock=clock)
    flaky.delay(path="/manifest", seconds=1, times=1)
    db.refresh()
    db._flusher.stop()  # noqa: SLF001 - waits for the flusher thread to end
    [pending] = requested
    assert pending.done()
    with pytest.raises(UnavailableError, match="stopped"):
        pending.result(timeout=0)
    db.close(flush=None)
