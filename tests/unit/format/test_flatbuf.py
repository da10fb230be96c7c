"""The bounds-checked FlatBuffer reader and the shared tables (Ulid, Uuid, BytesRange)."""

from __future__ import annotations

import struct
import uuid

import flatbuffers
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slatelib.core.ranges import Bound, BoundKind, BytesRange
from slatelib.errors import CorruptObjectError, InvalidArgumentError
from slatelib.format.flatbuf import (
    Buffer,
    add_bytes,
    add_offset_vector,
    add_string,
    add_u32_vector,
    corrupt_on_error,
    finish,
    new_builder,
)
from slatelib.format.shared_tables import (
    add_range,
    add_ulid,
    add_uuid,
    read_range,
    read_ulid,
    read_uuid,
)

from ._strategies import ranges


def _table(build: object) -> bytes:
    """Finish a one-table buffer built by ``build(builder) -> offset``."""
    b = new_builder()
    return finish(b, build(b))  # type: ignore[operator]


def _scalars(b: flatbuffers.Builder) -> int:
    name = add_string(b, "héllo")
    blob = add_bytes(b, b"\x00\x01")
    nums = add_u32_vector(b, [1, 2, 3], "n")
    b.StartObject(8)
    b.PrependUint64Slot(0, 2**64 - 1, 0)
    b.PrependInt64Slot(1, -5, 0)
    b.PrependUint16Slot(2, 0, None)  # optional scalar: written although 0
    b.PrependUOffsetTRelativeSlot(3, name, 0)
    b.PrependUOffsetTRelativeSlot(4, blob, 0)
    b.PrependUOffsetTRelativeSlot(5, nums, 0)
    b.PrependBoolSlot(6, True, False)
    b.PrependInt8Slot(7, -2, 0)
    return int(b.EndObject())


def test_reader_returns_typed_fields_and_applies_defaults_for_absent_slots() -> None:
    t = Buffer(_table(_scalars)).root()
    assert t.u64(0) == 2**64 - 1
    assert t.i64(1) == -5
    assert t.opt_u16(2) == 0
    assert t.string(3) == "héllo"
    assert t.bytes_(4) == b"\x00\x01"
    assert t.u32s(5) == (1, 2, 3)
    assert t.boolean(6) is True
    assert t.i8(7) == -2
    # slots beyond the vtable and zero entries read as defaults / None
    assert t.u64(12, 42) == 42
    assert t.opt_u16(12) is None
    assert t.bytes_(12) is None and t.string(12) is None and t.table(12) is None
    assert t.tables(12) is None and t.u32s(12) is None and not t.has(12)


def test_required_accessors_raise_with_field_name_and_path() -> None:
    t = Buffer(_table(_scalars), path="db/manifest/1.manifest").root()
    with pytest.raises(CorruptObjectError, match="'ssts'") as info:
        t.req_tables(12, "ssts")
    assert info.value.path == "db/manifest/1.manifest"
    for call in (lambda: t.req_table(12, "x"), lambda: t.req_bytes(12, "x"),
                 lambda: t.req_string(12, "x")):
        with pytest.raises(CorruptObjectError):
            call()


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00", b"\xff\xff\xff\x7f"])
def test_root_offset_out_of_bounds_raises_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptObjectError, match="out of bounds") as info:
        Buffer(data, path="p").root()
    assert info.value.path == "p"


def test_bad_vtable_length_raises_corrupt() -> None:
    # root -> table at 4 whose soffset points at a vtable at 12 with an odd length
    data = struct.pack("<IiHH", 4, -8, 0, 0) + struct.pack("<HH", 5, 4)
    with pytest.raises(CorruptObjectError, match="vtable length"):
        Buffer(data).root()


def test_vtable_outside_buffer_raises_corrupt() -> None:
    data = struct.pack("<Ii", 4, -1000)
    with pytest.raises(CorruptObjectError, match="vtable"):
        Buffer(data).root()


def test_field_outside_its_table_raises_corrupt() -> None:
    data = bytearray(_table(_scalars))
    t = Buffer(bytes(data)).root()
    # make the vtable entry of slot 0 point past the table's declared size
    struct.pack_into("<H", data, t._vt + 4, t.size)
    with pytest.raises(CorruptObjectError, match="outside its table"):
        Buffer(bytes(data)).root().u64(0)


def test_vector_longer_than_buffer_raises_corrupt() -> None:
    data = bytearray(_table(_scalars))
    t = Buffer(bytes(data)).root()
    start, _ = t.vector(4, 1) or (0, 0)
    struct.pack_into("<I", data, start - 4, 10**6)
    with pytest.raises(CorruptObjectError, match="out of bounds"):
        Buffer(bytes(data)).root().bytes_(4)


def test_string_without_nul_terminator_or_bad_utf8_raises_corrupt() -> None:
    data = bytearray(_table(_scalars))
    start, n = Buffer(bytes(data)).root().vector(3, 1) or (0, 0)
    broken = bytearray(data)
    broken[start + n] = 1
    with pytest.raises(CorruptObjectError, match="NUL"):
        Buffer(bytes(broken)).root().string(3)
    broken = bytearray(data)
    broken[start] = 0xFF
    with pytest.raises(CorruptObjectError, match="UTF-8"):
        Buffer(bytes(broken)).root().string(3)


def test_buffer_start_skips_a_prefix_and_bounds_exclude_it() -> None:
    payload = _table(_scalars)
    t = Buffer(b"\x00\x02" + payload, start=2).root()
    assert t.string(3) == "héllo"
    with pytest.raises(CorruptObjectError):
        Buffer(b"\x00\x02", start=2).root()


def test_corrupt_on_error_turns_low_level_errors_into_corrupt_object_error() -> None:
    for exc in (IndexError("i"), struct.error("s"), ValueError("v"), KeyError("k")):
        with pytest.raises(CorruptObjectError, match="malformed thing") as info:
            with corrupt_on_error("thing", "some/path"):
                raise exc
        assert info.value.path == "some/path"
    with pytest.raises(RuntimeError):
        with corrupt_on_error("thing", None):
            raise RuntimeError("not a decoding error")


@given(st.integers(0, 2**128 - 1))
def test_ulid_and_uuid_tables_round_trip(value: int) -> None:
    assert read_ulid(Buffer(_table(lambda b: add_ulid(b, value))).root()) == value
    u = uuid.UUID(int=value)
    assert read_uuid(Buffer(_table(lambda b: add_uuid(b, u))).root()) == u


def test_zero_ulid_halves_are_omitted_like_0_17() -> None:
    # Ulid {high 0, low 0}: no fields at all, so the table is 4 bytes + a 4-byte vtable
    assert _table(lambda b: add_ulid(b, 0)) == bytes.fromhex("08000000" "04000400" "04000000")


def test_add_ulid_rejects_values_beyond_128_bits() -> None:
    with pytest.raises(InvalidArgumentError):
        add_ulid(new_builder(), 2**128)


@given(ranges)
def test_bytes_range_round_trips_every_bound_kind(r: BytesRange) -> None:
    assert read_range(Buffer(_table(lambda b: add_range(b, r))).root()) == r


def _bound_buffer(kind: int, key: bytes | None) -> bytes:
    def build(b: flatbuffers.Builder) -> int:
        def bound() -> int:
            k = None if key is None else add_bytes(b, key)
            b.StartObject(2)
            if k is not None:
                b.PrependUOffsetTRelativeSlot(0, k, 0)
            b.PrependInt8Slot(1, kind, 0)
            return int(b.EndObject())
        start, end = bound(), bound()
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(1, end, 0)
        b.PrependUOffsetTRelativeSlot(0, start, 0)
        return int(b.EndObject())
    return _table(build)


@pytest.mark.parametrize(("kind", "key"), [
    (BoundKind.UNBOUNDED, b"k"),
    (BoundKind.INCLUDED, None),
    (BoundKind.EXCLUDED, None),
    (BoundKind.UNKNOWN, None),
    (BoundKind.UNKNOWN, b"k"),
    (7, b"k"),
])
def test_bytes_bound_violating_spec_5_4_raises_corrupt(kind: int, key: bytes | None) -> None:
    with pytest.raises(CorruptObjectError, match="bound"):
        read_range(Buffer(_bound_buffer(kind, key)).root())


def test_empty_key_is_a_valid_included_bound() -> None:
    r = read_range(Buffer(_bound_buffer(BoundKind.INCLUDED, b"")).root())
    assert r == BytesRange(Bound.included(b""), Bound.included(b""))


def test_offset_vector_of_tables_reads_back_in_order() -> None:
    def build(b: flatbuffers.Builder) -> int:
        vec = add_offset_vector(b, [add_ulid(b, i) for i in (3, 1, 2)])
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, vec, 0)
        return int(b.EndObject())
    tables = Buffer(_table(build)).root().tables(0) or []
    assert [read_ulid(t) for t in tables] == [3, 1, 2]
