"""SsTableInfo codec (format §7.3): golden SST footers, format §7.12, round trips, corruption."""

from __future__ import annotations

import dataclasses
import zlib
from pathlib import Path

import pytest
from hypothesis import given

from slatelib.core.manifest import CompressionCodec, FilterFormat, SsTableInfo, SstType
from slatelib.errors import CorruptObjectError, InvalidArgumentError
from slatelib.format.flatbuf import Buffer
from slatelib.format.manifest_codec import decode_manifest
from slatelib.format.sst_info import decode_sst_info, encode_sst_info
from slatelib.ids import ulid_to_str
from tests.conftest import FIXTURE_NAMES

from ._sst_regions import official_sst_files, read_regions
from ._strategies import infos

SPEC_7_12_INFO = SsTableInfo(
    first_entry=b"apple", last_entry=b"apricot", index_offset=116, index_len=52,
    filter_offset=91, filter_len=25, stats_offset=168, stats_len=108,
    filter_format=FilterFormat.COMPOSITE,
)


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_every_official_sst_info_reencodes_byte_identically(fixtures_dir: Path, fixture: str) -> None:
    for f in official_sst_files(fixtures_dir / fixture):
        regions = read_regions(f)
        assert encode_sst_info(regions.info) == regions.info_fb, f


def test_golden_set_holds_the_89_non_empty_ssts_of_spec_13(fixtures_dir: Path) -> None:
    assert sum(len(official_sst_files(fixtures_dir / f)) for f in FIXTURE_NAMES) == 89


def test_official_wal_and_compacted_infos_decode_to_the_observed_shapes(fixtures_dir: Path) -> None:
    wal = read_regions(fixtures_dir / "basic" / "wal" / "00000000000000000002.sst").info
    assert wal.sst_type == SstType.WAL and wal.last_entry is None and wal.stats_len == 0
    assert wal.first_entry is not None and len(wal.first_entry) == 8  # first seq, u64 BE
    codec = read_regions(next(iter(official_sst_files(fixtures_dir / "codec_zstd")))).info
    assert codec.compression == CompressionCodec.ZSTD


@pytest.mark.parametrize("fixture", ["basic", "codec_lz4", "ckpt_src", "segmented"])
def test_manifest_copy_of_info_equals_the_sst_footer(fixtures_dir: Path, fixture: str) -> None:
    root = fixtures_dir / fixture
    manifest = decode_manifest(sorted((root / "manifest").iterdir())[-1].read_bytes())
    assert manifest.ssts
    for h in manifest.ssts:
        assert read_regions(root / "compacted" / f"{ulid_to_str(h.id)}.sst").info == h.info


def test_spec_7_12_info_is_120_bytes_with_the_documented_crc() -> None:
    data = encode_sst_info(SPEC_7_12_INFO)
    assert len(data) == 120
    assert zlib.crc32(data) == 0x29C48F1E
    assert decode_sst_info(data) == SPEC_7_12_INFO


def test_default_scalars_are_omitted_from_the_table() -> None:
    info = SsTableInfo(None, None, 0, 0, 0, 0, filter_format=FilterFormat.LEGACY)
    t = Buffer(encode_sst_info(info)).root()
    assert not any(t.has(slot) for slot in range(11))
    assert decode_sst_info(encode_sst_info(info)) == info


@given(infos)
def test_info_round_trips(info: SsTableInfo) -> None:
    assert decode_sst_info(encode_sst_info(info)) == info


@pytest.mark.parametrize("slot", [5, 6, 10])
def test_unknown_enum_value_raises_corrupt(slot: int) -> None:
    info = SsTableInfo(b"a", b"b", 1, 2, 3, 4, CompressionCodec.SNAPPY, SstType.WAL, 5, 6,
                       FilterFormat.COMPOSITE)
    data = bytearray(encode_sst_info(info))
    pos = Buffer(bytes(data)).root().field_pos(slot, 1)
    data[pos] = 9
    with pytest.raises(CorruptObjectError, match="unknown") as exc:
        decode_sst_info(bytes(data), path="x.sst")
    assert exc.value.path == "x.sst"


def test_truncated_info_raises_corrupt_or_decodes_unchanged() -> None:
    data = encode_sst_info(SPEC_7_12_INFO)
    for n in range(len(data)):
        try:
            info = decode_sst_info(data[:n])
        except CorruptObjectError:
            continue
        # only trailing alignment padding can be cut without losing anything
        assert info == SPEC_7_12_INFO and data[n:] == bytes(len(data) - n)


@pytest.mark.parametrize("field", ["index_offset", "stats_len", "filter_len"])
def test_encode_rejects_values_outside_u64(field: str) -> None:
    with pytest.raises(InvalidArgumentError):
        encode_sst_info(dataclasses.replace(SPEC_7_12_INFO, **{field: 2**64}))
    with pytest.raises(InvalidArgumentError):
        encode_sst_info(dataclasses.replace(SPEC_7_12_INFO, **{field: -1}))
