"""Checking a rescale (pure): ranges that tile the key space, stats that add up."""

from __future__ import annotations

import pytest

from slatelib.core.ranges import BytesRange
from slatelib.core.rescale_check import RangeStats, check_tiling, compare_stats
from slatelib.core.rescale_plan import shard_ranges
from slatelib.errors import InvalidDbStateError


def test_shard_ranges_tile_the_key_space() -> None:
    check_tiling(shard_ranges([b"g", b"p"]))


@pytest.mark.parametrize("ranges", [
    [BytesRange.half_open(None, b"g"), BytesRange.half_open(b"h", None)],          # gap
    [BytesRange.half_open(None, b"h"), BytesRange.half_open(b"g", None)],          # overlap
    [BytesRange.half_open(b"a", b"g"), BytesRange.half_open(b"g", None)],          # no -inf
    [BytesRange.half_open(None, b"g")],                                            # no +inf
    [],
])
def test_tiling_refuses_gaps_overlaps_and_short_covers(ranges: list[BytesRange]) -> None:
    with pytest.raises(InvalidDbStateError):
        check_tiling(ranges)


def test_range_stats_of_disjoint_parts_add_up() -> None:
    rows = [(bytes([i]), bytes([i]) * i) for i in range(1, 50)]
    whole = RangeStats.of(rows)
    parts = RangeStats.of(rows[:20]) + RangeStats.of(rows[20:])
    assert parts == whole and whole.keys == 49
    assert compare_stats("db-0", whole, parts) is None
    changed = RangeStats.of(rows[:-1] + [(rows[-1][0], b"other")])
    assert "db-0" in str(compare_stats("db-0", whole, changed))
