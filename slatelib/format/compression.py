"""Block compression codecs of 0.17.0 (format §7.2). Pure functions over bytes.

| codec  | stored form                                                   |
|--------|---------------------------------------------------------------|
| snappy | raw snappy block (no framing)                                 |
| zlib   | zlib stream (RFC 1950), level 6                               |
| lz4    | u32 little-endian uncompressed length + raw LZ4 block         |
| zstd   | one zstd frame, level 3                                       |
"""

from __future__ import annotations

import zlib

import cramjam

from slatelib.core.manifest import CompressionCodec
from slatelib.errors import CorruptObjectError, InvalidArgumentError

CODEC_NAMES: dict[str, CompressionCodec] = {
    "none": CompressionCodec.NONE,
    "snappy": CompressionCodec.SNAPPY,
    "zlib": CompressionCodec.ZLIB,
    "lz4": CompressionCodec.LZ4,
    "zstd": CompressionCodec.ZSTD,
}


def parse_codec(name: str | None) -> CompressionCodec:
    """Parse a codec name as 0.17 settings spell it (``"Snappy"``, ``"zstd"``, null).

    Raises:
        InvalidArgumentError: unknown codec name.
    """
    if name is None:
        return CompressionCodec.NONE
    codec = CODEC_NAMES.get(name.strip().lower())
    if codec is None:
        raise InvalidArgumentError(
            f"unknown compression codec {name!r}; expected one of {sorted(CODEC_NAMES)}"
        )
    return codec


def compress(codec: CompressionCodec | int, data: bytes) -> bytes:
    """Compress one region (data block, filter, index or stats)."""
    if codec == CompressionCodec.NONE:
        return data
    if codec == CompressionCodec.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == CompressionCodec.ZLIB:
        return zlib.compress(data, 6)
    if codec == CompressionCodec.LZ4:
        return len(data).to_bytes(4, "little") + bytes(
            cramjam.lz4.compress_block(data, store_size=False)
        )
    if codec == CompressionCodec.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3))
    raise InvalidArgumentError(f"unknown compression codec {codec}")


def decompress(codec: CompressionCodec | int, data: bytes, *, what: str = "block") -> bytes:
    """Decompress one region.

    Raises:
        CorruptObjectError: the payload does not decompress with the codec.
    """
    if codec == CompressionCodec.NONE:
        return data
    try:
        if codec == CompressionCodec.SNAPPY:
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == CompressionCodec.ZLIB:
            return zlib.decompress(data)
        if codec == CompressionCodec.LZ4:
            if len(data) < 4:
                raise CorruptObjectError(f"{what}: lz4 payload shorter than its length prefix")
            size = int.from_bytes(data[:4], "little")
            out = bytes(cramjam.lz4.decompress_block(data[4:], output_len=size))
            if len(out) != size:
                raise CorruptObjectError(f"{what}: lz4 length {len(out)} != prefix {size}")
            return out
        if codec == CompressionCodec.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CorruptObjectError:
        raise
    except Exception as exc:  # codec libraries raise assorted types
        raise CorruptObjectError(f"{what}: cannot decompress ({codec!r}): {exc}") from exc
    raise CorruptObjectError(f"{what}: unknown compression codec {codec}")
