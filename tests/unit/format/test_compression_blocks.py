"""The one-call block codec functions (``block_compressor`` / ``block_decompressor``, used by
the native framing and ``check_stored_blocks``) against the reference ``compress`` /
``decompress``: the same stored bytes, the same payloads, damage refused."""

from __future__ import annotations

import random

import pytest

from slatelib.core.manifest import CompressionCodec
from slatelib.format.compression import (
    block_compressor,
    block_decompressor,
    compress,
    decompress,
)

CODECS = [CompressionCodec.SNAPPY, CompressionCodec.ZLIB, CompressionCodec.LZ4,
          CompressionCodec.ZSTD]


def _blocks(seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    out = [b"", b"x", bytes(4096)]
    for _ in range(40):
        half = rnd.randbytes(rnd.randrange(1, 200))
        out.append((half * (1 + rnd.randrange(0, 40)))[: rnd.randrange(1, 8000)])
        out.append(rnd.randbytes(rnd.randrange(0, 5000)))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_block_functions_match_the_reference(codec: CompressionCodec) -> None:
    pack, unpack = block_compressor(codec), block_decompressor(codec)
    assert pack is not None and unpack is not None
    for raw in _blocks(int(codec)):
        stored = compress(codec, raw)
        assert bytes(pack(raw)) == stored
        assert bytes(unpack(memoryview(stored))) == raw == decompress(codec, stored)
        framed = memoryview(b"??" + stored + b"!!")[2:-2]  # a view inside a larger buffer
        assert bytes(unpack(framed)) == raw


def test_no_compression_has_no_function() -> None:
    assert block_compressor(CompressionCodec.NONE) is None
    assert block_decompressor(CompressionCodec.NONE) is None


@pytest.mark.parametrize("codec", CODECS)
def test_damaged_payloads_raise(codec: CompressionCodec) -> None:
    unpack = block_decompressor(codec)
    assert unpack is not None
    stored = compress(codec, bytes(range(256)) * 8)
    bad = [b"", stored[: len(stored) // 2], b"\xff" * 16]
    if codec == CompressionCodec.LZ4:  # a wrong length prefix
        bad.append((len(bytes(range(256)) * 8) + 1).to_bytes(4, "little") + stored[4:])
    for payload in bad:
        try:
            got = bytes(unpack(payload))
        except Exception:
            continue
        # a codec that accepts a truncated frame must at least not return the block
        assert got != bytes(range(256)) * 8, (codec, payload[:8])
