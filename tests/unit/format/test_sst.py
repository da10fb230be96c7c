"""SST container: every official SST of the golden fixtures re-encodes byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelib.core.manifest import CompressionCodec, SstType
from slatelib.core.row import MERGE, TOMBSTONE, VALUE
from slatelib.errors import (
    ChecksumMismatchError,
    DataError,
    InvalidArgumentError,
    UnsupportedFormatVersionError,
)
from slatelib.format.block import WAL_BLOCK_SIZE
from slatelib.format.sst import (
    SstWriter,
    SstWriterOptions,
    block_range,
    decode_region,
    encode_sst,
    index_separator,
    parse_sst,
)
from tests.conftest import FIXTURE_NAMES, GOLDEN_DIR

# Block sizes the fixtures were written with (make_fixtures.py: 1 KiB unless default).
FOUR_KIB = {"default_settings", "seq_tracker"}
# Codecs whose compressor output we do not reproduce byte for byte (format §7.2); their SSTs
# are compared region by region after decompression instead.
NOT_BYTE_IDENTICAL = {CompressionCodec.ZLIB, CompressionCodec.LZ4}


def _sst_files() -> list[tuple[str, Path]]:
    out = []
    for name in FIXTURE_NAMES:
        for sub in ("compacted", "wal"):
            d = GOLDEN_DIR / name / sub
            if d.is_dir():
                out.extend((name, p) for p in sorted(d.iterdir()) if p.stat().st_size > 0)
    return out


SST_FILES = _sst_files()


def _options_for(name: str, parsed) -> SstWriterOptions:  # type: ignore[no-untyped-def]
    info = parsed.info
    if info.sst_type == SstType.WAL:
        return SstWriterOptions(block_size=WAL_BLOCK_SIZE, codec=info.compression,
                                sst_type=SstType.WAL)
    return SstWriterOptions(
        block_size=4096 if name in FOUR_KIB else 1024,
        codec=info.compression,
        min_filter_keys=1 if info.filter_len else 1 << 30,
        format_version=parsed.format_version,
    )


def test_fixtures_have_many_ssts() -> None:
    assert len(SST_FILES) >= 80


@pytest.mark.parametrize("name,path", SST_FILES, ids=[f"{n}/{p.parent.name}/{p.name}" for n, p in SST_FILES])
def test_official_sst_reencodes_identically(name: str, path: Path) -> None:
    data = path.read_bytes()
    parsed = parse_sst(data, path=str(path))
    rows = parsed.rows()
    assert rows, "fixture SSTs are never empty"
    if parsed.info.sst_type == SstType.COMPACTED:
        keys = [(r[0], -r[1]) for r in rows]
        assert keys == sorted(keys)
    encoded = encode_sst(rows, _options_for(name, parsed))
    if parsed.info.compression in NOT_BYTE_IDENTICAL:
        ours = parse_sst(encoded.to_bytes())
        assert ours.info.first_entry == parsed.info.first_entry
        assert ours.info.last_entry == parsed.info.last_entry
        assert (ours.info.filter_len > 0) == (parsed.info.filter_len > 0)
        assert ours.bloom_filter() == parsed.bloom_filter()
        assert ours.index.first_keys == parsed.index.first_keys
        assert ours.stats == parsed.stats
        assert ours.rows() == rows
    else:
        assert encoded.info == parsed.info
        assert encoded.to_bytes() == data


def test_wal_sst_metadata_matches_spec() -> None:
    path = next(p for n, p in SST_FILES if p.parent.name == "wal")
    parsed = parse_sst(path.read_bytes())
    info = parsed.info
    assert info.sst_type == SstType.WAL
    assert info.last_entry is None and info.filter_len == 0 and info.stats_len == 0
    assert info.filter_offset == info.index_offset
    first_seq = parsed.rows()[0][1]
    assert info.first_entry == first_seq.to_bytes(8, "big")


def _rows(n: int) -> list:  # type: ignore[type-arg]
    return [(b"k%05d" % i, 10, VALUE, b"v" * 50, None, 1700000000000) for i in range(n)]


def test_filter_written_only_from_min_filter_keys() -> None:
    small = encode_sst(_rows(999), SstWriterOptions())
    big = encode_sst(_rows(1000), SstWriterOptions())
    assert small.info.filter_len == 0
    assert small.info.filter_offset == small.info.index_offset
    assert big.info.filter_len > 0
    assert parse_sst(big.to_bytes()).bloom_filter().might_contain(b"k00042")  # type: ignore[union-attr]


def test_index_separators_are_shortest_greater_prefixes() -> None:
    assert index_separator(b"abc", b"abd") == b"abd"
    assert index_separator(b"abc", b"abzzz") == b"abz"
    assert index_separator(b"ab", b"abc") == b"abc"
    assert index_separator(b"ab", b"abcd") == b"abc"
    assert index_separator(b"same", b"same") == b"same"


def test_same_key_spanning_blocks_keeps_full_key_separator() -> None:
    rows = [(b"dup", s, VALUE, b"x" * 100, None, None) for s in range(30, 0, -1)]
    parsed = parse_sst(encode_sst(rows, SstWriterOptions(block_size=512)).to_bytes())
    assert len(parsed.index.offsets) > 1
    assert set(parsed.index.first_keys[1:]) == {b"dup"}
    assert parsed.rows() == rows


def test_rows_out_of_order_are_rejected() -> None:
    w = SstWriter()
    w.add((b"b", 5, VALUE, b"", None, None))
    with pytest.raises(InvalidArgumentError):
        w.add((b"a", 5, VALUE, b"", None, None))
    with pytest.raises(InvalidArgumentError):
        w.add((b"b", 6, VALUE, b"", None, None))


def test_flipped_block_byte_names_object_and_block() -> None:
    rows = _rows(300)
    data = bytearray(encode_sst(rows, SstWriterOptions(block_size=1024)).to_bytes())
    parsed = parse_sst(bytes(data))
    s, _ = block_range(parsed.index, parsed.info, 3)
    data[s + 5] ^= 0x40
    bad = parse_sst(bytes(data), path="db/compacted/X.sst")
    with pytest.raises(ChecksumMismatchError) as err:
        bad.block_rows(3)
    assert err.value.block == 3
    assert "db/compacted/X.sst" in str(err.value) and "block 3" in str(err.value)


def test_truncated_sst_is_a_typed_error() -> None:
    data = encode_sst(_rows(50)).to_bytes()
    for cut in range(len(data)):
        with pytest.raises(DataError):
            parse_sst(data[:cut], path="p").rows()


def test_unknown_footer_version_is_unsupported() -> None:
    data = bytearray(encode_sst(_rows(5)).to_bytes())
    data[-1] = 9
    with pytest.raises(UnsupportedFormatVersionError):
        parse_sst(bytes(data))


@pytest.mark.parametrize("codec", list(CompressionCodec))
@pytest.mark.parametrize("version", [1, 2])
def test_every_codec_and_block_version_round_trips(codec: CompressionCodec, version: int) -> None:
    rows = [(b"key:%04d" % i, 100 - i % 3, (VALUE, TOMBSTONE, MERGE)[i % 3],
             b"" if i % 3 == 1 else b"val" * (i % 40), 1800000000000 if i % 7 == 0 else None,
             1700000000000 + i) for i in range(2000)]
    enc = encode_sst(rows, SstWriterOptions(codec=codec, format_version=version))
    parsed = parse_sst(enc.to_bytes())
    expected = rows if version == 2 else [
        (k, s, kd, v, None if kd == TOMBSTONE else e, c) for k, s, kd, v, e, c in rows
    ]
    assert parsed.rows() == expected
    assert parsed.stats is not None and parsed.stats.num_rows == 2000
    assert parsed.format_version == version
    idx_region = enc.to_bytes()[enc.info.index_offset: enc.info.index_offset + enc.info.index_len]
    assert decode_region(idx_region, codec, path=None, what="index")
