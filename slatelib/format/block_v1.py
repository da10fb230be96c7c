"""v1 data blocks (format §7.5, §7.6), which 0.17.0 reads but never writes. Pure.

v1 block::

    rows (prefix-compressed against the block's first key) | offset[n] u16 BE | n u16 BE

    row = u16 prefix_len | u16 suffix_len | suffix | u64 seq | u8 flags | [i64 expire_ts]
          | [i64 create_ts] | [u32 value_len | value]   (value absent for tombstones)

The pure-Python code here is the reference (:func:`decode_block_v1_py`); the public
:func:`decode_block_v1` uses the C extension ``slatelib._speedups`` when it is built (see
:mod:`slatelib.format.native`). v2 blocks and the block writers are
:mod:`slatelib.format.block`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from slatelib.core.row import (
    FLAG_HAS_CREATE_TS,
    FLAG_HAS_EXPIRE_TS,
    FLAG_MERGE_OPERAND,
    FLAG_TOMBSTONE,
    KNOWN_FLAGS,
    MERGE,
    TOMBSTONE,
    VALUE,
    Row,
)
from slatelib.errors import CorruptObjectError, InvalidArgumentError
from slatelib.format.block_layout import (
    DEFAULT_BLOCK_SIZE,
    U16_MAX,
    common_prefix_len,
    row_flags,
    with_offsets_trailer,
)
from slatelib.format.native import native_block_decoder, speedups

_unpack_qb = struct.Struct(">QB").unpack_from
_unpack_q = struct.Struct(">q").unpack_from
_unpack_hh = struct.Struct(">HH").unpack_from
_unpack_i = struct.Struct(">I").unpack_from


def encode_row_v1(row: Row, prefix_len: int) -> bytes:
    key, seq, kind, value, expire_ts, create_ts = row
    suffix = key[prefix_len:]
    if prefix_len > U16_MAX or len(suffix) > U16_MAX:
        raise InvalidArgumentError("v1 blocks limit keys to 65535 bytes")
    parts = [struct.pack(">HH", prefix_len, len(suffix)), suffix,
             struct.pack(">QB", seq, row_flags(row))]
    if expire_ts is not None:
        parts.append(struct.pack(">q", expire_ts))
    if create_ts is not None:
        parts.append(struct.pack(">q", create_ts))
    if kind != TOMBSTONE:
        parts.append(struct.pack(">I", len(value)))
        parts.append(value)
    return b"".join(parts)


class BlockBuilderV1:
    """v1 block builder (for tests and compatibility tools; 0.17 never writes v1)."""

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        self.block_size = block_size
        self._data = bytearray()
        self._offsets: list[int] = []
        self._first_key = b""

    def is_empty(self) -> bool:
        return not self._offsets

    def size(self) -> int:
        return len(self._data) + 2 * len(self._offsets) + 2

    def add(self, row: Row) -> bool:
        key = row[0]
        if not key:
            raise InvalidArgumentError("keys must not be empty")
        prefix = common_prefix_len(self._first_key, key) if self._offsets else 0
        try:
            encoded = encode_row_v1(row, prefix)
        except struct.error as exc:  # seq or a timestamp out of range
            raise InvalidArgumentError(f"row not encodable: {exc}") from exc
        if self._offsets:
            size = len(self._data) + 2 * len(self._offsets) + 2
            if size + len(encoded) > self.block_size:
                return False
        else:
            self._first_key = key
        self._offsets.append(len(self._data))
        self._data += encoded
        return True

    def finish(self) -> bytes:
        return with_offsets_trailer(self._data, self._offsets)


def decode_block_v1_py(data: bytes | bytearray | memoryview) -> list[Row]:
    """Rows of a decompressed v1 block (reference implementation).

    Raises:
        CorruptObjectError: the block is malformed.
    """
    if not isinstance(data, bytes):  # a memoryview or bytearray: slices must be bytes
        data = bytes(data)
    try:
        n = len(data)
        count = int.from_bytes(data[n - 2 : n], "big")
        end = n - 2 - 2 * count
        if n < 2 or end < 0:
            raise ValueError("bad offset trailer")
        rows: list[Row] = []
        first_key = b""
        pos = 0
        for i in range(count):
            off = int.from_bytes(data[end + 2 * i : end + 2 * i + 2], "big")
            if off != pos:
                pos = off
            plen, slen = _unpack_hh(data, pos)
            pos += 4
            if plen > len(first_key) and i > 0:
                raise ValueError("prefix longer than the block's first key")
            key = first_key[:plen] + data[pos : pos + slen]
            pos += slen
            seq, flags = _unpack_qb(data, pos)
            pos += 9
            expire_ts = create_ts = None
            if flags & FLAG_HAS_EXPIRE_TS:
                expire_ts = _unpack_q(data, pos)[0]
                pos += 8
            if flags & FLAG_HAS_CREATE_TS:
                create_ts = _unpack_q(data, pos)[0]
                pos += 8
            if flags & ~KNOWN_FLAGS or (flags & FLAG_TOMBSTONE and flags & FLAG_MERGE_OPERAND):
                raise ValueError(f"invalid row flags {flags:#x}")
            if flags & FLAG_TOMBSTONE:
                rows.append((key, seq, TOMBSTONE, b"", None, create_ts))
            else:
                (vlen,) = _unpack_i(data, pos)
                value = data[pos + 4 : pos + 4 + vlen]
                if len(value) != vlen:
                    raise ValueError("value runs past the end of the block")
                pos += 4 + vlen
                kind = MERGE if flags & FLAG_MERGE_OPERAND else VALUE
                rows.append((key, seq, kind, value, expire_ts, create_ts))
            if pos > end:
                raise ValueError("row runs past the offset array")
            if i == 0:
                first_key = key
        return rows
    except (IndexError, ValueError, struct.error) as exc:
        raise CorruptObjectError(f"malformed v1 block: {exc}") from exc


decode_block_v1: Callable[[bytes], list[Row]] = (
    decode_block_v1_py if speedups is None else native_block_decoder(speedups.decode_block_v1, 1)
)
