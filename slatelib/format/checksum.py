"""CRC-32 (IEEE/zlib polynomial) as SlateDB stores it: 4 bytes big-endian (format §1).

Note: the format uses CRC-32, not CRC-32C, despite what the project brief assumed.

Inputs of :data:`NATIVE_MIN_BYTES` or more (filters, indexes: whole regions) go to the C
extension's CRC-32 when it is built (``pipe_crc32``: folded with PCLMULQDQ where the CPU has
it, see ``slatelib/csrc/common.c``); everything else, and the reference, is ``zlib.crc32``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

NATIVE_MIN_BYTES = 4096
"""Shorter inputs stay with zlib: the native call's tuple costs more than it saves."""

_native: Callable[[Any], tuple[int, str]] | None | bool = False  # False: not looked up yet


def _native_crc() -> Callable[[Any], tuple[int, str]] | None:
    global _native
    if _native is False:
        from slatelib.format import native

        _native = getattr(native.speedups, "pipe_crc32", None)
    return _native  # type: ignore[return-value]


def crc32(data: bytes | bytearray | memoryview) -> int:
    if len(data) >= NATIVE_MIN_BYTES:
        fast = _native_crc()
        if fast is not None:
            return fast(data)[0]
    return zlib.crc32(data) & 0xFFFFFFFF


def crc32_bytes(data: bytes | bytearray | memoryview) -> bytes:
    return crc32(data).to_bytes(4, "big")
