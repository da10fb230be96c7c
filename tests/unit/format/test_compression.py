"""Every 0.17 codec round-trips, LZ4 carries its little-endian length, bad data is typed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelib.core.manifest import CompressionCodec
from slatelib.errors import CorruptObjectError, InvalidArgumentError
from slatelib.format.compression import compress, decompress, parse_codec


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=5000), st.sampled_from(list(CompressionCodec)))
def test_round_trip(data: bytes, codec: CompressionCodec) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_lz4_has_little_endian_length_prefix() -> None:
    out = compress(CompressionCodec.LZ4, b"a" * 300)
    assert out[:4] == (300).to_bytes(4, "little")


def test_zlib_is_an_rfc1950_stream() -> None:
    out = compress(CompressionCodec.ZLIB, b"hello" * 10)
    assert out[0] == 0x78


@pytest.mark.parametrize("codec", [c for c in CompressionCodec if c != CompressionCodec.NONE])
def test_garbage_raises_corrupt_object(codec: CompressionCodec) -> None:
    with pytest.raises(CorruptObjectError):
        decompress(codec, b"\xff\xfe\xfd\xfc\x00\x01garbage")


def test_parse_codec_names() -> None:
    assert parse_codec("Snappy") == CompressionCodec.SNAPPY
    assert parse_codec(None) == CompressionCodec.NONE
    with pytest.raises(InvalidArgumentError):
        parse_codec("brotli")
