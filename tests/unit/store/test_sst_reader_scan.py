"""The scan path of SstReader: block lists clipped to a range, decoded in one native call.

``iter_range_blocks`` must hold exactly the rows of ``iter_range`` (the row-at-a-time
reference) for any range, bypass the block cache, and name the damaged block of a corrupt
SST exactly as the per-block path does. A DbReader scan (which merges these blocks natively)
must see every key of a database with several overlapping sources, and stay bounded.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from slatelib import DbReader, open_store
from slatelib.core.manifest import SstHandle
from slatelib.core.row import TOMBSTONE, VALUE, Row
from slatelib.errors import ChecksumMismatchError
from slatelib.format.sst import SstWriter, SstWriterOptions, block_range, parse_sst
from slatelib.objstore import ObjectStore, reset_memory_stores
from slatelib.store.sst_reader import BlockCache, SstReader
from slatelib.writer import Db

ROWS: list[Row] = [
    (b"k%05d" % i, 1000 - i % 7, VALUE if i % 5 else TOMBSTONE,
     b"" if i % 5 == 0 else b"v%d" % i, None, None)
    for i in range(3000)
]


@pytest.fixture
def store() -> Iterator[ObjectStore]:
    reset_memory_stores()
    yield open_store("memory:///")
    reset_memory_stores()


def _reader(store: ObjectStore, rows: list[Row], **kw: object) -> tuple[SstReader, bytes]:
    w = SstWriter(SstWriterOptions(block_size=256))
    w.add_rows(rows)
    enc = w.finish()
    data = enc.to_bytes()
    store.put("t.sst", data)
    return SstReader(store, "t.sst", SstHandle(1, enc.info), **kw), data  # type: ignore[arg-type]


KEYS = [None, b"", b"k00000", b"k00017", b"k01500", b"k01500x", b"k02999", b"z"]


@pytest.mark.parametrize("end_inclusive", [False, True])
def test_blocks_hold_exactly_the_rows_of_the_range(store: ObjectStore,
                                                   end_inclusive: bool) -> None:
    reader, _ = _reader(store, ROWS)
    for start in KEYS:
        for end in KEYS:
            want = list(reader.iter_range(start, end, end_inclusive=end_inclusive))
            blocks = list(reader.iter_range_blocks(start, end, end_inclusive=end_inclusive))
            assert all(blocks), "no empty block lists"
            assert [r for b in blocks for r in b] == want, (start, end)


def test_scan_blocks_bypass_the_block_cache(store: ObjectStore) -> None:
    cache = BlockCache(1 << 20)
    reader, _ = _reader(store, ROWS, cache=cache)
    list(reader.iter_range_blocks())
    assert cache.get(("t.sst", 0)) is None
    reader.block_rows(0)  # point reads still fill it
    assert cache.get(("t.sst", 0)) is not None


def test_a_damaged_block_is_named_by_the_scan(store: ObjectStore) -> None:
    reader, data = _reader(store, ROWS)
    sst = parse_sst(data)
    s, _ = block_range(sst.index, sst.info, 5)
    damaged = bytearray(data)
    damaged[s + 2] ^= 0x40
    store.put("t.sst", bytes(damaged))
    with pytest.raises(ChecksumMismatchError, match="block 5") as info:
        list(reader.iter_range_blocks())
    assert info.value.path == "t.sst"


def test_reader_scan_merges_overlapping_sources(store: ObjectStore) -> None:
    rng = random.Random(5)
    model: dict[bytes, bytes | None] = {}
    w = Db.open("db", store)
    try:
        for _ in range(4):  # four flushes: four overlapping L0s, then the memtable
            for _ in range(400):
                key = b"k%04d" % rng.randrange(800)
                if rng.random() < 0.2:
                    w.delete(key)
                    model[key] = None
                else:
                    value = rng.randbytes(8)
                    w.put(key, value)
                    model[key] = value
            w.flush()
        w.put(b"k0001", b"mem")
        model[b"k0001"] = b"mem"
        got = list(w.scan())
    finally:
        w.close()
    assert got == sorted((k, v) for k, v in model.items() if v is not None)
    with DbReader.open("db", store) as r:
        assert list(r.scan(b"k0100", b"k0200")) == [
            (k, v) for k, v in got if b"k0100" <= k < b"k0200"]
