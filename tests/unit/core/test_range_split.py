"""Splitting a compaction into key ranges, and merging sources in windows."""

from __future__ import annotations

import random
from itertools import chain

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelib.core.range_split import (
    HOT_FACTOR,
    Anchor,
    _run_keys_scan,
    block_anchors,
    hot_ranges,
    hot_ranges_sorted,
    overlapping_views,
    overlaps,
    range_count,
    range_weight,
    ranges_from_boundaries,
    run_keys,
    sort_anchors,
    split_by_weight,
    split_sorted,
    view_anchor,
)
from slatelib.core.ranges import UNBOUNDED, Bound, BytesRange
from slatelib.core.row import Row
from slatelib.core.window_merge import merge_windows
from slatelib.errors import InvalidArgumentError

MiB = 1 << 20


# ----------------------------------------------------------------------------- counts
def test_range_count_uses_every_slot_when_input_is_large() -> None:
    assert range_count(300 * MiB, parallelism=2, max_sst_size=256 * MiB,
                       min_range_bytes=32 * MiB) == 2


def test_range_count_never_makes_ranges_below_the_minimum() -> None:
    assert range_count(50 * MiB, parallelism=64, max_sst_size=256 * MiB,
                       min_range_bytes=32 * MiB) == 2
    assert range_count(1, parallelism=64, max_sst_size=256 * MiB,
                       min_range_bytes=32 * MiB) == 1


def test_range_count_follows_the_output_sst_size_on_few_slots() -> None:
    # 8 SSTs of 1 MiB at most per range: 100 MiB needs 13 ranges even on 2 slots
    assert range_count(100 * MiB, parallelism=2, max_sst_size=MiB,
                       min_range_bytes=MiB) == 13


def test_range_count_oversplits_with_tasks_per_slot() -> None:
    assert range_count(1000 * MiB, parallelism=4, max_sst_size=256 * MiB,
                       min_range_bytes=MiB, tasks_per_slot=3) == 12


def test_range_count_rejects_non_positive_inputs() -> None:
    with pytest.raises(InvalidArgumentError):
        range_count(10, parallelism=0, max_sst_size=1, min_range_bytes=1)


# ------------------------------------------------------------------------- boundaries
def _keys(rng: BytesRange, keys: list[bytes]) -> list[bytes]:
    return [k for k in keys if rng.contains(k)]


def test_ranges_cover_the_key_space_without_overlap() -> None:
    ranges = ranges_from_boundaries([b"f", b"m"])
    keys = [b"", b"a", b"f", b"g", b"m", b"z" * 9]
    assert [_keys(r, keys) for r in ranges] == [[b"", b"a"], [b"f", b"g"], [b"m", b"z" * 9]]


def test_split_balances_weight_between_ranges() -> None:
    anchors = [Anchor(bytes([i]), 10) for i in range(100)]
    ranges = split_by_weight(anchors, 4)
    assert len(ranges) == 4
    assert [range_weight(r, anchors) for r in ranges] == [250, 250, 250, 250]


def test_dense_key_regions_get_narrower_ranges() -> None:
    # many sources overlap on [0x10, 0x20): that region weighs 10x the rest
    anchors = [Anchor(bytes([i]), 100 if 0x10 <= i < 0x20 else 10) for i in range(0x80)]
    ranges = split_by_weight(anchors, 4)
    widths = [len(_keys(r, [bytes([i]) for i in range(0x80)])) for r in ranges]
    assert widths[0] < widths[-1]
    weights = [range_weight(r, anchors) for r in ranges]
    assert max(weights) <= 1.3 * min(weights)


def test_a_heavy_anchor_is_not_followed_by_near_empty_ranges() -> None:
    anchors = [Anchor(b"a", 1000), Anchor(b"b", 1), Anchor(b"c", 1), Anchor(b"d", 1)]
    ranges = split_by_weight(anchors, 4)
    assert len(ranges) == 2 and ranges[1].start.key == b"b"


def test_equal_anchor_keys_never_produce_an_empty_range() -> None:
    anchors = [Anchor(b"k", 50)] * 8 + [Anchor(b"m", 50)]
    ranges = split_by_weight(anchors, 4)
    assert all(not r.is_empty() for r in ranges)
    assert len(ranges) == 2


def test_hot_ranges_are_the_ones_far_above_the_target() -> None:
    anchors = [Anchor(b"a", 10), Anchor(b"b", 10), Anchor(b"c", 100)]
    ranges = ranges_from_boundaries([b"b"])
    assert hot_ranges(ranges, anchors, 2) == [1]
    assert hot_ranges(ranges, anchors, 1) == []


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=4), st.integers(0, 1000)),
                min_size=1, max_size=60), st.integers(1, 12))
def test_every_anchor_lands_in_exactly_one_range(items: list[tuple[bytes, int]],
                                                 count: int) -> None:
    anchors = [Anchor(k, w) for k, w in items]
    ranges = split_by_weight(anchors, count)
    assert 1 <= len(ranges) <= count
    for a in anchors:
        assert sum(r.contains(a.key) for r in ranges) == 1
    starts = [r.start.key for r in ranges[1:] if r.start.key is not None]
    assert len(starts) == len(ranges) - 1
    assert starts == sorted(set(starts))


# --------------------------------------------------------------------------- anchors
def test_block_anchors_weigh_each_block_and_clip_to_the_view() -> None:
    first_keys = [b"", b"c", b"f", b"k"]
    offsets = [0, 100, 250, 300]
    all_ = block_anchors(first_keys, offsets, 400, b"a", BytesRange.all())
    assert all_ == [Anchor(b"a", 100), Anchor(b"c", 150), Anchor(b"f", 50), Anchor(b"k", 100)]
    clipped = block_anchors(first_keys, offsets, 400, b"a", BytesRange.half_open(b"d", b"g"))
    assert clipped == [Anchor(b"d", 150), Anchor(b"f", 50)]


def test_block_anchors_are_sampled_per_sst() -> None:
    n = 1000
    got = block_anchors([b""] + [b"%04d" % i for i in range(1, n)], list(range(0, 10 * n, 10)),
                        10 * n, b"0000", BytesRange.all(), max_anchors=100)
    assert len(got) == 100 and sum(a.weight for a in got) == 10 * n


def test_view_anchor_and_overlap() -> None:
    eff = BytesRange.half_open(b"c", b"f")
    assert view_anchor(eff, 7) == Anchor(b"c", 7)
    assert overlaps(eff, BytesRange.half_open(b"e", None))
    assert not overlaps(eff, BytesRange.half_open(b"f", None))


# ------------------------------------------------------------------------ window merge
def _row(key: bytes, seq: int) -> Row:
    return (key, seq, 0, b"v", None, None)


def _blocks(rows: list[Row], size: int) -> list[list[Row]]:
    return [rows[i:i + size] for i in range(0, len(rows), size)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 9)), max_size=40),
                min_size=1, max_size=5), st.integers(1, 7), st.integers(1, 20))
def test_windows_merge_sources_and_never_split_a_key(
    sources: list[list[tuple[int, int]]], block: int, fill: int
) -> None:
    streams = []
    for i, src in enumerate(sources):
        rows = sorted({(b"%03d" % k, s * 10 + i) for k, s in src},
                      key=lambda r: (r[0], -r[1]))
        streams.append(_blocks([_row(k, s) for k, s in rows], block))
    windows = list(merge_windows(streams, fill_rows=fill))
    merged = list(chain.from_iterable(windows))
    assert [r[0] for r in merged] == sorted(r[0] for r in merged)
    assert sorted(merged) == sorted(chain.from_iterable(chain.from_iterable(streams)))
    seen: set[bytes] = set()
    for w in windows:
        keys = {r[0] for r in w}
        assert not keys & seen
        seen |= keys


def test_windows_keep_the_newer_source_first_within_a_key() -> None:
    newer = [[_row(b"a", 9), _row(b"b", 8)]]
    older = [[_row(b"a", 3)], [_row(b"b", 2)]]
    merged = list(chain.from_iterable(merge_windows([newer, older], fill_rows=1)))
    assert merged == [_row(b"a", 9), _row(b"a", 3), _row(b"b", 8), _row(b"b", 2)]


def test_a_key_spanning_many_blocks_is_read_to_its_end() -> None:
    rows = [_row(b"k", s) for s in range(100, 0, -1)] + [_row(b"z", 1)]
    other = [[_row(b"a", 500)], [_row(b"zz", 1)]]
    windows = list(merge_windows([_blocks(rows, 3), other], fill_rows=2))
    k_windows = [w for w in windows if any(r[0] == b"k" for r in w)]
    assert len(k_windows) == 1 and sum(r[0] == b"k" for r in k_windows[0]) == 100


def test_random_interleaved_sources_merge_in_order() -> None:
    rng = random.Random(7)
    sources = []
    for i in range(6):
        keys = sorted(rng.sample(range(10_000), 800))
        sources.append(_blocks([_row(b"%05d" % k, i) for k in keys], 37))
    merged = list(chain.from_iterable(merge_windows(sources, fill_rows=100)))
    assert len(merged) == 4800
    assert [r[0] for r in merged] == sorted(r[0] for r in merged)


# ------------------------------------------------------------ fast paths vs definitions
def _rand_key(r: random.Random) -> bytes:
    return bytes(r.choice(b"abcdef") for _ in range(r.randint(1, 3)))


def _rand_bound(r: random.Random) -> Bound:
    kind = r.randrange(3)
    if kind == 0:
        return UNBOUNDED
    return Bound.included(_rand_key(r)) if kind == 1 else Bound.excluded(_rand_key(r))


def test_anchor_orders_and_compares_as_its_key_weight_pair() -> None:
    r = random.Random(5)
    anchors = [Anchor(_rand_key(r), r.randint(0, 9)) for _ in range(500)]
    assert [tuple(a) for a in sorted(anchors)] == sorted((a.key, a.weight) for a in anchors)
    assert Anchor(b"a", 1) == Anchor(key=b"a", weight=1) != Anchor(b"a", 2)


def test_hot_ranges_equals_the_per_range_weight_definition() -> None:
    r = random.Random(7)
    for _ in range(400):
        anchors = [Anchor(_rand_key(r), r.randint(0, 50)) for _ in range(r.randint(0, 40))]
        count = r.randint(1, 8)
        ranges = [BytesRange(_rand_bound(r), _rand_bound(r)) for _ in range(r.randint(0, 8))]
        if r.random() < 0.5:
            ranges = split_by_weight(anchors, count)
        total = sum(a.weight for a in anchors)
        limit = HOT_FACTOR * total / count
        expected = ([] if total <= 0 or count <= 1 else
                    [i for i, g in enumerate(ranges) if range_weight(g, anchors) > limit])
        assert hot_ranges(ranges, anchors, count) == expected


def test_overlapping_views_equals_a_scan_of_every_view() -> None:
    r = random.Random(9)
    checked = 0
    for _ in range(600):
        keys = sorted({_rand_key(r) for _ in range(r.randint(0, 20))})
        effs = [BytesRange(Bound.included(a), Bound.included(a if r.random() < 0.2 else b))
                for a, b in zip(keys[::2], keys[1::2], strict=False)]  # some single-key views
        effs = [e.intersect(BytesRange(_rand_bound(r), _rand_bound(r)))
                if r.random() < 0.3 else e for e in effs]  # clipped (projected) views
        if r.random() < 0.2:
            effs.append(BytesRange(Bound.included(b"fff"), UNBOUNDED))
        if r.random() < 0.1:
            r.shuffle(effs)
        rk = run_keys(effs)
        if rk is None:
            continue  # build_tasks scans such a run (tests/unit/ops/engine/test_split.py)
        checked += 1
        for _ in range(10):
            task = BytesRange(_rand_bound(r), _rand_bound(r))
            assert overlapping_views(rk, task) == [
                i for i, e in enumerate(effs) if overlaps(e, task)]
    assert checked > 300


def test_run_keys_refuses_views_out_of_key_order() -> None:
    a = BytesRange(Bound.included(b"a"), Bound.included(b"c"))
    b = BytesRange(Bound.included(b"d"), Bound.included(b"f"))
    assert run_keys([a, b]) is not None
    assert run_keys([b, a]) is None
    assert run_keys([BytesRange(Bound.included(b"a"), UNBOUNDED), b]) is None


def _split_definition(anchors: list[Anchor], count: int) -> list[BytesRange]:
    """split_by_weight as first written: a walk over every sorted anchor."""
    if count <= 1 or not anchors:
        return [BytesRange.all()]
    ordered = sorted(anchors)
    total = sum(a.weight for a in ordered)
    if total <= 0:
        return [BytesRange.all()]
    target = total / count
    threshold = target
    first_key = ordered[0].key
    boundaries: list[bytes] = []
    cumulative = 0
    for a in ordered:
        distinct = a.key > (boundaries[-1] if boundaries else first_key)
        if cumulative >= threshold and distinct and len(boundaries) < count - 1:
            boundaries.append(a.key)
            while threshold <= cumulative:
                threshold += target
        cumulative += a.weight
    return ranges_from_boundaries(boundaries)


def test_split_by_weight_equals_the_walk_over_every_anchor() -> None:
    r = random.Random(13)
    for case in range(1500):
        n = r.randint(0, 60)
        keys = [_rand_key(r) for _ in range(r.randint(1, 12))]  # many equal keys
        low = -3 if case % 5 == 0 else 0  # some negative weights: the walk itself is done
        anchors = [Anchor(r.choice(keys), r.choice([0, 0, 1, 7, 100, r.randint(low, 10**6)]))
                   for _ in range(n)]
        count = r.randint(1, 12)
        expected = _split_definition(anchors, count)
        assert split_by_weight(anchors, count) == expected
        sa = sort_anchors(anchors)
        if n:
            assert split_sorted(sa, count) == expected
            assert hot_ranges_sorted(expected, sa, count) == hot_ranges(expected, anchors, count)


def test_run_keys_of_plain_views_equals_the_view_by_view_scan() -> None:
    r = random.Random(17)
    for _ in range(500):
        keys = sorted(_rand_key(r) for _ in range(r.randint(0, 30)))
        effs = [BytesRange(Bound.included(a), Bound.included(b))
                for a, b in zip(keys[::2], keys[1::2], strict=False)]
        if effs and r.random() < 0.3:  # an empty view, or one out of order
            i = r.randrange(len(effs))
            effs[i] = BytesRange(effs[i].end, effs[i].start)
        if len(effs) > 1 and r.random() < 0.2:
            r.shuffle(effs)
        assert run_keys(effs) == _run_keys_scan(effs)
