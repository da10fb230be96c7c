"""The pure rescale planner: keys, ranges, balanced cuts, targets, liveness, job records."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slatelib.core.manifest import Checkpoint, Manifest, SortedRun, SsTableInfo, SstHandle, SstView
from slatelib.core.range_split import Anchor, range_weight
from slatelib.core.ranges import BytesRange
from slatelib.core.rescale_plan import (
    Activity,
    RescalePlan,
    balanced_split_keys,
    check_disjoint,
    check_split_keys,
    check_target_paths,
    expand_template,
    format_key,
    live_writer_evidence,
    manifest_span,
    parse_key,
    parse_split_keys,
    plan_merge,
    plan_split,
    same_job,
    shard_estimates,
    shard_ranges,
    span_union,
    with_split_keys,
)
from slatelib.errors import InvalidArgumentError, InvalidDbStateError
from slatelib.ids import Ulid


# ------------------------------------------------------------------------------ keys
def test_keys_are_text_or_hex() -> None:
    assert parse_key("user42") == b"user42"
    assert parse_key("hex:00ff") == b"\x00\xff"
    assert parse_split_keys("b, hex:63 ,d") == (b"b", b"c", b"d")


@pytest.mark.parametrize("text, message", [
    ("", "at least one"),
    ("a,,b", "empty"),
    ("hex:zz", "not hex"),
    ("hex:", "empty"),
    ("b,a", "out of order"),
    ("a,a", "twice"),
])
def test_bad_split_keys_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        parse_split_keys(text)


def test_split_key_count_must_match_the_shard_count() -> None:
    with pytest.raises(InvalidArgumentError, match="needs 2 split keys"):
        check_split_keys([b"a"], 3)
    for into in (0, 1):
        with pytest.raises(InvalidArgumentError, match="at least 2 shards"):
            check_split_keys([], into)


@given(st.binary(min_size=1, max_size=12))
def test_format_key_reads_back(key: bytes) -> None:
    assert parse_key(format_key(key)) == key


def test_format_key_keeps_plain_text_readable() -> None:
    assert format_key(b"user-17") == "user-17"
    assert format_key(b"a,b") == "hex:612c62"
    assert format_key(b"hex:1") == "hex:6865783a31"


# ---------------------------------------------------------------------------- ranges
def test_shard_ranges_tile_the_key_space() -> None:
    ranges = shard_ranges([b"g", b"p"])
    assert ranges == (BytesRange.half_open(None, b"g"), BytesRange.half_open(b"g", b"p"),
                      BytesRange.half_open(b"p", None))
    keys = [b"\x00", b"f", b"g", b"o", b"p", b"\xff" * 3]
    assert [sum(r.contains(k) for r in ranges) for k in keys] == [1] * len(keys)


# ---------------------------------------------------------------------- balanced keys
def test_balanced_keys_cut_equal_weights() -> None:
    anchors = [Anchor(bytes([i]), 10) for i in range(100)]
    keys = balanced_split_keys(anchors, 4)
    assert keys == (bytes([25]), bytes([50]), bytes([75]))
    assert [range_weight(r, anchors) for r in shard_ranges(keys)] == [250] * 4


def test_balanced_keys_follow_dense_regions() -> None:
    anchors = [Anchor(bytes([i]), 100 if i >= 90 else 1) for i in range(100)]
    keys = balanced_split_keys(anchors, 2)
    assert bytes([90]) < keys[0] <= bytes([96])


def test_balanced_keys_are_exactly_into_minus_one_even_with_a_heavy_anchor() -> None:
    anchors = [Anchor(b"a", 1000), Anchor(b"b", 1), Anchor(b"c", 1), Anchor(b"d", 1)]
    keys = balanced_split_keys(anchors, 4)
    assert keys == (b"b", b"c", b"d")


def test_balanced_keys_need_as_many_distinct_keys_as_shards() -> None:
    with pytest.raises(InvalidArgumentError, match="--at"):
        balanced_split_keys([Anchor(b"a", 5), Anchor(b"a", 5), Anchor(b"b", 1)], 3)
    with pytest.raises(InvalidArgumentError, match="--at"):
        balanced_split_keys([], 2)


@given(st.lists(st.tuples(st.binary(min_size=1, max_size=3), st.integers(0, 1000)),
                min_size=1, max_size=60), st.integers(2, 6))
def test_balanced_keys_are_ascending_after_the_first_key(
        items: list[tuple[bytes, int]], into: int) -> None:
    anchors = [Anchor(k, w) for k, w in items]
    try:
        keys = balanced_split_keys(anchors, into)
    except InvalidArgumentError:
        assert len({k for k, _ in items}) < into or sum(w for _, w in items) == 0
        return
    assert len(keys) == into - 1
    assert list(keys) == sorted(set(keys))
    assert keys[0] > min(k for k, _ in items)


def test_balanced_keys_are_close_to_even_on_random_data() -> None:
    rng = random.Random(7)
    anchors = [Anchor(rng.randbytes(6), rng.randint(1000, 5000)) for _ in range(2000)]
    total = sum(a.weight for a in anchors)
    weights = [range_weight(r, anchors) for r in shard_ranges(balanced_split_keys(anchors, 5))]
    assert max(abs(w - total / 5) for w in weights) < 5000


def test_shard_estimates_spread_a_views_rows_by_its_weight() -> None:
    ranges = shard_ranges([b"m"])
    view_a = ([Anchor(b"a", 30), Anchor(b"n", 10)], 400)   # 3/4 of its rows below "m"
    view_b = ([Anchor(b"z", 5)], 7)
    est = shard_estimates([view_a, view_b], ranges)
    assert [(e.nbytes, e.rows) for e in est] == [(30, 300), (15, 107)]


# --------------------------------------------------------------------------- targets
def test_template_expands_per_shard() -> None:
    assert expand_template("s3://b/t/db-{i}", 3) == ["s3://b/t/db-0", "s3://b/t/db-1",
                                                      "s3://b/t/db-2"]


@pytest.mark.parametrize("template", ["s3://b/db", "s3://b/db-{n}-{i}", "file:///x/{i}}"])
def test_templates_without_exactly_the_index_field_are_refused(template: str) -> None:
    with pytest.raises(InvalidArgumentError):
        expand_template(template, 2)


@pytest.mark.parametrize("sources, targets, message", [
    (["db"], ["db-0", "db-0"], "repeated"),
    (["db"], ["db", "x"], "source"),
    (["db"], ["db/shard-0", "x"], "source"),
    (["a/db"], ["a", "x"], "source"),
    (["db"], ["x", "x/y"], "nested"),
    (["a", "a"], ["x"], "twice"),
])
def test_target_paths_must_be_apart(sources: list[str], targets: list[str], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        check_target_paths(sources, targets)


def test_sibling_spellings_are_not_nested() -> None:
    check_target_paths(["db"], ["db-0", "db-1", "db-10"])


# -------------------------------------------------------------------------- liveness
NOW_S = 1_750_000_000


def _activity(manifest_age: float | None, wal_age: float | None) -> Activity:
    return Activity(7, manifest_age, None if wal_age is None else 12, wal_age)


def test_a_quiet_source_shows_no_live_writer() -> None:
    assert live_writer_evidence(Manifest(), _activity(3600, None), now_s=NOW_S,
                                window_s=300) == []


def test_recent_writes_and_a_writer_checkpoint_are_evidence() -> None:
    cp = Checkpoint(uuid.uuid4(), 7, NOW_S + 100, NOW_S - 10, writer_epoch=3)
    got = live_writer_evidence(Manifest(checkpoints=(cp,)), _activity(20, 5), now_s=NOW_S,
                               window_s=300)
    assert len(got) == 3
    assert "writer epoch 3" in got[0] and "WAL SST 12" in got[1] and "manifest 7" in got[2]


def test_an_expired_writer_checkpoint_is_no_evidence() -> None:
    cp = Checkpoint(uuid.uuid4(), 7, NOW_S - 1, NOW_S - 100, writer_epoch=3)
    assert live_writer_evidence(Manifest(checkpoints=(cp,)), _activity(None, None),
                                now_s=NOW_S, window_s=300) == []


# ------------------------------------------------------------------------ job record
def test_split_record_round_trips_through_json() -> None:
    plan = plan_split("job1", "db", str(uuid.uuid4()), ["db-0", "db-1", "db-2"],
                      [b"\x00p", b"g"], now_ms=5, options={"fence_source": True})
    back = RescalePlan.from_json(plan.to_json())
    assert back == plan
    assert [t.parts[0].range for t in back.targets] == list(shard_ranges([b"\x00p", b"g"]))


def test_auto_keys_are_added_once_chosen() -> None:
    plan = plan_split("job1", "db", "cp", ["db-0", "db-1"], None, now_ms=5)
    assert plan.auto_keys and plan.split_keys is None
    done = with_split_keys(plan, [b"k"])
    assert RescalePlan.from_json(done.to_json()) == done
    assert done.auto_keys and done.targets[1].parts[0].range == BytesRange.half_open(b"k", None)


def test_merge_record_has_one_target_of_every_source() -> None:
    plan = plan_merge("j", [("s0", "c0"), ("s1", "c1")], "db", now_ms=1)
    assert RescalePlan.from_json(plan.to_json()) == plan
    assert [p.source for p in plan.targets[0].parts] == [0, 1]
    with pytest.raises(InvalidArgumentError):
        plan_merge("j", [("s0", "c0")], "db", now_ms=1)


def test_an_unreadable_record_is_a_state_error() -> None:
    with pytest.raises(InvalidDbStateError, match="remove it"):
        RescalePlan.from_json(b"{not json", path="db/slatelib/rescale/active.json")


def test_a_rerun_matches_its_own_job_only() -> None:
    auto = plan_split("j", "db", "cp", ["db-0", "db-1"], None, now_ms=1)
    assert same_job(auto, "split", ["db"], ["db-0", "db-1"], None) is None
    assert same_job(with_split_keys(auto, [b"k"]), "split", ["db"], ["db-0", "db-1"],
                    None) is None
    assert "--at" in str(same_job(plan_split("j", "db", "cp", ["db-0", "db-1"], [b"k"],
                                             now_ms=1), "split", ["db"], ["db-0", "db-1"], None))
    assert "targets" in str(same_job(auto, "split", ["db"], ["x-0", "x-1"], None))
    assert "merge" in str(same_job(auto, "merge", ["db"], ["db-0", "db-1"], None))
    assert "split keys" in str(same_job(auto, "split", ["db"], ["db-0", "db-1"], [b"k"]))


# ------------------------------------------------------------------------ merge spans
def test_manifest_span_covers_every_view() -> None:
    def handle(i: int, first: bytes, last: bytes) -> SstHandle:
        return SstHandle(Ulid(i), SsTableInfo(first, last, 0, 0, 0, 0))

    m = Manifest().with_trees(
        l0=[SstView.identity(Ulid(1))],
        compacted=[SortedRun(0, (SstView(Ulid(3), Ulid(2), BytesRange.half_open(b"c", None)),))],
        new_ssts=[handle(1, b"m", b"p"), handle(2, b"a", b"z")])
    span = manifest_span(m)
    assert span is not None and span.contains(b"c") and span.contains(b"z")
    assert not span.contains(b"b") and manifest_span(Manifest()) is None


def test_overlapping_spans_are_refused() -> None:
    a = BytesRange.half_open(b"a", b"m")
    check_disjoint([("x", a), ("y", BytesRange.half_open(b"m", None)), ("z", None)])
    with pytest.raises(InvalidArgumentError, match="'x'.*'y'"):
        check_disjoint([("x", a), ("y", BytesRange.half_open(b"l", b"n"))])
    assert span_union(a, BytesRange.half_open(b"x", b"y")) == BytesRange.half_open(b"a", b"y")
    assert span_union(None, a) == a
