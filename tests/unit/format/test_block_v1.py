"""v1 data blocks: golden bytes of the spec, round trips (0.17 reads v1, never writes it)."""

from __future__ import annotations

from hypothesis import given, settings

from slatelib.core.row import TOMBSTONE
from slatelib.format.block_v1 import BlockBuilderV1, decode_block_v1
from slatelib.format.checksum import crc32
from tests.unit.format.test_block import SPEC_ROWS, rows_strategy


def test_v1_block_matches_spec_worked_example() -> None:
    b = BlockBuilderV1(block_size=1 << 20)
    for r in SPEC_ROWS:
        assert b.add(r)
    block = b.finish()
    assert crc32(block) == 0x7BCACCC2
    assert block[-8:].hex() == "00000021003b0003"
    assert decode_block_v1(block) == SPEC_ROWS


@settings(max_examples=200, deadline=None)
@given(rows_strategy)
def test_v1_round_trip_drops_tombstone_expiry(rows: list) -> None:  # type: ignore[type-arg]
    b = BlockBuilderV1(block_size=1 << 30)
    for r in rows:
        b.add(r)
    expected = [(k, s, kd, v, None if kd == TOMBSTONE else e, c) for k, s, kd, v, e, c in rows]
    assert decode_block_v1(b.finish()) == expected
