"""Test helper: rows encoded as stored v1/v2 blocks and checked into ``CheckedBlocks``
(``slatelib/csrc/pipe.h``), plus the reference decode of the same bytes."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from slatelib.core.ranges import BytesRange
from slatelib.core.row import Row
from slatelib.format.block import decode_block_v2_py, encode_row_v2
from slatelib.format.block_layout import common_prefix_len, with_offsets_trailer
from slatelib.format.block_v1 import decode_block_v1_py, encode_row_v1
from slatelib.format.native_pipe import CheckedBlocks, check_blocks

RESTART_INTERVAL = 16


def encode_block(rows: Sequence[Row], version: int) -> bytes:
    """One block payload holding ``rows`` (empty keys allowed: the writers refuse them, a
    damaged or foreign block may hold them)."""
    data = bytearray()
    offsets: list[int] = []
    prev = first = b""
    for i, row in enumerate(rows):
        key = row[0]
        if version == 2:
            restart = i % RESTART_INTERVAL == 0
            if restart:
                offsets.append(len(data))
            data += encode_row_v2(row, 0 if restart else common_prefix_len(prev, key))
        else:
            offsets.append(len(data))
            data += encode_row_v1(row, common_prefix_len(first, key) if i else 0)
            if i == 0:
                first = key
        prev = key
    return with_offsets_trailer(data, offsets)


def frame(payloads: Sequence[bytes], *, crc: bool = True) -> tuple[bytes, list[int]]:
    """Stored blocks (payload + big-endian CRC-32 when ``crc``) and their bounds."""
    out = bytearray()
    bounds = [0]
    for p in payloads:
        out += p
        if crc:
            out += (zlib.crc32(p) & 0xFFFFFFFF).to_bytes(4, "big")
        bounds.append(len(out))
    return bytes(out), bounds


def decode_py(payload: bytes, version: int) -> list[Row]:
    return decode_block_v2_py(payload) if version == 2 else decode_block_v1_py(payload)


def cut(rows: Sequence[Row], sizes: Sequence[int]) -> list[list[Row]]:
    """``rows`` cut into consecutive non-empty chunks of the given sizes (cycled)."""
    out: list[list[Row]] = []
    i = k = 0
    while i < len(rows):
        n = max(1, sizes[k % len(sizes)]) if sizes else len(rows)
        out.append(list(rows[i:i + n]))
        i += n
        k += 1
    return out


def checked_groups(rows: Sequence[Row], version: int, *, block_rows: Sequence[int] = (3,),
                   blocks_per_group: int = 2, rng: BytesRange | None = None,
                   ) -> tuple[list[CheckedBlocks], list[Row]]:
    """``rows`` (sorted) as groups of stored blocks checked into ``CheckedBlocks`` clipped to
    ``rng``, and the reference: the rows the Python decoders read back, inside ``rng``."""
    blocks = cut(rows, block_rows)
    groups: list[CheckedBlocks] = []
    want: list[Row] = []
    for g in range(0, len(blocks), max(1, blocks_per_group)):
        payloads = [encode_block(b, version) for b in blocks[g:g + max(1, blocks_per_group)]]
        data, bounds = frame(payloads)
        groups.append(check_blocks(data, bounds, version, rng))
        for p in payloads:
            want += [r for r in decode_py(p, version) if rng is None or rng.contains(r[0])]
    return groups, want
