"""Test helper: split official SST files into their info / index / stats payloads.

Kept local to the format tests on purpose (no dependency on the SST reader module): the SST
layout of format §7.1 is read directly and region payloads are decompressed with cramjam/zlib.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import cramjam

from slatelib.core.manifest import SsTableInfo
from slatelib.format.sst_info import decode_sst_info


@dataclass(frozen=True)
class SstRegions:
    path: Path
    info_fb: bytes
    info: SsTableInfo
    index: bytes
    stats: bytes | None


def _decompress(codec: int, payload: bytes) -> bytes:
    if codec == 0:
        return payload
    if codec == 1:
        return bytes(cramjam.snappy.decompress_raw(payload))
    if codec == 2:
        return zlib.decompress(payload)
    if codec == 3:
        size = int.from_bytes(payload[:4], "little")
        return bytes(cramjam.lz4.decompress_block(payload[4:], output_len=size))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(payload))
    raise AssertionError(f"unknown codec {codec}")


def _region(data: bytes, offset: int, length: int, codec: int) -> bytes:
    region = data[offset : offset + length]
    payload, crc = region[:-4], struct.unpack(">I", region[-4:])[0]
    assert zlib.crc32(payload) == crc, "region CRC mismatch"
    return _decompress(codec, payload)


def read_regions(path: Path) -> SstRegions:
    data = path.read_bytes()
    meta_offset, _version = struct.unpack(">QH", data[-10:])
    info_region = data[meta_offset:-10]
    info_fb = info_region[:-4]
    assert zlib.crc32(info_fb) == struct.unpack(">I", info_region[-4:])[0]
    info = decode_sst_info(info_fb, path=str(path))
    codec = int(info.compression)
    index = _region(data, info.index_offset, info.index_len, codec)
    stats = _region(data, info.stats_offset, info.stats_len, codec) if info.stats_len else None
    return SstRegions(path, info_fb, info, index, stats)


def official_sst_files(fixture: Path) -> list[Path]:
    """Every non-empty SST (compacted and WAL) of one fixture database folder."""
    files = sorted(fixture.glob("compacted/*.sst")) + sorted(fixture.glob("wal/*.sst"))
    return [f for f in files if f.stat().st_size > 10]
