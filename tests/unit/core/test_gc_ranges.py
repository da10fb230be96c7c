"""Key ranges for the distributed listing: disjoint and complete for every possible name."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slatelib.core.gc_ranges import ranges_from_cuts, ulid_cuts, wal_cuts
from slatelib.ids import format_id, ulid_from_str, ulid_time_ms, ulid_to_str

PREFIX = "t/db/compacted"
names = st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZ./-_~ \x00", min_size=0, max_size=30)


@settings(max_examples=200, deadline=None)
@given(paths=st.lists(names, max_size=40), cuts=st.lists(names, max_size=8))
def test_every_path_falls_in_exactly_one_range(paths: list[str], cuts: list[str]) -> None:
    ranges = ranges_from_cuts(PREFIX, [f"{PREFIX}/{c}" for c in cuts])
    for name in paths:
        path = f"{PREFIX}/{name}"
        assert sum(r.contains(path) for r in ranges) == 1, (path, ranges)


def test_a_cut_point_itself_belongs_to_the_range_below_it() -> None:
    cut = f"{PREFIX}/{ulid_to_str(5 << 80)}"
    low, high = ranges_from_cuts(PREFIX, [cut])
    assert low.contains(cut) and not high.contains(cut)
    assert (low.start_after, low.end_before, high.start_after, high.end_before) == (
        None, cut + "\0", cut, None)


def test_ulid_cuts_are_spread_evenly_over_time() -> None:
    cuts = ulid_cuts(PREFIX, 1_000_000, 2_000_000, 4)
    assert [ulid_time_ms(ulid_from_str(c.rsplit("/", 1)[1])) for c in cuts] == [
        1_250_000, 1_500_000, 1_750_000]
    assert cuts == sorted(cuts)


def test_wal_cuts_use_twenty_digit_ids_and_degenerate_spans_give_one_range() -> None:
    assert wal_cuts("db/wal", 0, 100, 4) == [f"db/wal/{format_id(i)}" for i in (25, 50, 75)]
    assert wal_cuts("db/wal", 10, 10, 8) == []
    assert ulid_cuts(PREFIX, 5, 5, 8) == []
    assert len(ranges_from_cuts("db/wal", [])) == 1
