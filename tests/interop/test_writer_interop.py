"""The slatelib writer against official SlateDB 0.17.0, both directions.

- The official ``DbReader`` and ``Db`` read databases the slatelib writer wrote: WAL only,
  after L0 flushes, after a reopen (puts, deletes, merges, TTLs, codecs).
- Writer hand-offs: slatelib -> official -> slatelib -> official, each open fencing the
  previous writer, with an official reader and a slatelib reader attached throughout;
  every acknowledged write of every writer stays readable.
- A WAL gap left by a crashed slatelib writer with several WAL writes in flight is repaired
  by the next slatelib writer, after which an official writer sees exactly the
  acknowledged prefix.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from slatelib import Db, DbReader, WriteBatch
from slatelib.config import Settings
from slatelib.core.row import VALUE
from slatelib.errors import FencedError
from slatelib.format.sst import SstWriterOptions, encode_sst
from slatelib.objstore import open_store
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from tests.interop.compare import assert_reads_match
from tests.interop.official import (
    Concat,
    DbSettings,
    Delete,
    Merge,
    Model,
    OfficialDb,
    OfficialReader,
    Op,
    Put,
    read_all,
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
        return [c for c in m.checkpoints if c.expire_time_s is not None]

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
