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
from collections.abc import Callable
from typing import Any

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


BlockFn = Callable[[Any], Any]
"""A data block's one-call codec function: bytes-like in, bytes-like out (``bytes`` or a
``cramjam.Buffer``, which the native framing and ``check_blocks`` read in place)."""


def _lz4_block(data: Any) -> Any:
    if len(data) < 4:
        raise CorruptObjectError("lz4 payload shorter than its length prefix")
    size = int.from_bytes(data[:4], "little")
    out = cramjam.lz4.decompress_block(data)  # reads the same u32 little-endian prefix
    if len(out) != size:
        raise CorruptObjectError(f"lz4 length {len(out)} != prefix {size}")
    return out


def _zlib_block(data: Any) -> bytes:
    return zlib.compress(data, 6)


def _zstd_block(data: Any) -> Any:
    return cramjam.zstd.compress(data, level=3)


_BLOCK_COMPRESS: dict[int, BlockFn] = {
    CompressionCodec.SNAPPY: cramjam.snappy.compress_raw,
    CompressionCodec.ZLIB: _zlib_block,
    CompressionCodec.LZ4: cramjam.lz4.compress_block,  # stores the u32 LE length first
    CompressionCodec.ZSTD: _zstd_block,
}
_BLOCK_DECOMPRESS: dict[int, BlockFn] = {
    CompressionCodec.SNAPPY: cramjam.snappy.decompress_raw,
    CompressionCodec.ZLIB: zlib.decompress,
    CompressionCodec.LZ4: _lz4_block,
    CompressionCodec.ZSTD: cramjam.zstd.decompress,
}


def block_compressor(codec: CompressionCodec | int) -> BlockFn | None:
    """:func:`compress` of ``codec`` as one library call per block, without the copies into
    ``bytes`` (None for no compression). Same stored bytes as :func:`compress`.

    Raises:
        InvalidArgumentError: an unknown codec.
    """
    if codec == CompressionCodec.NONE:
        return None
    fn = _BLOCK_COMPRESS.get(int(codec))
    if fn is None:
        raise InvalidArgumentError(f"unknown compression codec {codec}")
    return fn


def block_decompressor(codec: CompressionCodec | int) -> BlockFn | None:
    """:func:`decompress` of ``codec`` as one library call per block, reading a memoryview
    in place and returning a bytes-like object (None for no compression). Errors are the
    library's own (callers map them, as :func:`decompress` does).

    Raises:
        InvalidArgumentError: an unknown codec.
    """
    if codec == CompressionCodec.NONE:
        return None
    fn = _BLOCK_DECOMPRESS.get(int(codec))
    if fn is None:
        raise InvalidArgumentError(f"unknown compression codec {codec}")
    return fn
