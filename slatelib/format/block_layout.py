"""What the v1 and v2 block formats share (format §7.4-7.7): the default block size, the
row flags byte, and key prefix sharing. Pure.

The formats themselves are :mod:`slatelib.format.block` (v2, which 0.17.0 writes, and the
block writers) and :mod:`slatelib.format.block_v1` (v1, which 0.17.0 still reads).
"""

from __future__ import annotations

from slatelib.core.row import (
    FLAG_HAS_CREATE_TS,
    FLAG_HAS_EXPIRE_TS,
    FLAG_MERGE_OPERAND,
    FLAG_TOMBSTONE,
    MERGE,
    TOMBSTONE,
    VALUE,
    Row,
)
from slatelib.errors import InvalidArgumentError

DEFAULT_BLOCK_SIZE = 4096
U16_MAX = 0xFFFF


def row_flags(row: Row) -> int:
    """The flags byte of ``row`` (format §7.6): its kind and which timestamps it carries."""
    kind = row[2]
    if kind == TOMBSTONE:
        flags = FLAG_TOMBSTONE
    elif kind == MERGE:
        flags = FLAG_MERGE_OPERAND
    elif kind == VALUE:
        flags = 0
    else:
        raise InvalidArgumentError(f"invalid row kind {kind!r}")
    if row[4] is not None:
        flags |= FLAG_HAS_EXPIRE_TS
    if row[5] is not None:
        flags |= FLAG_HAS_CREATE_TS
    return flags


def common_prefix_len(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def with_offsets_trailer(data: bytearray, offsets: list[int]) -> bytes:
    """``data`` followed by the u16 BE offsets and their u16 BE count, as both block
    versions end (format §7.4).

    Raises:
        InvalidArgumentError: no offsets (an empty block).
    """
    if not offsets:
        raise InvalidArgumentError("cannot build an empty block")
    out = bytearray(data)
    for o in offsets:
        out += o.to_bytes(2, "big")
    out += len(offsets).to_bytes(2, "big")
    return bytes(out)
