"""SST stats codec (format §7.10): golden stats blocks, direct encoder vs Builder, corruption."""

from __future__ import annotations

import time
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelib.errors import CorruptObjectError, DataError, InvalidArgumentError
from slatelib.format.flatbuf import Buffer
from slatelib.format.sst_stats import (
    SstStats,
    decode_sst_stats,
    encode_sst_stats,
    encode_sst_stats_with_builder,
)
from tests.conftest import FIXTURE_NAMES

from ._sst_regions import official_sst_files, read_regions

u64s = st.one_of(st.just(0), st.integers(1, 300), st.integers(0, 2**64 - 1))
u16s = st.one_of(st.just(0), st.integers(1, 300), st.integers(0, 2**16 - 1))
stats_values = st.builds(
    SstStats, u64s, u64s, u64s, u64s, u64s,
    st.lists(st.tuples(u16s, u16s, u16s), max_size=9).map(tuple),
)


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_every_official_stats_block_reencodes_byte_identically(
        fixtures_dir: Path, fixture: str) -> None:
    for f in official_sst_files(fixtures_dir / fixture):
        regions = read_regions(f)
        if regions.stats is None:
            assert regions.info.stats_len == 0
            continue
        stats = decode_sst_stats(regions.stats, path=str(f))
        assert encode_sst_stats(stats) == regions.stats, f
        assert encode_sst_stats_with_builder(stats) == regions.stats, f


def test_official_stats_count_one_entry_per_block_and_sum_up(fixtures_dir: Path) -> None:
    from slatelib.format.sst_index import decode_sst_index

    checked = 0
    for f in official_sst_files(fixtures_dir / "basic"):
        regions = read_regions(f)
        if regions.stats is None:
            continue
        stats = decode_sst_stats(regions.stats)
        assert len(stats.block_stats) == len(decode_sst_index(regions.index))
        assert stats.num_puts == sum(b[0] for b in stats.block_stats)
        assert stats.num_deletes == sum(b[1] for b in stats.block_stats)
        assert stats.num_merges == sum(b[2] for b in stats.block_stats)
        checked += 1
    assert checked


def test_spec_7_12_stats_are_104_bytes_with_the_documented_crc() -> None:
    stats = SstStats(1, 1, 1, 19, 5, ((1, 1, 1),))
    data = encode_sst_stats(stats)
    assert len(data) == 104
    assert zlib.crc32(data) == 0xAF062EAA
    assert decode_sst_stats(data) == stats
    assert stats.num_rows == 3


def test_block_stats_vector_is_omitted_when_there_are_no_blocks() -> None:
    data = encode_sst_stats(SstStats(num_puts=3))
    assert not Buffer(data).root().has(5)
    assert decode_sst_stats(data) == SstStats(num_puts=3)


@settings(max_examples=300)
@given(stats_values)
def test_direct_encoder_is_byte_identical_to_the_builder(stats: SstStats) -> None:
    data = encode_sst_stats(stats)
    assert data == encode_sst_stats_with_builder(stats)
    assert decode_sst_stats(data) == stats


@pytest.mark.parametrize("bad", [
    SstStats(num_puts=2**64),
    SstStats(raw_val_size=-1),
    SstStats(block_stats=((2**16, 0, 0),)),
    SstStats(block_stats=((1, 2),)),  # type: ignore[arg-type]
])
def test_encode_rejects_counts_that_do_not_fit(bad: SstStats) -> None:
    with pytest.raises(InvalidArgumentError):
        encode_sst_stats(bad)


def test_every_truncation_raises_corrupt() -> None:
    data = encode_sst_stats(SstStats(5, 1, 0, 40, 90, ((3, 1, 0), (2, 0, 0))))
    for n in range(len(data)):
        with pytest.raises(CorruptObjectError):
            decode_sst_stats(data[:n])


@given(st.data())
def test_flipped_byte_decodes_or_raises_data_error(data: st.DataObject) -> None:
    payload = bytearray(encode_sst_stats(SstStats(5, 1, 2, 40, 90, ((3, 1, 0), (2, 0, 2)))))
    pos = data.draw(st.integers(0, len(payload) - 1))
    payload[pos] ^= data.draw(st.integers(1, 255))
    try:
        decode_sst_stats(bytes(payload))
    except DataError:
        pass


@pytest.mark.slow
def test_65k_block_stats_encode_and_decode_fast() -> None:
    stats = SstStats(1, 2, 3, 4, 5, tuple((i % 100, i % 3, i % 2) for i in range(65536)))
    t0 = time.perf_counter()
    data = encode_sst_stats(stats)
    t1 = time.perf_counter()
    assert decode_sst_stats(data) == stats
    t2 = time.perf_counter()
    assert t1 - t0 < 0.6 and t2 - t1 < 0.4
