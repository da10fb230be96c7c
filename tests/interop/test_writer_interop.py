"""The slatelib writer against official SlateDB 0.17.0, both directions.

- The official ``DbReader`` and ``Db`` read databases the slatelib writer wrote: WAL only,
  after L0 flushes, after a reopen (puts, deletes, merges, TTLs, codecs).
- Writer hand-offs: slatelib -> official -> slatelib -> official, each open fencing the
  previous writer, with an official reader and a slatelib reader attached throughout;
  every acknowledged write of every writer stays readable. Also official -> slatelib ->
  official with its compactor compacting -> slatelib, checked through both (managed)
  readers after every step.
- A WAL gap left by a crashed slatelib writer with several WAL writes in flight is repaired
  by the next slatelib writer, after which an official writer sees exactly the
  acknowledged prefix.
- A memtable flush of slatelib writes, row for row, the L0 that 0.17 writes when it
  replays and flushes the same WAL (versions dropped, merges folded, expired rows).
"""

from __future__ import annotations

import asyncio
import random
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from slatelib import Db, DbReader, WriteBatch
from slatelib.config import Settings
from slatelib.core.checkpoints import is_writer_checkpoint
from slatelib.core.row import VALUE
from slatelib.errors import FencedError
from slatelib.format.sst import SstWriterOptions, encode_sst, parse_sst
from slatelib.objstore import open_store
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from tests.interop.compare import assert_reads_match
from tests.interop.official import (
    Concat,
    DbSettings,
    Delete,
    Merge,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Op,
    Put,
    as_store,
    read_all,
    run,
    to_batch,
)
from tests.interop.workload import absent_keys, key_pool, random_bounds, random_ops, ttl_ops
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.interop

PATH = "db"


def settings(codec: str | None = None, **writer: object) -> Settings:
    from dataclasses import replace

    s = writer_settings(**writer)
    return replace(s, sst=replace(s.sst, block_size=1024, compression_codec=codec or "none"))


def as_batch(ops: Sequence[Op]) -> WriteBatch:
    b = WriteBatch()
    for op in ops:
        if isinstance(op, Put):
            b.put(op.key, op.value, expire_at_ms=op.expire_at_ms)
        elif isinstance(op, Delete):
            b.delete(op.key)
        else:
            b.merge(op.key, op.operand, expire_at_ms=op.expire_at_ms)
    return b


def write(db: Db, model: Model, ops: Sequence[Op]) -> None:
    db.write(as_batch(ops))
    model.apply(ops)


def check(root: Path, model: Model, rng: random.Random, keys: Sequence[bytes]) -> None:
    probe = [*keys, *absent_keys(rng, keys, 10)]
    assert_reads_match(root, f"file://{root}", PATH, probe, random_bounds(rng, keys, 6),
                       expected=model.live(), merge_operator="concat",
                       official_kwargs={"merge_operator": Concat()})


@pytest.mark.parametrize("codec, seed", [(None, 1), ("Zstd", 2), ("Snappy", 3)])
def test_official_reader_and_writer_read_what_slatelib_wrote(tmp_path: Path, codec: str | None, seed: int) -> None:
    rng = random.Random(seed)
    keys = key_pool(rng, 60)
    model = Model()
    url = f"file://{tmp_path}"
    db = Db.open(PATH, url, settings(codec), merge_operator="concat")
    for _ in range(6):
        write(db, model, random_ops(rng, keys, 12, block_size=1024, merges=0.2))
    db.close(flush=None)
    check(tmp_path, model, rng, keys)  # WAL only

    db = Db.open(PATH, url, settings(codec, l0_sst_size_bytes=8192, l0_max_ssts=64),
                 merge_operator="concat")
    ttl_keys = [k + b"#ttl" for k in keys[-6:]]
    write(db, model, ttl_ops(rng, ttl_keys))
    for _ in range(4):
        write(db, model, random_ops(rng, keys, 15, block_size=1024, merges=0.2))
        db.flush()
        model.flush_memtable()
    write(db, model, random_ops(rng, keys, 10, block_size=1024))
    assert len(db.manifest.l0) >= 4
    db.close(flush=None)
    check(tmp_path, model, rng, [*keys, *ttl_keys])  # L0 + WAL, expired rows flushed as tombstones

    with OfficialDb.open(tmp_path, PATH, DbSettings(codec=codec), model=model,
                         merge_operator=Concat()) as official:
        assert official.scan() == sorted(model.live().items())
        official.write([Put(b"official", b"1"), Merge(keys[0], b"+o")])
    db = Db.open(PATH, url, settings(codec), merge_operator="concat")  # after reopen
    assert dict(db.scan()) == model.live()
    db.close()
    check(tmp_path, model, rng, [*keys, b"official"])


def test_hand_offs_fence_the_previous_writer_and_keep_every_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(7)
    keys = key_pool(rng, 40)
    model = Model()
    url = f"file://{tmp_path}"

    def reader_checkpoints() -> list[object]:
        m = ManifestStore(open_store(url), PATH).read_latest().value
        return [c for c in m.checkpoints if c.expire_time_s is not None and not is_writer_checkpoint(c)]

    first = Db.open(PATH, url, settings(), merge_operator="concat")
    write(first, model, random_ops(rng, keys, 20, block_size=1024, merges=0.2))
    first.flush()
    write(first, model, random_ops(rng, keys, 10, block_size=1024))
    ours = DbReader.open(PATH, url, settings=settings(), merge_operator="concat", auto_refresh=False)
    theirs = OfficialReader.open(tmp_path, PATH, merge_operator=Concat())  # with its checkpoint

    second = OfficialDb.open(tmp_path, PATH, DbSettings(), model=model, merge_operator=Concat())
    with pytest.raises(FencedError):
        first.put(b"zombie", b"1")
    second.write(random_ops(rng, keys, 15, block_size=1024, merges=0.2))
    second.flush_wal()
    ours.refresh()
    assert dict(ours.scan()) == model.live()

    third = Db.open(PATH, url, settings(), merge_operator="concat")
    second.model = None  # what follows is never acknowledged
    with pytest.raises(Exception):  # noqa: B017,PT011 - the official binding's error type
        second.write([Put(b"zombie", b"2")])
        second.flush_wal()
    write(third, model, random_ops(rng, keys, 15, block_size=1024, merges=0.2))
    third.flush()
    write(third, model, [Put(b"third", b"wal only")])
    ours.refresh()
    assert dict(ours.scan()) == model.live()

    fourth = OfficialDb.open(tmp_path, PATH, DbSettings(), model=model, merge_operator=Concat())
    with pytest.raises(FencedError):
        third.put(b"zombie", b"3")
    assert fourth.scan() == sorted(model.live().items())
    fourth.write([Put(b"fourth", b"x")])
    fourth.close(flush="memtable")
    ours.refresh()
    assert dict(ours.scan()) == model.live() and b"zombie" not in model.live()
    assert len(reader_checkpoints()) == 2  # both readers' checkpoints survived every writer
    ours.close()
    theirs.close()
    assert reader_checkpoints() == []
    for w in (first, third):
        w.close()
    second.close(flush=None)
    check(tmp_path, model, rng, [*keys, b"third", b"fourth", b"zombie"])


def test_a_wal_gap_left_by_a_crash_is_repaired_before_an_official_writer_opens(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    db = Db.open(PATH, url, settings(wal_max_in_flight=4))
    db.put(b"acked", b"1")
    db.close(flush=None)
    gap = db.last_acked_wal_id() + 1  # this WAL write never landed; the next one did
    orphan = encode_sst([(b"unacked", 99, VALUE, b"x", None, 1)], SstWriterOptions.wal())
    (tmp_path / DbPaths(PATH).wal(gap + 1)).write_bytes(orphan.to_bytes())
    assert read_all(tmp_path, PATH) == [(b"acked", b"1")]  # readers stop at the gap
    Db.open(PATH, url, settings()).close(flush=None)  # the next slatelib writer repairs it
    with OfficialDb.open(tmp_path, PATH, DbSettings()) as official:
        assert official.scan() == [(b"acked", b"1")]
        official.write([Put(b"after", b"2")])
    assert read_all(tmp_path, PATH) == [(b"acked", b"1"), (b"after", b"2")]


def newest_l0_rows(root: Path) -> list[tuple[object, ...]]:
    m = ManifestStore(open_store(f"file://{root}"), PATH).read_latest().value
    data = (root / DbPaths(PATH).compacted(m.l0[0].sst_id)).read_bytes()
    return [tuple(r) for r in parse_sst(data).rows()]


def test_an_l0_flush_writes_what_0_17_writes_for_the_same_wal(tmp_path: Path) -> None:
    clock = FakeClock(1_750_000_000_000)
    t0 = clock.now_ms()
    src, ours, theirs = tmp_path / "src", tmp_path / "ours", tmp_path / "theirs"
    db = Db.open(PATH, f"file://{src}", settings(), merge_operator="concat", clock=clock)
    batches: list[WriteBatch] = [
        WriteBatch().put(b"a", b"1").put(b"d", b"x").merge(b"m", b"base-"),
        WriteBatch().put(b"e", b"soon", expire_at_ms=t0 + 1500).merge(b"o", b"1"),
        WriteBatch().put(b"a", b"2").merge(b"m", b"x").merge(b"m", b"y").put(b"n", b"base"),
        WriteBatch().merge(b"n", b"gone", expire_at_ms=t0 + 2500).merge(b"o", b"2").delete(b"d"),
        WriteBatch().put(b"f", b"later", expire_at_ms=t0 + 10**9).merge(b"p", b"b0"),
        WriteBatch().merge(b"p", b"ttl", expire_at_ms=t0 + 10**9).merge(b"o", b"3"),
        WriteBatch().put(b"a", b"3").delete(b"gone"),
    ]
    for batch in batches:
        db.write(batch)
        clock.advance(1)
    db.close(flush=None)  # WAL only
    shutil.copytree(src, ours)
    shutil.copytree(src, theirs)
    with Db.open(PATH, f"file://{ours}", settings(), merge_operator="concat", clock=clock) as mine:
        mine.flush()
    official = OfficialDb.open(theirs, PATH, DbSettings(compactor=False), merge_operator=Concat())
    official.flush_memtable()
    official.close(flush=None)
    expected = newest_l0_rows(theirs)
    assert {r[0] for r in expected} == {b"a", b"d", b"e", b"f", b"gone", b"m", b"n", b"o", b"p"}
    assert newest_l0_rows(ours) == expected


def official_managed_reader(root: Path) -> OfficialReader:
    """The official DbReader in its default (managed checkpoint) mode, polling every 50 ms."""
    from slatedb.uniffi import DbReaderBuilder, ReaderOptions

    builder = DbReaderBuilder(PATH, as_store(root))
    builder.with_merge_operator(Concat())
    builder.with_options(ReaderOptions(manifest_poll_interval_ms=50, checkpoint_lifetime_ms=60_000,
                                       max_memtable_bytes=1 << 26, skip_wal_replay=False))
    return OfficialReader(run(builder.build()))


def eventually(check: Callable[[], bool], timeout_s: float = 20.0) -> bool:
    """``check()`` until true; for the official reader, which only moves on its own polls."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        run(asyncio.sleep(0.02))
    return True


def official_write_fails(db: OfficialDb) -> bool:
    try:
        run(db.db.write(to_batch([Put(b"zombie", b"o")])))
        db.flush_wal()
    except Exception:  # noqa: BLE001 - the binding's error type for a fenced/closed writer
        return True
    return False


def test_hand_offs_with_an_official_compactor_keep_both_readers_right(tmp_path: Path) -> None:
    rng = random.Random(5)
    keys = key_pool(rng, 40)
    model = Model()
    url = f"file://{tmp_path}"
    compacting = DbSettings(compactor=True)

    def step(name: str) -> None:
        want = sorted(model.live().items())
        ours.refresh()
        assert list(ours.scan()) == want, name
        assert all(ours.get(k) == model.get(k) for k in keys), name
        assert eventually(lambda: theirs.scan() == want), f"{name}: official reader"

    def ours_writes(db: Db, batches: int) -> None:
        for _ in range(batches):
            write(db, model, random_ops(rng, keys, 10, block_size=1024, merges=0.2))

    def their_writes(db: OfficialDb, batches: int) -> None:
        for _ in range(batches):
            db.write(random_ops(rng, keys, 10, block_size=1024, merges=0.2))

    w1 = OfficialDb.open(tmp_path, PATH, compacting, model=model, merge_operator=Concat())
    their_writes(w1, 4)
    w1.flush_memtable()
    their_writes(w1, 2)
    w1.flush_wal()
    ours = DbReader.open(PATH, url, settings=settings(), merge_operator="concat", auto_refresh=False)
    theirs = official_managed_reader(tmp_path)
    step("official")

    w2 = Db.open(PATH, url, settings(), merge_operator="concat")
    w1.model = None
    assert official_write_fails(w1)
    ours_writes(w2, 4)
    w2.flush()
    ours_writes(w2, 2)
    step("slatelib")

    w3 = OfficialDb.open(tmp_path, PATH, compacting, model=model, merge_operator=Concat())
    with pytest.raises(FencedError):
        w2.put(b"zombie", b"s")
    w2.close()  # the official writer keeps it: the fenced writer removes its checkpoint
    assert not [c for c in ManifestStore(open_store(url), PATH).read_latest().value.checkpoints
                if c.name == "slatelib-writer"]
    their_writes(w3, 3)
    w3.flush_memtable()
    their_writes(w3, 3)
    w3.flush_memtable()
    OfficialAdmin(tmp_path, PATH).compact()  # its compactor merges every L0 into a run
    their_writes(w3, 2)
    w3.flush_wal()
    step("official, compacted")

    w4 = Db.open(PATH, url, settings(), merge_operator="concat")
    w3.model = None
    assert official_write_fails(w3)
    assert len(w4.manifest.compacted) == 1 and dict(w4.scan()) == model.live()
    ours_writes(w4, 3)
    w4.flush()
    ours_writes(w4, 2)
    step("slatelib again")
    for w in (w1, w3):
        w.close(flush=None)
    w4.close()
    step("closed")
    ours.close()
    theirs.close()
    left = ManifestStore(open_store(url), PATH).read_latest().value.checkpoints
    assert [c for c in left if c.name == "slatelib-writer" or c.expire_time_s is None] == []


@pytest.mark.parametrize("run_id", range(4))
def test_slatelib_and_official_writers_opening_at_once_leave_one_writer(
    tmp_path: Path, run_id: int
) -> None:
    url = f"file://{tmp_path}"
    with Db.open(PATH, url, settings()) as db:
        db.put(b"base", b"0")
    go = threading.Barrier(2)
    opened: dict[str, object] = {}

    def open_ours() -> None:
        go.wait()
        try:
            opened["ours"] = Db.open(PATH, url, settings())
        except FencedError as exc:  # it lost while opening
            opened["ours"] = exc

    t = threading.Thread(target=open_ours)
    t.start()
    go.wait()
    theirs = OfficialDb.open(tmp_path, PATH, DbSettings(compactor=False))
    t.join(60)
    ours = opened["ours"]
    ours_ok = isinstance(ours, Db)
    if ours_ok:
        try:
            ours.put(b"ours", b"1")
        except FencedError:
            ours_ok = False
    theirs_ok = not official_write_fails(theirs)
    assert [ours_ok, theirs_ok].count(True) == 1, (run_id, ours, ours_ok, theirs_ok)
    if isinstance(ours, Db):
        ours.close()
    theirs.close(flush=None)
    data = dict(read_all(tmp_path, PATH))
    assert data[b"base"] == b"0" and (b"ours" in data) == ours_ok
    assert data.get(b"zombie") == (b"o" if theirs_ok else None)


def killed_writer_child(root: str) -> None:  # pragma: no cover - runs in the killed subprocess
    """Write from a slatelib writer whose clock runs an hour behind, so the checkpoint it
    leaves (lifetime 10 min) has expired in real time when it is killed."""
    clock = FakeClock(int(time.time() * 1000) - 3_600_000)
    db = Db.open(PATH, f"file://{root}",
                 settings(checkpoint_lifetime=600.0, manifest_poll_interval=60.0), clock=clock)
    for i in range(1_000_000):
        db.put(b"k%05d" % i, b"v%d" % i)
        print(f"ACK {i}", flush=True)
        if i % 20 == 19:
            db.flush()


def official_gc_once(root: Path) -> None:
    from slatedb.uniffi._slatedb_uniffi.slatedb import (
        GarbageCollectorDirectoryOptions,
        GarbageCollectorOptions,
        GarbageCollectorScheduleOptions,
    )

    d = GarbageCollectorDirectoryOptions(interval_ms=None, min_age_ms=0, dry_run=False)
    run(OfficialAdmin(root, PATH).admin.run_gc_once(GarbageCollectorOptions(
        manifest_options=d, wal_options=d, wal_fence_options=d, compacted_options=d,
        compactions_options=d, detach_options=GarbageCollectorScheduleOptions(interval_ms=None))))


def test_a_killed_writers_expired_checkpoint_is_dropped_by_official_and_slatelib_gc(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    from slatelib.ops.gc import collect_garbage

    root, ours = tmp_path / "official", tmp_path / "ours"
    root.mkdir()
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from tests.interop.test_writer_interop import killed_writer_child; "
         f"killed_writer_child({str(root)!r})"],
        cwd=repo, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.stdout is not None
    acked = -1
    for line in proc.stdout:
        acked = int(line.split()[1])
        if acked >= 50:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(30)
    proc.stdout.close()
    assert acked >= 50
    shutil.copytree(root, ours)
    admin = OfficialAdmin(root, PATH)
    [left] = run(admin.admin.list_checkpoints(None))
    assert left.name == "slatelib-writer" and left.expire_time_secs < time.time()
    no_gc = DbSettings(compactor=False, extra={"garbage_collector_options": "null"})
    with OfficialDb.open(root, PATH, no_gc) as db:
        assert [db.get(b"k%05d" % i) for i in range(acked + 1)] == \
            [b"v%d" % i for i in range(acked + 1)]
        db.write([Put(b"after", b"official")])
        db.flush_memtable()
    assert [c.name for c in run(admin.admin.list_checkpoints(None))] == ["slatelib-writer"]
    official_gc_once(root)
    assert run(admin.admin.list_checkpoints(None)) == []
    data = dict(read_all(root, PATH))
    assert data[b"after"] == b"official" and len(data) >= acked + 2
    collect_garbage(PATH, f"file://{ours}", min_age=0, force=True, dry_run=False)
    assert ManifestStore(open_store(f"file://{ours}"), PATH).read_latest().value.checkpoints == ()
