"""The folding CRC-32 (PCLMULQDQ, ``slatelib/csrc/common.c``) against ``zlib.crc32``: every
implementation ``pipe_crc32`` can pick, on random lengths and alignments."""

from __future__ import annotations

import random
import zlib

import pytest

from slatelib.format import native

sp = native.speedups
pytestmark = pytest.mark.skipif(sp is None or not hasattr(sp, "pipe_crc32"),
                                reason="the native extension is not built")


@pytest.mark.parametrize("impl", [0, 1, 2])
def test_every_implementation_is_zlibs_crc32(impl: int) -> None:
    rnd = random.Random(2028 + impl)
    blob = rnd.randbytes(1 << 16)
    lengths = [*range(0, 200), 255, 256, 257, 4095, 4096, 4097, 65536 - 64]
    lengths += [rnd.randrange(0, 60000) for _ in range(300)]
    for n in lengths:
        off = rnd.randrange(0, 64) if n <= len(blob) - 64 else 0
        data = blob[off:off + n]
        crc, source = sp.pipe_crc32(data, impl)  # type: ignore[union-attr]
        assert crc == zlib.crc32(data), (impl, n, off, source)


def test_memoryview_slices_and_special_patterns() -> None:
    for pattern in (b"\x00", b"\xff", b"\x80\x01", bytes(range(256))):
        data = pattern * (9000 // len(pattern))
        view = memoryview(data)[3:-5]
        for impl in (0, 2):
            assert sp.pipe_crc32(view, impl)[0] == zlib.crc32(view)  # type: ignore[union-attr]


def test_sources_are_named() -> None:
    long = bytes(100)
    assert sp.pipe_crc32(long, 1)[1] == "table"  # type: ignore[union-attr]
    assert sp.pipe_crc32(long)[1] in ("clmul", "zlib", "table")  # type: ignore[union-attr]
    assert sp.pipe_crc32(b"abc")[1] in ("zlib", "table")  # type: ignore[union-attr]
