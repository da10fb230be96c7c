"""A small, bounds-checked FlatBuffers reader, plus builder helpers (format §1, §4, §5.7).

We do not use flatc-generated code. Reading goes through :class:`Buffer` and :class:`Table`,
which check every offset against the buffer and raise :class:`CorruptObjectError` (naming
the object path when one is given) instead of ``IndexError``/``struct.error``. Fields are
addressed by *slot* (declaration index), with the default applied when the vtable entry is 0.

Writing uses the official ``flatbuffers`` Python ``Builder`` (``Builder(1024)``, ``Finish``
without identifier, objects created in the canonical order of format §5.7), so that our bytes
equal 0.17.0's; the small helpers below wrap it. Tables shared by several schemas live in
:mod:`slatelib.format.shared_tables`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

import flatbuffers

from slatelib.errors import CorruptObjectError, InvalidArgumentError

U8 = struct.Struct("<B")
I8 = struct.Struct("<b")
U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
I32 = struct.Struct("<i")
U64 = struct.Struct("<Q")
I64 = struct.Struct("<q")
_VT_HEADER = struct.Struct("<HH")

U64_MAX = (1 << 64) - 1
U32_MAX = (1 << 32) - 1
U16_MAX = (1 << 16) - 1


@contextmanager
def corrupt_on_error(what: str, path: str | None) -> Iterator[None]:
    """Turn any low-level decoding error escaping the block into :class:`CorruptObjectError`.

    The reader checks bounds itself; this is the safety net that guarantees callers only
    ever see slatelib errors.

    Raises:
        CorruptObjectError: when the block raises IndexError, ValueError, struct.error,
            OverflowError or KeyError (other slatelib errors pass through unchanged).
    """
    try:
        yield
    except CorruptObjectError:
        raise
    except (IndexError, ValueError, struct.error, OverflowError, KeyError) as exc:
        raise CorruptObjectError(f"malformed {what}: {exc}", path=path) from exc


class Buffer:
    """A FlatBuffer held in memory. ``start`` is where the buffer begins inside ``data``.

    Positions handed around are absolute indexes into ``data``; the buffer occupies
    ``data[start:]`` (e.g. ``start=2`` skips the manifest's version prefix without a copy).
    """

    __slots__ = ("data", "start", "end", "path")

    def __init__(self, data: bytes | bytearray | memoryview, *, start: int = 0,
                 path: str | None = None) -> None:
        self.data: bytes = data if isinstance(data, bytes) else bytes(data)
        self.start = start
        self.end = len(self.data)
        self.path = path

    def fail(self, message: str) -> NoReturn:
        """Raise :class:`CorruptObjectError` for this buffer.

        Raises:
            CorruptObjectError: always.
        """
        raise CorruptObjectError(f"malformed flatbuffer: {message}", path=self.path)

    def check(self, pos: int, size: int, what: str) -> None:
        """Ensure ``[pos, pos + size)`` lies inside the buffer.

        Raises:
            CorruptObjectError: the range is out of bounds.
        """
        if pos < self.start or size < 0 or pos + size > self.end:
            self.fail(f"{what} out of bounds (at {pos - self.start}, {size} bytes)")

    def root(self) -> Table:
        """The root table (the first u32 is its offset).

        Raises:
            CorruptObjectError: the buffer is too short or the root table is malformed.
        """
        self.check(self.start, 4, "root offset")
        return self.table_at(self.start + U32.unpack_from(self.data, self.start)[0])

    def table_at(self, pos: int) -> Table:
        """The table whose soffset is at ``pos``, with its vtable checked.

        Raises:
            CorruptObjectError: the table or its vtable is out of bounds or malformed.
        """
        data = self.data
        self.check(pos, 4, "table")
        vt = pos - I32.unpack_from(data, pos)[0]
        self.check(vt, 4, "vtable")
        vt_len, obj_len = _VT_HEADER.unpack_from(data, vt)
        if vt_len < 4 or vt_len & 1:
            self.fail(f"bad vtable length {vt_len}")
        self.check(vt, vt_len, "vtable")
        if obj_len < 4:
            self.fail(f"bad table size {obj_len}")
        self.check(pos, obj_len, "table")
        return Table(self, pos, vt, vt_len, obj_len)


class Table:
    """One table of a :class:`Buffer`: typed field accessors by slot."""

    __slots__ = ("buf", "pos", "_vt", "_vt_len", "_obj_len")

    def __init__(self, buf: Buffer, pos: int, vt: int, vt_len: int, obj_len: int) -> None:
        self.buf = buf
        self.pos = pos
        self._vt = vt
        self._vt_len = vt_len
        self._obj_len = obj_len

    @property
    def size(self) -> int:
        """The table's inline size in bytes (from its vtable), soffset included."""
        return self._obj_len

    # ------------------------------------------------------------------ fields
    def field_pos(self, slot: int, size: int) -> int:
        """Absolute position of the field in ``slot`` (0 when absent).

        Raises:
            CorruptObjectError: the field lies outside its table.
        """
        entry = 4 + 2 * slot
        if entry >= self._vt_len:
            return 0
        rel: int = U16.unpack_from(self.buf.data, self._vt + entry)[0]
        if rel == 0:
            return 0
        if rel < 4 or rel + size > self._obj_len:
            self.buf.fail(f"field in slot {slot} outside its table")
        return self.pos + rel

    def has(self, slot: int) -> bool:
        """Whether the vtable has an entry for ``slot``."""
        entry = 4 + 2 * slot
        return entry < self._vt_len and U16.unpack_from(self.buf.data, self._vt + entry)[0] != 0

    def _scalar(self, slot: int, st: struct.Struct, default: int) -> int:
        p = self.field_pos(slot, st.size)
        if not p:
            return default
        value: int = st.unpack_from(self.buf.data, p)[0]
        return value

    def u8(self, slot: int, default: int = 0) -> int:
        """Read a ``ubyte``/``uint8`` field (also union type tags)."""
        return self._scalar(slot, U8, default)

    def i8(self, slot: int, default: int = 0) -> int:
        """Read a ``byte``/``int8`` field (enums of type ``byte``)."""
        return self._scalar(slot, I8, default)

    def u16(self, slot: int, default: int = 0) -> int:
        """Read a ``ushort`` field."""
        return self._scalar(slot, U16, default)

    def u32(self, slot: int, default: int = 0) -> int:
        """Read a ``uint`` field."""
        return self._scalar(slot, U32, default)

    def u64(self, slot: int, default: int = 0) -> int:
        """Read a ``ulong`` field."""
        return self._scalar(slot, U64, default)

    def i64(self, slot: int, default: int = 0) -> int:
        """Read a ``long`` field."""
        return self._scalar(slot, I64, default)

    def boolean(self, slot: int, default: bool = False) -> bool:
        """Read a ``bool`` field (any non-zero byte is true)."""
        p = self.field_pos(slot, 1)
        return default if not p else self.buf.data[p] != 0

    def opt_u16(self, slot: int) -> int | None:
        """Read an optional ``ushort`` (``= null`` in the schema): None when absent."""
        p = self.field_pos(slot, 2)
        return None if not p else int(U16.unpack_from(self.buf.data, p)[0])

    def opt_u64(self, slot: int) -> int | None:
        """Read an optional ``ulong``: None when absent."""
        p = self.field_pos(slot, 8)
        return None if not p else int(U64.unpack_from(self.buf.data, p)[0])

    # ----------------------------------------------------------------- offsets
    def _target(self, slot: int) -> int:
        p = self.field_pos(slot, 4)
        if not p:
            return 0
        target: int = p + U32.unpack_from(self.buf.data, p)[0]
        self.buf.check(target, 4, f"object of slot {slot}")
        return target

    def table(self, slot: int) -> Table | None:
        """The sub-table in ``slot``, or None when absent.

        Raises:
            CorruptObjectError: the sub-table is malformed.
        """
        t = self._target(slot)
        return self.buf.table_at(t) if t else None

    def vector(self, slot: int, elem_size: int) -> tuple[int, int] | None:
        """``(first element position, length)`` of the vector in ``slot``, or None.

        Raises:
            CorruptObjectError: the vector does not fit in the buffer.
        """
        t = self._target(slot)
        if not t:
            return None
        n = U32.unpack_from(self.buf.data, t)[0]
        self.buf.check(t + 4, n * elem_size, f"vector of slot {slot}")
        return t + 4, n

    def bytes_(self, slot: int) -> bytes | None:
        """A ``[ubyte]`` field as bytes, or None when absent.

        Raises:
            CorruptObjectError: the vector does not fit in the buffer.
        """
        v = self.vector(slot, 1)
        if v is None:
            return None
        start, n = v
        return self.buf.data[start:start + n]

    def string(self, slot: int) -> str | None:
        """A ``string`` field, or None when absent.

        Raises:
            CorruptObjectError: out of bounds, no NUL terminator, or not UTF-8.
        """
        v = self.vector(slot, 1)
        if v is None:
            return None
        start, n = v
        data = self.buf.data
        if start + n >= self.buf.end or data[start + n] != 0:
            self.buf.fail(f"string in slot {slot} is not NUL-terminated")
        try:
            return data[start:start + n].decode("utf-8")
        except UnicodeDecodeError:
            self.buf.fail(f"string in slot {slot} is not valid UTF-8")

    def tables(self, slot: int) -> list[Table] | None:
        """A vector of tables, or None when absent.

        Raises:
            CorruptObjectError: the vector or one of its tables is malformed.
        """
        v = self.vector(slot, 4)
        if v is None:
            return None
        start, n = v
        buf = self.buf
        rels = struct.unpack_from(f"<{n}I", buf.data, start)
        return [buf.table_at(start + 4 * i + rel) for i, rel in enumerate(rels)]

    def u32s(self, slot: int) -> tuple[int, ...] | None:
        """A ``[uint]`` vector, or None when absent.

        Raises:
            CorruptObjectError: the vector does not fit in the buffer.
        """
        v = self.vector(slot, 4)
        if v is None:
            return None
        start, n = v
        return struct.unpack_from(f"<{n}I", self.buf.data, start)

    def union(self, type_slot: int, value_slot: int) -> tuple[int, Table | None]:
        """A union: its ``u8`` type tag (0 = NONE) and its value table (None when absent).

        Raises:
            CorruptObjectError: the value table is malformed.
        """
        return self.u8(type_slot), self.table(value_slot)

    # ------------------------------------------------------------- required
    def missing(self, name: str) -> NoReturn:
        """Raise for a missing required field.

        Raises:
            CorruptObjectError: always.
        """
        self.buf.fail(f"required field {name!r} is missing")

    def req_table(self, slot: int, name: str) -> Table:
        """A required sub-table.

        Raises:
            CorruptObjectError: absent or malformed.
        """
        t = self.table(slot)
        return t if t is not None else self.missing(name)

    def req_tables(self, slot: int, name: str) -> list[Table]:
        """A required vector of tables.

        Raises:
            CorruptObjectError: absent or malformed.
        """
        t = self.tables(slot)
        return t if t is not None else self.missing(name)

    def req_bytes(self, slot: int, name: str) -> bytes:
        """A required ``[ubyte]`` vector.

        Raises:
            CorruptObjectError: absent or malformed.
        """
        b = self.bytes_(slot)
        return b if b is not None else self.missing(name)

    def req_string(self, slot: int, name: str) -> str:
        """A required string.

        Raises:
            CorruptObjectError: absent or malformed.
        """
        s = self.string(slot)
        return s if s is not None else self.missing(name)


# ---------------------------------------------------------------------- builder helpers
def new_builder() -> flatbuffers.Builder:
    """A builder as 0.17.0's output is reproduced with (format §5.7)."""
    return flatbuffers.Builder(1024)


def finish(b: flatbuffers.Builder, root: int) -> bytes:
    """Finish without file identifier and return the buffer bytes."""
    b.Finish(root)
    return bytes(b.Output())


def check_uint(value: int, bits: int, what: str) -> int:
    """Validate an unsigned field before encoding.

    Raises:
        InvalidArgumentError: the value does not fit in ``bits`` unsigned bits.
    """
    if not isinstance(value, int) or not 0 <= value < (1 << bits):
        raise InvalidArgumentError(f"{what} must fit in u{bits}, got {value!r}")
    return value


def add_offset_vector(b: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    """A vector of already-created tables/strings."""
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return int(b.EndVector())


def add_u32_vector(b: flatbuffers.Builder, values: Sequence[int], what: str) -> int:
    """A ``[uint]`` vector.

    Raises:
        InvalidArgumentError: a value does not fit in u32.
    """
    b.StartVector(4, len(values), 4)
    for v in reversed(values):
        b.PrependUint32(check_uint(v, 32, what))
    return int(b.EndVector())


def add_bytes(b: flatbuffers.Builder, value: bytes) -> int:
    """A ``[ubyte]`` vector."""
    return int(b.CreateByteVector(bytes(value)))


def add_string(b: flatbuffers.Builder, value: str) -> int:
    """A string (UTF-8, NUL-terminated).

    Raises:
        InvalidArgumentError: the string cannot be encoded as UTF-8.
    """
    try:
        return int(b.CreateString(value.encode("utf-8")))
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"string is not encodable as UTF-8: {value!r}") from exc
