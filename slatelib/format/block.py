"""Data blocks: v2 (written by 0.17.0), the block writers, and decoding either version
(format §7.4-7.7). Pure.

v2 block::

    rows (prefix-compressed against the previous row) | restart[r] u16 BE | r u16 BE

    row = varint shared | varint unshared | varint value_len | key suffix | value
          | u64 seq | u8 flags | [i64 expire_ts] | [i64 create_ts]

v1 blocks (read by 0.17.0, never written) are :mod:`slatelib.format.block_v1`; what both
share is :mod:`slatelib.format.block_layout`.

The pure-Python code here is the reference (``*_py`` names, :class:`BlockWriterPy`); the
public names use the C extension ``slatelib._speedups`` when it is built (see
:mod:`slatelib.format.native`), which must agree with the reference byte for byte.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterable

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
from slatelib.format import bloom
from slatelib.format.block_layout import DEFAULT_BLOCK_SIZE as DEFAULT_BLOCK_SIZE  # re-export
from slatelib.format.block_layout import U16_MAX, with_offsets_trailer
from slatelib.format.block_layout import common_prefix_len as common_prefix_len  # re-export
from slatelib.format.block_layout import row_flags as row_flags  # re-export (moved)
from slatelib.format.block_v1 import BlockBuilderV1 as BlockBuilderV1  # re-export (moved)
from slatelib.format.block_v1 import decode_block_v1 as decode_block_v1  # re-export (moved)
from slatelib.format.block_v1 import decode_block_v1_py as decode_block_v1_py  # re-export
from slatelib.format.block_v1 import encode_row_v1 as encode_row_v1  # re-export (moved)
from slatelib.format.native import BlockWriter, FinishedBlock, native_block_decoder, speedups

RESTART_INTERVAL = 16
WAL_BLOCK_SIZE = 65535
MAX_PREFIX_EXTRACTORS = 8
"""Fixed-length prefix extractors one block writer hashes (as ``_speedups.BlockWriterV2``)."""

_unpack_qb = struct.Struct(">QB").unpack_from
_unpack_q = struct.Struct(">q").unpack_from


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_row_v2(row: Row, shared: int) -> bytes:
    key, seq, kind, value, expire_ts, create_ts = row
    if kind == TOMBSTONE:
        value = b""
    suffix = key[shared:]
    parts = [_varint(shared), _varint(len(suffix)), _varint(len(value)), suffix, value,
             struct.pack(">QB", seq, row_flags(row))]
    if expire_ts is not None:
        parts.append(struct.pack(">q", expire_ts))
    if create_ts is not None:
        parts.append(struct.pack(">q", create_ts))
    return b"".join(parts)


class BlockBuilderV2:
    """Accumulates rows into one v2 block; :meth:`add` returns False when a row does not fit.

    Fit rule (format §7.7): ``size + row_len + (2 if restart) <= block_size`` where ``size`` is
    data length + restart array + count; an empty block always takes the row.
    """

    __slots__ = ("block_size", "_data", "_restarts", "_count", "_last_key")

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        self.block_size = block_size
        self._data = bytearray()
        self._restarts: list[int] = []
        self._count = 0
        self._last_key = b""

    def is_empty(self) -> bool:
        return self._count == 0

    def __len__(self) -> int:
        return self._count

    def size(self) -> int:
        """Encoded size so far (rows + restart array + count), before compression."""
        return len(self._data) + 2 * len(self._restarts) + 2

    def add(self, row: Row) -> bool:
        key = row[0]
        if not key:
            raise InvalidArgumentError("keys must not be empty")
        restart = self._count % RESTART_INTERVAL == 0
        shared = 0 if restart else common_prefix_len(self._last_key, key)
        try:
            encoded = encode_row_v2(row, shared)
        except struct.error as exc:  # seq or a timestamp out of range
            raise InvalidArgumentError(f"row not encodable: {exc}") from exc
        if self._count:
            size = len(self._data) + 2 * len(self._restarts) + 2
            if size + len(encoded) + (2 if restart else 0) > self.block_size:
                return False
        if restart:
            if len(self._data) > U16_MAX:
                raise InvalidArgumentError("block data exceeds the u16 restart offset range")
            self._restarts.append(len(self._data))
        self._data += encoded
        self._last_key = key
        self._count += 1
        return True

    def finish(self) -> bytes:
        if not self._count:
            raise InvalidArgumentError("cannot build an empty block")
        return with_offsets_trailer(self._data, self._restarts)


def encode_block_v2(rows: Iterable[Row]) -> bytes:
    """All rows in one v2 block regardless of size (tests and tools)."""
    b = BlockBuilderV2(block_size=1 << 62)
    for row in rows:
        b.add(row)
    return b.finish()


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise ValueError("varint too long")


def decode_block_v2_py(data: bytes | bytearray | memoryview) -> list[Row]:
    """Rows of a decompressed v2 block (reference implementation).

    Raises:
        CorruptObjectError: the block is malformed (path and block are added by callers).
    """
    if not isinstance(data, bytes):  # a memoryview or bytearray: slices must be bytes
        data = bytes(data)
    try:
        n = len(data)
        num_restarts = int.from_bytes(data[n - 2 : n], "big")
        end = n - 2 - 2 * num_restarts
        if n < 2 or end < 0 or (num_restarts == 0 and end > 0):
            raise ValueError("bad restart trailer")
        rows: list[Row] = []
        append = rows.append
        pos = 0
        prev = b""
        while pos < end:
            shared = data[pos]
            if shared < 0x80:
                pos += 1
            else:
                shared, pos = _read_varint(data, pos)
            unshared = data[pos]
            if unshared < 0x80:
                pos += 1
            else:
                unshared, pos = _read_varint(data, pos)
            vlen = data[pos]
            if vlen < 0x80:
                pos += 1
            else:
                vlen, pos = _read_varint(data, pos)
            if shared > len(prev):
                raise ValueError("shared prefix longer than previous key")
            kend = pos + unshared
            key = prev[:shared] + data[pos:kend] if shared else data[pos:kend]
            vend = kend + vlen
            value = data[kend:vend]
            seq, flags = _unpack_qb(data, vend)
            pos = vend + 9
            expire_ts = create_ts = None
            if flags & FLAG_HAS_EXPIRE_TS:
                expire_ts = _unpack_q(data, pos)[0]
                pos += 8
            if flags & FLAG_HAS_CREATE_TS:
                create_ts = _unpack_q(data, pos)[0]
                pos += 8
            if flags & ~KNOWN_FLAGS:
                raise ValueError(f"invalid row flags {flags:#x}")
            if flags & FLAG_TOMBSTONE:
                if flags & FLAG_MERGE_OPERAND:
                    raise ValueError(f"invalid row flags {flags:#x}")
                kind = TOMBSTONE
            elif flags & FLAG_MERGE_OPERAND:
                kind = MERGE
            else:
                kind = VALUE
            if pos > end or len(key) != shared + unshared or len(value) != vlen:
                raise ValueError("row runs past the end of the block")
            if kind == TOMBSTONE:
                value = b""  # a tombstone's stored value bytes (never written) are ignored
            append((key, seq, kind, value, expire_ts, create_ts))
            prev = key
        if pos != end:
            raise ValueError("rows do not end at the restart array")
        return rows
    except (IndexError, ValueError, struct.error) as exc:
        raise CorruptObjectError(f"malformed v2 block: {exc}") from exc


decode_block_v2: Callable[[bytes], list[Row]] = (
    decode_block_v2_py if speedups is None else native_block_decoder(speedups.decode_block_v2, 2)
)


def decode_block(data: bytes, format_version: int) -> list[Row]:
    """Rows of a decompressed block of an SST with the given format version."""
    if format_version == 2:
        return decode_block_v2(data)
    if format_version == 1:
        return decode_block_v1(data)
    raise CorruptObjectError(f"unknown SST format version {format_version}")


# ------------------------------------------------------------------------ block writers


def index_separator(prev_last: bytes, first: bytes) -> bytes:
    """Shortest prefix of ``first`` greater than ``prev_last`` (format §7.8)."""
    if prev_last == first:
        return first
    n = min(len(prev_last), len(first))
    for j in range(n):
        if prev_last[j] != first[j]:
            return first[: j + 1]
    return first[: len(prev_last) + 1]


class BlockWriterPy:
    """Reference for ``_speedups.BlockWriterV2`` (and the v1 writer: ``version=1``).

    Cuts rows into blocks with 0.17.0's fit rule and keeps an SST's bookkeeping: ordering
    checks (``compacted``: key ascending, seq descending), per-block and total stats,
    first/last key and seq, each block's index key (format §7.8: key separators when
    ``compacted``, else the block's first seq as 8 bytes BE) and, with ``want_hashes``, the
    SipHash-1-3 of every row's key; for each length N of ``prefix_lens`` (fixed-length
    prefix extractors), the SipHash-1-3 of the first N bytes of every key at least N long,
    skipping a prefix equal to the one hashed just before (format §7.9). Finished blocks
    wait in :meth:`take_blocks` as ``(raw_block, index_key, puts, deletes, merges)``.
    """

    def __init__(self, block_size: int, *, compacted: bool = True, want_hashes: bool = False,
                 prefix_lens: tuple[int, ...] = (), version: int = 2) -> None:
        if block_size < 0:
            raise InvalidArgumentError("block_size must not be negative")
        if len(prefix_lens) > MAX_PREFIX_EXTRACTORS or any(n < 1 for n in prefix_lens):
            raise InvalidArgumentError(
                f"at most {MAX_PREFIX_EXTRACTORS} positive prefix lengths, got {prefix_lens}")
        self.block_size = block_size
        self.compacted = compacted
        self._builder_cls: type[BlockBuilderV2] | type[BlockBuilderV1] = (
            BlockBuilderV2 if version == 2 else BlockBuilderV1
        )
        self._block: BlockBuilderV2 | BlockBuilderV1 = self._builder_cls(block_size)
        self._want_hashes = want_hashes
        self._hashes = array("Q")
        self._prefix_lens = tuple(prefix_lens)
        self._prefix_hashes = [array("Q") for _ in prefix_lens]
        self._last_prefix: list[bytes | None] = [None for _ in prefix_lens]
        self._blocks: list[FinishedBlock] = []
        self._index_key = b""
        self._prev_block_last: bytes | None = None
        self._cur = [0, 0, 0]
        self.open_rows = 0
        self.num_rows = self.num_puts = self.num_deletes = self.num_merges = 0
        self.raw_key_size = self.raw_val_size = 0
        self.first_key: bytes | None = None
        self.first_seq: int | None = None
        self.last_key: bytes | None = None
        self.last_seq: int | None = None

    @property
    def open_size(self) -> int:
        return 0 if self._block.is_empty() else self._block.size()

    def add(self, row: Row) -> bool:
        key, seq, kind = row[0], row[1], row[2]
        lk = self.last_key
        if self.compacted and lk is not None:
            assert self.last_seq is not None
            if key < lk or (key == lk and seq >= self.last_seq):
                raise InvalidArgumentError(
                    f"rows out of order: {key!r}@{seq} after {lk!r}@{self.last_seq}"
                )
        if not self._block.add(row):
            self._close_block()
            self._block.add(row)
        if self.open_rows == 0:
            if not self.compacted:
                self._index_key = seq.to_bytes(8, "big")
            elif self._prev_block_last is None:
                self._index_key = b""
            else:
                self._index_key = index_separator(self._prev_block_last, key)
        self.open_rows += 1
        if self.first_key is None:
            self.first_key, self.first_seq = key, seq
        self.last_key, self.last_seq = key, seq
        self.num_rows += 1
        self.raw_key_size += len(key)
        if kind == TOMBSTONE:
            self.num_deletes += 1
            self._cur[1] += 1
        else:
            self.raw_val_size += len(row[3])
            if kind == MERGE:
                self.num_merges += 1
                self._cur[2] += 1
            else:
                self.num_puts += 1
                self._cur[0] += 1
        if self._want_hashes:
            self._hashes.append(bloom.siphash13_py(key))
        for i, n in enumerate(self._prefix_lens):
            if len(key) >= n and key[:n] != self._last_prefix[i]:
                self._prefix_hashes[i].append(bloom.siphash13_py(key[:n]))
                self._last_prefix[i] = key[:n]
        return bool(self._blocks)

    def add_rows(self, rows: list[Row] | tuple[Row, ...], start: int = 0,
                 end: int | None = None) -> int:
        if start < 0 or (end is not None and end < 0):
            raise InvalidArgumentError("start and end must not be negative")
        for row in rows[start:end]:
            self.add(row)
        return len(self._blocks)

    def _close_block(self) -> None:
        cur = self._cur
        self._blocks.append((self._block.finish(), self._index_key, cur[0], cur[1], cur[2]))
        self._cur = [0, 0, 0]
        self._prev_block_last = self.last_key
        self._block = self._builder_cls(self.block_size)
        self.open_rows = 0

    def finish_block(self) -> bool:
        if self.open_rows:
            self._close_block()
        return bool(self._blocks)

    def take_blocks(self) -> list[FinishedBlock]:
        out, self._blocks = self._blocks, []
        return out

    def hashes(self) -> bytes:
        return self._hashes.tobytes()

    def prefix_hashes(self, i: int) -> bytes:
        return self._prefix_hashes[i].tobytes()

    def bloom(self, bits_per_key: int) -> bytes:
        return bloom.build_bloom_from_hashes_py(self._hashes, bits_per_key)


def new_block_writer(block_size: int, *, version: int = 2, compacted: bool = True,
                     want_hashes: bool = False, prefix_lens: tuple[int, ...] = ()) -> BlockWriter:
    """The native v2 block writer when the extension is built, else :class:`BlockWriterPy`.

    The native writer raises ``ValueError`` for a rejected row, the Python one
    ``InvalidArgumentError`` (a ``ValueError``); :class:`~slatelib.format.sst.SstWriter`
    reports both as ``InvalidArgumentError``.
    """
    if version == 2 and speedups is not None:
        return speedups.BlockWriterV2(block_size, compacted=compacted, want_hashes=want_hashes,
                                      prefix_lens=prefix_lens)
    return BlockWriterPy(block_size, compacted=compacted, want_hashes=want_hashes,
                         prefix_lens=prefix_lens, version=version)
