"""The native SST finishing (``slatelib/_sstwrite.c``) and batch block decoding
(``_speedups.decode_blocks``) against the pure-Python path, byte for byte.

``SstWriter(native_finish=True)`` frames blocks, compresses them through the codec, and
encodes the index and stats in C; ``native_finish=False`` is the reference. On random rows,
block sizes, filters and every compression codec, both must write the same bytes, info,
stats and block count, also when the blocks are drained for streaming midway.
"""

from __future__ import annotations

import random
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatelib.core.manifest import CompressionCodec, SstType
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.format import native
from slatelib.format.sst import SstWriter, SstWriterOptions, block_range, parse_sst
from slatelib.format.sst_index import encode_sst_index
from slatelib.format.sst_stats import SstStats, encode_sst_stats
from tests.unit.native_only import require_native

DIFF = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def sstwrite_built() -> None:
    """Optional for users, not for these tests: a missing build is a failure."""
    require_native(native.sstwrite is not None and native.speedups is not None,
                   "slatelib._sstwrite / _speedups")


def random_rows(rng: random.Random, n: int, *, wal: bool = False) -> list[Row]:
    keys = sorted({rng.randbytes(rng.randint(1, 24)) for _ in range(n)})
    rows: list[Row] = []
    for k in keys:
        for seq in sorted(rng.sample(range(1, 10_000), rng.choice([1, 1, 2, 3])), reverse=True):
            kind = rng.choice([VALUE, VALUE, TOMBSTONE, MERGE])
            value = b"" if kind == TOMBSTONE else rng.randbytes(rng.choice([0, 3, 40, 300]))
            rows.append((k, seq, kind, value, rng.choice([None, 1 << 40]),
                         rng.choice([None, -5, 7])))
    if wal:
        rows = [(r[0], i + 1, *r[2:]) for i, r in enumerate(rows)]  # type: ignore[misc]
    return rows


def write(rows: list[Row], opts: SstWriterOptions, *, native_finish: bool, seed: int,
          drain: bool, size_hint: int = 0) -> tuple[bytes, object, object, int, int]:
    rng = random.Random(seed)
    w = SstWriter(opts, native_finish=native_finish, size_hint=size_hint)
    drained: list[bytes] = []
    i = 0
    while i < len(rows):
        j = i + rng.randint(1, 700)
        w.add_rows(rows[i:j])
        if drain and rng.random() < 0.3:
            drained += w.drain()
        i = j
    e = w.finish()
    return b"".join(drained) + e.to_bytes(), e.info, e.stats, e.num_blocks, e.size


@DIFF
@given(st.integers(0, 2**32), st.sampled_from(list(CompressionCodec)),
       st.sampled_from([48, 512, 4096]), st.sampled_from([0, 10, 1000]), st.booleans(),
       st.booleans())
def test_native_finishing_writes_the_same_sst(seed: int, codec: CompressionCodec,
                                              block_size: int, min_filter_keys: int,
                                              wal: bool, drain: bool) -> None:
    rng = random.Random(seed)
    rows = random_rows(rng, rng.randint(1, 1500), wal=wal)
    opts = SstWriterOptions(block_size=block_size, codec=codec, min_filter_keys=min_filter_keys,
                            sst_type=SstType.WAL if wal else SstType.COMPACTED)
    got = write(rows, opts, native_finish=True, seed=seed, drain=drain)
    want = write(rows, opts, native_finish=False, seed=seed, drain=drain)
    assert got == want
    parsed = parse_sst(got[0])
    assert parsed.rows() == rows


@DIFF
@given(st.integers(0, 2**32), st.sampled_from([48, 512, 4096]),
       st.sampled_from([0, 1, 3000, 40_000, 1 << 22]), st.booleans())
def test_blocks_framed_in_place_write_the_same_sst(seed: int, block_size: int, size_hint: int,
                                                   drain: bool) -> None:
    """Uncompressed: the block writer frames blocks straight into the SST's buffer (the
    sink); a buffer too small for the next block, a drain midway and growth fall back to
    bytes and back again, and the SST is the reference's, byte for byte."""
    rng = random.Random(seed)
    rows = random_rows(rng, rng.randint(1, 1500))
    opts = SstWriterOptions(block_size=block_size, codec=CompressionCodec.NONE)
    got = write(rows, opts, native_finish=True, seed=seed, drain=drain, size_hint=size_hint)
    want = write(rows, opts, native_finish=False, seed=seed, drain=drain)
    assert got == want


def _sink_pair(reserve: int) -> tuple[object, object]:
    assert native.sstwrite is not None and native.speedups is not None
    blocks = native.sstwrite.SstBlocks()
    blocks.reserve(reserve)
    bw = native.speedups.BlockWriterV2(64)
    bw.set_sink(blocks)
    return bw, blocks


def test_a_block_writer_with_a_sink_places_blocks_and_sst_blocks_records_them() -> None:
    rows = random_rows(random.Random(3), 300)
    bw, blocks = _sink_pair(1 << 20)
    bw.add_rows(rows, 0, len(rows))
    bw.finish_block()
    taken = bw.take_blocks()
    assert taken and all(isinstance(b[0], int) for b in taken)
    blocks.add(taken)
    plain_bw = native.speedups.BlockWriterV2(64)  # type: ignore[union-attr]
    plain_bw.add_rows(rows, 0, len(rows))
    plain_bw.finish_block()
    plain = plain_bw.take_blocks()
    assert [b[1:] for b in taken] == [b[1:] for b in plain]
    assert [b[0] for b in taken] == [len(b[0]) for b in plain]
    framed = b"".join(b[0] + zlib.crc32(b[0]).to_bytes(4, "big") for b in plain)
    assert blocks.take() == framed


def test_placed_blocks_are_refused_compressed_and_must_be_added_before_take() -> None:
    rows = random_rows(random.Random(4), 50)
    bw, blocks = _sink_pair(1 << 16)
    bw.add_rows(rows, 0, len(rows))
    bw.finish_block()
    taken = bw.take_blocks()
    with pytest.raises(ValueError, match="compressed"):
        blocks.add(taken, bytes)
    with pytest.raises(ValueError, match="not added"):
        blocks.take()
    blocks.add(taken)
    assert blocks.count == len(taken) and len(blocks.take()) == blocks.offset


def test_a_block_that_does_not_fit_the_sink_and_those_after_it_come_as_bytes() -> None:
    rows = random_rows(random.Random(5), 400)
    bw, blocks = _sink_pair(1 << 16)  # at least 64 KiB: holds some blocks, not all
    bw.add_rows(rows, 0, len(rows))
    bw.finish_block()
    kinds = [isinstance(b[0], int) for b in bw.take_blocks()]
    assert kinds[0] and not kinds[-1] and kinds == sorted(kinds, reverse=True)


@pytest.mark.parametrize("counts", [
    [(0, 0, 0)], [(1, 0, 0)], [(0, 1, 0), (0, 0, 1)], [(65535, 65535, 65535)] * 3,
    [(1, 2, 3), (0, 0, 0), (4, 0, 5), (0, 6, 0)] * 5,
])
@pytest.mark.parametrize("totals", [(0, 0, 0, 0, 0), (1, 2, 3, 4, 5), (2**64 - 1, 0, 7, 0, 1)])
def test_native_index_and_stats_encoders_equal_the_references(
    counts: list[tuple[int, int, int]], totals: tuple[int, int, int, int, int]
) -> None:
    assert native.sstwrite is not None
    blocks = native.sstwrite.SstBlocks()
    keys = [b"" if i == 0 else b"k%03d" % i * (i % 3) for i in range(len(counts))]
    blocks.add([(bytes(10 + i), keys[i], *c) for i, c in enumerate(counts)])
    offsets = [14 * i + i * (i - 1) // 2 for i in range(len(counts))]
    assert blocks.encode_index() == encode_sst_index(list(zip(offsets, keys, strict=True)))
    stats = SstStats(*totals, block_stats=tuple(counts))
    assert blocks.encode_stats(*totals) == encode_sst_stats(stats)
    assert blocks.block_stats() == tuple(counts)


def test_a_block_count_that_does_not_fit_u16_is_refused_and_nothing_recorded() -> None:
    assert native.sstwrite is not None
    blocks = native.sstwrite.SstBlocks()
    blocks.add([(b"raw", b"", 1, 0, 0)])
    with pytest.raises(ValueError, match="u16"):
        blocks.add([(b"raw2", b"k", 2, 0, 0), (b"raw3", b"l", 65536, 0, 0)])
    assert (blocks.count, blocks.offset) == (1, 7)
    assert blocks.take() == b"raw" + zlib.crc32(b"raw").to_bytes(4, "big")
    assert blocks.take() == b""


def test_decode_blocks_equals_per_block_decoding_and_names_a_damaged_block() -> None:
    assert native.speedups is not None
    rows = random_rows(random.Random(7), 800)
    w = SstWriter(SstWriterOptions(block_size=256))
    w.add_rows(rows)
    sst = parse_sst(w.finish().to_bytes())
    n = len(sst.index.offsets)
    bounds = [*sst.index.offsets, block_range(sst.index, sst.info, n - 1)[1]]
    decoded = native.speedups.decode_blocks(sst.data, bounds, 2)
    assert decoded == [sst.block_rows(i) for i in range(n)]
    damaged = bytearray(sst.data)
    damaged[bounds[3] + 1] ^= 0xFF
    with pytest.raises(ValueError, match="block 3: checksum mismatch"):
        native.speedups.decode_blocks(bytes(damaged), bounds, 2)
    with pytest.raises(ValueError, match="out of range"):
        native.speedups.decode_blocks(sst.data, [0, len(sst.data) + 1], 2)
