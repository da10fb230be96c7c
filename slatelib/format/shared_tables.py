"""FlatBuffer tables shared by several schemas: ``Ulid``, ``Uuid``, ``BytesBound`` and
``BytesRange`` (format §4, §5.4), read with :mod:`slatelib.format.flatbuf` and written in the
canonical order of format §5.7.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import flatbuffers

from slatelib.core.ranges import Bound, BoundKind, BytesRange
from slatelib.errors import InvalidArgumentError
from slatelib.format.flatbuf import Table, add_bytes, add_offset_vector, check_uint
from slatelib.ids import Ulid

_MASK64 = (1 << 64) - 1


# ------------------------------------------------------------------------------ read
def read_ulid(t: Table) -> Ulid:
    """``Ulid {high (0), low (1)}`` as a 128-bit int."""
    return Ulid((t.u64(0) << 64) | t.u64(1))


def read_uuid(t: Table) -> uuid.UUID:
    """``Uuid {high (0), low (1)}`` as a :class:`uuid.UUID`."""
    return uuid.UUID(int=(t.u64(0) << 64) | t.u64(1))


def read_ulids(t: Table, slot: int) -> tuple[Ulid, ...] | None:
    """A ``[Ulid]`` vector, or None when absent.

    Raises:
        CorruptObjectError: malformed vector or element.
    """
    ts = t.tables(slot)
    return None if ts is None else tuple(read_ulid(x) for x in ts)


def read_bound(t: Table) -> Bound:
    """``BytesBound {key (0), bound_type (1)}`` with the rules of format §5.4.

    Raises:
        CorruptObjectError: unknown bound type, or key presence contradicting it.
    """
    kind = t.i8(1)
    key = t.bytes_(0)
    if kind == BoundKind.UNBOUNDED and key is None:
        return Bound(BoundKind.UNBOUNDED)
    if kind in (BoundKind.INCLUDED, BoundKind.EXCLUDED) and key is not None:
        return Bound(BoundKind(kind), key)
    t.buf.fail(f"invalid bytes bound (type {kind}, key {'present' if key is not None else 'absent'})")


def read_range(t: Table) -> BytesRange:
    """``BytesRange {start_bound (0, required), end_bound (1, required)}``.

    Raises:
        CorruptObjectError: a bound is missing or invalid, or the range is empty (0.17.0
            refuses empty ranges: ``BytesRange::new`` asserts non-emptiness).
    """
    r = BytesRange(read_bound(t.req_table(0, "start_bound")),
                   read_bound(t.req_table(1, "end_bound")))
    if not range_non_empty(r):
        t.buf.fail(f"empty key range {r}")
    return r


def range_non_empty(r: BytesRange) -> bool:
    """0.17.0's notion of a non-empty range (``ComparableRange::non_empty``).

    Unlike :meth:`BytesRange.is_empty` it looks at the keys only: ``(a, a + b"\\x00")`` counts
    as non-empty.
    """
    s, e = r.start, r.end
    if s.kind == BoundKind.UNBOUNDED or e.kind == BoundKind.UNBOUNDED:
        return True
    assert s.key is not None and e.key is not None
    if s.kind == BoundKind.INCLUDED and e.kind == BoundKind.INCLUDED:
        return s.key <= e.key
    return s.key < e.key


# ------------------------------------------------------------------------------ write
def _u128_table(b: flatbuffers.Builder, value: int) -> int:
    b.StartObject(2)
    b.PrependUint64Slot(1, value & _MASK64, 0)
    b.PrependUint64Slot(0, value >> 64, 0)
    return int(b.EndObject())


def add_ulid(b: flatbuffers.Builder, value: int) -> int:
    """Create a ``Ulid`` table: low (1), then high (0).

    Raises:
        InvalidArgumentError: not a 128-bit unsigned value.
    """
    check_uint(value, 128, "ULID")
    return _u128_table(b, value)


def add_uuid(b: flatbuffers.Builder, value: uuid.UUID) -> int:
    """Create a ``Uuid`` table (the UUID as a big-endian 128-bit int, split in two)."""
    return _u128_table(b, value.int)


def add_ulid_vector(b: flatbuffers.Builder, values: Sequence[int]) -> int:
    """Each ``Ulid`` table in order, then the vector.

    Raises:
        InvalidArgumentError: a value is not a 128-bit unsigned int.
    """
    return add_offset_vector(b, [add_ulid(b, v) for v in values])


def add_bound(b: flatbuffers.Builder, bound: Bound) -> int:
    """``BytesBound``: its key vector (if any), then the table: key (0), bound_type (1).

    Raises:
        InvalidArgumentError: the bound is not unbounded/included/excluded with a matching key.
    """
    if bound.kind == BoundKind.UNBOUNDED:
        if bound.key is not None:
            raise InvalidArgumentError("an unbounded bound has no key")
        key = None
    elif bound.kind in (BoundKind.INCLUDED, BoundKind.EXCLUDED) and bound.key is not None:
        key = add_bytes(b, bound.key)
    else:
        raise InvalidArgumentError(f"cannot encode bound {bound!r}")
    b.StartObject(2)
    if key is not None:
        b.PrependUOffsetTRelativeSlot(0, key, 0)
    b.PrependInt8Slot(1, int(bound.kind), 0)
    return int(b.EndObject())


def add_range(b: flatbuffers.Builder, r: BytesRange) -> int:
    """``BytesRange``: start bound, end bound, then the table: end (1), start (0).

    Raises:
        InvalidArgumentError: a bound cannot be encoded, or the range is empty.
    """
    if not range_non_empty(r):
        raise InvalidArgumentError(f"empty key range {r} (0.17.0 cannot read it)")
    start = add_bound(b, r.start)
    end = add_bound(b, r.end)
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(1, end, 0)
    b.PrependUOffsetTRelativeSlot(0, start, 0)
    return int(b.EndObject())
