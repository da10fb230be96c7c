"""CRC-32 (IEEE/zlib polynomial) as SlateDB stores it: 4 bytes big-endian (format §1).

Note: the format uses CRC-32, not CRC-32C, despite what the project brief assumed.
"""

from __future__ import annotations

import zlib


def crc32(data: bytes | bytearray | memoryview) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def crc32_bytes(data: bytes | bytearray | memoryview) -> bytes:
    return crc32(data).to_bytes(4, "big")
