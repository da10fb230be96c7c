"""v2 data blocks: golden bytes of format §7.12, round trips, fit rule, corruption."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelib.core.row import MERGE, TOMBSTONE, VALUE
from slatelib.errors import CorruptObjectError, InvalidArgumentError
from slatelib.format.block import BlockBuilderV2, decode_block_v2, encode_block_v2
from slatelib.format.checksum import crc32

SPEC_ROWS = [
    (b"apple", 7, VALUE, b"red", None, 1700000000000),
    (b"apricot", 9, TOMBSTONE, b"", None, 1700000000001),
    (b"apricot", 8, MERGE, b"+x", 1800000000000, 1700000000000),
]


def test_v2_block_matches_spec_worked_example() -> None:
    block = encode_block_v2(SPEC_ROWS)
    assert len(block) == 87
    assert crc32(block) == 0x4EE69DBA
    assert block[:0x1C].hex() == (
        "000503" "6170706c65" "726564" "0000000000000007" "04" "0000018bcfe56800"
    )
    assert decode_block_v2(block) == SPEC_ROWS


def test_v2_restart_points_every_16_rows() -> None:
    rows = [(b"key:%04d" % i, 1, VALUE, b"v", None, None) for i in range(40)]
    block = encode_block_v2(rows)
    count = int.from_bytes(block[-2:], "big")
    assert count == 3
    restarts = [int.from_bytes(block[-2 - 2 * (count - i) : -2 - 2 * (count - i) + 2], "big")
                for i in range(count)]
    assert restarts[0] == 0
    # a restart row stores the full key: shared = 0, unshared = 8
    for off in restarts:
        assert block[off] == 0 and block[off + 1] == 8
    assert decode_block_v2(block) == rows


def test_v2_fit_rule_counts_the_new_restart_offset() -> None:
    b = BlockBuilderV2(block_size=64)
    row = (b"k" * 10, 1, VALUE, b"v" * 10, None, None)  # 3 + 10 + 10 + 9 = 32 bytes
    assert b.add(row)
    # size now 32 + 2 (restart) + 2 (count) = 36; a second full row needs 36 + 32 > 64
    assert not b.add((b"l" * 10, 1, VALUE, b"v" * 10, None, None))


def test_oversized_row_gets_a_block_of_its_own() -> None:
    b = BlockBuilderV2(block_size=16)
    big = (b"big", 1, VALUE, b"x" * 70000, None, None)
    assert b.add(big)
    assert not b.add((b"c", 1, VALUE, b"", None, None))
    assert decode_block_v2(b.finish()) == [big]


def test_empty_key_is_rejected() -> None:
    with pytest.raises(InvalidArgumentError):
        BlockBuilderV2().add((b"", 1, VALUE, b"v", None, None))


rows_strategy = st.lists(
    st.tuples(
        st.binary(min_size=1, max_size=40),
        st.integers(min_value=0, max_value=(1 << 64) - 1),
        st.sampled_from([VALUE, TOMBSTONE, MERGE]),
        st.binary(max_size=300),
        st.one_of(st.none(), st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)),
        st.one_of(st.none(), st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)),
    ).map(lambda r: r if r[2] != TOMBSTONE else (r[0], r[1], r[2], b"", r[4], r[5])),
    min_size=1,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(rows_strategy)
def test_v2_round_trip(rows: list) -> None:  # type: ignore[type-arg]
    assert decode_block_v2(encode_block_v2(rows)) == rows


@settings(max_examples=300, deadline=None)
@given(rows_strategy, st.data())
def test_truncated_or_mangled_v2_block_never_raises_a_foreign_error(rows: list, data) -> None:  # type: ignore[no-untyped-def, type-arg]
    block = bytearray(encode_block_v2(rows))
    cut = data.draw(st.integers(min_value=0, max_value=len(block) - 1))
    for candidate in (bytes(block[:cut]), _flip(block, data)):
        try:
            decode_block_v2(candidate)
        except CorruptObjectError:
            pass


def _flip(block: bytearray, data) -> bytes:  # type: ignore[no-untyped-def]
    out = bytearray(block)
    i = data.draw(st.integers(min_value=0, max_value=len(out) - 1))
    out[i] ^= data.draw(st.integers(min_value=1, max_value=255))
    return bytes(out)


def test_invalid_flag_combination_is_corruption() -> None:
    block = bytearray(encode_block_v2([(b"k", 1, TOMBSTONE, b"", None, None)]))
    # flags byte follows shared/unshared/vlen varints (3), key (1), seq (8)
    block[3 + 1 + 8] = 0x09  # TOMBSTONE | MERGE_OPERAND
    with pytest.raises(CorruptObjectError):
        decode_block_v2(bytes(block))


@pytest.mark.parametrize("wrap", [memoryview, bytearray])
def test_reference_decoders_take_a_memoryview_and_return_bytes(wrap: type) -> None:
    """Compaction hands blocks to the decoder as memoryviews of the fetched range; the
    pure-Python decoders (executors without the C extension) must return bytes keys and
    values, as the native ones do (regression: shared prefixes failed with TypeError)."""
    from slatelib.format.block import decode_block_v2_py
    from slatelib.format.block_v1 import BlockBuilderV1, decode_block_v1_py

    rows = [(b"key%03d" % i, 10 + i, VALUE, b"v" * i, None, None) for i in range(40)]
    got = decode_block_v2_py(wrap(encode_block_v2(rows)))  # type: ignore[arg-type]
    assert got == rows and all(type(r[0]) is bytes and type(r[3]) is bytes for r in got)
    b1 = BlockBuilderV1(4096)
    for r in rows:
        assert b1.add(r)
    got1 = decode_block_v1_py(wrap(b1.finish()))  # type: ignore[arg-type]
    assert [(r[0], r[3]) for r in got1] == [(r[0], r[3]) for r in rows]
    assert all(type(r[0]) is bytes for r in got1)
