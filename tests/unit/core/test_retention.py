"""Retention over merged rows: the merge-semantics matrix of 0.17.0's compactor.

Rows are ``(key, seq, kind, value, expire_ts, create_ts)``; each case states the versions of
one key (newest first) and the exact rows a compaction keeps, mirroring 0.17's
``RetentionIterator`` / ``MergeOperatorIterator`` tests. The property tests check the
contract behind the rules: every snapshot at or above ``recent_snapshot_min_seq`` reads the
same before and after retention.

Every test runs three times (the module-scoped ``engine`` fixture): against the pure-Python
reference (``retain_versions`` per key, ``merge_windows`` + ``retain_window`` per window),
against the native merge with retention (the pipeline's ``Pipe`` over Python rows, through
:func:`slatelib.format.native_merge.retained_batches`), and against the native pipeline
(``slatelib/csrc/pipe.h`` through :class:`slatelib.format.native_pipe.RetainPipe`, every
source encoded as v2 blocks and read as ``CheckedBlocks``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelib.core.merge import ConcatMergeOperator, MergeOperator, resolve_versions
from slatelib.core.retention import (
    MERGE_BATCH_SIZE,
    RetentionPolicy,
    RetentionStats,
    retain_versions,
    retain_window,
)
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.format.native_merge import HAVE_NATIVE_MERGE, retained_batches
from slatelib.format.native_pipe import HAVE_NATIVE_PIPE, RetainPipe
from tests.unit.format._pipe_blocks import checked_groups
from tests.unit.native_only import require_native

K = b"k"
TICK = 1_000


def v(seq: int, value: bytes = b"v", *, exp: int | None = None, ts: int | None = 7,
      key: bytes = K) -> Row:
    return (key, seq, VALUE, value, exp, ts)


def t(seq: int, *, ts: int | None = 7, key: bytes = K) -> Row:
    return (key, seq, TOMBSTONE, b"", None, ts)


def m(seq: int, op: bytes, *, exp: int | None = None, ts: int | None = 7,
      key: bytes = K) -> Row:
    return (key, seq, MERGE, op, exp, ts)


ENGINE = {"native": False, "pipe": False}


@pytest.fixture(autouse=True, scope="module", params=["python", "native", "native_pipe"])
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the whole matrix against the Python reference, the native merge, then the
    native pipeline."""
    if request.param == "native":
        require_native(HAVE_NATIVE_MERGE, "slatelib._speedups (the native matrix)")
    if request.param == "native_pipe":
        require_native(HAVE_NATIVE_PIPE, "slatelib._speedups (its native pipeline)")
    ENGINE["native"] = request.param in ("native", "native_pipe")
    ENGINE["pipe"] = request.param == "native_pipe"
    yield request.param
    ENGINE["native"] = ENGINE["pipe"] = False


def retain(sources: Sequence[Sequence[Row]], policy: RetentionPolicy,
           stats: RetentionStats) -> list[Row]:
    """What a compaction keeps of ``sources`` (each sorted, newest first), on the engine
    under test: the windowed Python reference, the native merge or the native pipeline."""
    if ENGINE["pipe"]:
        groups = [checked_groups(list(src), 2, block_rows=(2, 1))[0] for src in sources]
        pipe = RetainPipe(groups, policy, stats)
        out: list[Row] = []
        while batch := pipe.rows(3):
            out += batch
        return out
    blocks = [[list(src)] for src in sources]
    batches = retained_batches(blocks, policy, stats, use_native=ENGINE["native"])
    return [r for batch in batches for r in batch]


def keep(versions: Sequence[Row], *, min_seq: int = 100, bottom: bool = False,
         op: MergeOperator | None = None, tick: int = TICK) -> list[Row]:
    stats = RetentionStats()
    policy = RetentionPolicy(min_seq, bottom, tick, op)
    if ENGINE["native"]:
        return retain([versions], policy, stats)
    return retain_versions(list(versions), policy, stats)


# ------------------------------------------------------------------ sequence order, snapshots
def test_only_the_newest_version_survives_when_no_snapshot_needs_older_ones() -> None:
    assert keep([v(9, b"new"), v(5, b"mid"), v(2, b"old")], min_seq=9) == [v(9, b"new")]


def test_versions_above_the_snapshot_seq_are_kept_plus_the_boundary_version() -> None:
    versions = [v(9, b"a"), v(7, b"b"), v(4, b"c"), v(2, b"d")]
    assert keep(versions, min_seq=5) == [v(9, b"a"), v(7, b"b"), v(4, b"c")]


def test_a_version_exactly_at_the_snapshot_seq_is_the_boundary() -> None:
    assert keep([v(9, b"a"), v(5, b"b"), v(3, b"c")], min_seq=5) == [v(9, b"a"), v(5, b"b")]


def test_snapshot_min_seq_zero_keeps_every_version() -> None:
    versions = [v(3, b"a"), t(2), v(1, b"c")]
    assert keep(versions, min_seq=0) == versions


# --------------------------------------------------------------------------- tombstones
def test_tombstone_is_kept_outside_the_bottom_run() -> None:
    assert keep([t(9), v(3)], min_seq=9, bottom=False) == [t(9)]


def test_tombstone_is_dropped_at_the_bottom_with_the_versions_it_shadows() -> None:
    assert keep([t(9), v(3)], min_seq=9, bottom=True) == []


def test_tombstone_needed_by_a_snapshot_keeps_its_boundary_value_at_the_bottom() -> None:
    # a snapshot at seq 5 reads b"old"; the tombstone hides it from newer reads
    assert keep([t(9), v(3, b"old"), v(1)], min_seq=5, bottom=True) == [t(9), v(3, b"old")]


def test_trailing_tombstones_below_a_value_are_dropped_at_the_bottom() -> None:
    assert keep([v(9, b"x"), t(8), t(7)], min_seq=5, bottom=True) == [v(9, b"x")]


def test_tombstone_newer_than_every_snapshot_is_kept_at_the_bottom_if_not_trailing() -> None:
    assert keep([v(9, b"x"), t(8), v(2, b"y")], min_seq=5, bottom=True) == \
        [v(9, b"x"), t(8), v(2, b"y")]


# --------------------------------------------------------------------------------- TTL
def test_expired_value_becomes_a_tombstone_keeping_seq_and_create_ts() -> None:
    got = keep([v(9, b"x", exp=TICK, ts=42), v(3, b"older")], min_seq=9)
    assert got == [t(9, ts=42)]


def test_expired_value_is_dropped_at_the_bottom() -> None:
    assert keep([v(9, b"x", exp=TICK - 1)], min_seq=9, bottom=True) == []


def test_value_expiring_after_the_compaction_clock_is_kept_with_its_expiry() -> None:
    row = v(9, b"x", exp=TICK + 1)
    assert keep([row], min_seq=9, bottom=True) == [row]


def test_expired_merge_operand_is_dropped_without_a_tombstone() -> None:
    got = keep([m(9, b"+a", exp=TICK), v(3, b"base")], min_seq=9)
    assert got == [v(3, b"base")]


def test_expired_value_shadowing_an_older_longer_lived_value_does_not_revive_it() -> None:
    got = keep([v(9, b"short", exp=TICK), v(3, b"long", exp=TICK * 10)], min_seq=9)
    assert got == [t(9)]


# ------------------------------------------------------------------- merge operands
def test_without_operator_operands_are_kept_unfolded_down_to_the_base_value() -> None:
    versions = [m(9, b"c"), m(8, b"b"), v(7, b"a"), v(2, b"gone")]
    assert keep(versions, min_seq=9) == versions[:3]


def test_without_operator_operands_are_kept_at_the_bottom_even_with_no_base() -> None:
    versions = [m(9, b"c"), m(8, b"b")]
    assert keep(versions, min_seq=9, bottom=True) == versions


def test_operator_folds_operands_onto_the_base_value_into_a_value() -> None:
    got = keep([m(9, b"c", ts=5), m(8, b"b", ts=9), v(7, b"a", ts=1), v(2, b"gone")],
               min_seq=9, op=ConcatMergeOperator())
    assert got == [(K, 9, VALUE, b"abc", None, 9)]


def test_operator_folds_operands_without_base_into_one_operand() -> None:
    got = keep([m(9, b"y"), m(4, b"x")], min_seq=9, op=ConcatMergeOperator())
    assert got == [m(9, b"xy")]


def test_operator_consumes_a_tombstone_base_and_yields_a_value() -> None:
    got = keep([m(9, b"y"), t(5), v(2, b"old")], min_seq=9, op=ConcatMergeOperator())
    assert got == [v(9, b"y")]


def test_operands_above_the_snapshot_seq_stay_unfolded() -> None:
    got = keep([m(9, b"c"), m(8, b"b"), m(4, b"a"), v(3, b"z")], min_seq=5,
               op=ConcatMergeOperator())
    assert got == [m(9, b"c"), m(8, b"b"), v(4, b"za")]


def test_operands_with_different_expiry_are_not_folded_together() -> None:
    got = keep([m(9, b"b", exp=TICK * 5), m(8, b"a"), v(3, b"z")], min_seq=9,
               op=ConcatMergeOperator())
    assert got == [m(9, b"b", exp=TICK * 5), v(8, b"za")]


def test_operands_are_folded_in_batches_of_100_like_0_17() -> None:
    calls: list[tuple[bytes | None, bytes]] = []

    class Recording:
        def merge(self, key: bytes, existing: bytes | None, operand: bytes) -> bytes:
            calls.append((existing, operand))
            return (existing or b"") + operand

    n = MERGE_BATCH_SIZE + 5
    versions = [m(1000 - i, bytes([65 + i % 26])) for i in range(n)]
    got = keep(versions, min_seq=1000, op=Recording())
    assert got == [m(1000, b"".join(bytes([65 + i % 26]) for i in reversed(range(n))))]
    # two batches (100 + 5 operands) each folded from "no value", then the two batch
    # results folded onto the missing base: three folds start from None
    assert [c for c in calls if c[0] is None] == [(None, b"V"), (None, b"A"), (None, b"AZYXW")]
    assert len(calls) == n + 2


# --------------------------------------------------------------------- windows and ranges
def test_window_without_retention_work_is_returned_as_is() -> None:
    rows = [v(5, key=b"a"), v(6, key=b"b"), v(7, key=b"c")]
    stats = RetentionStats()
    if ENGINE["native"]:
        out = retain([rows], RetentionPolicy(10, False, TICK), stats)
        assert out == rows
    else:
        out = retain_window(rows, RetentionPolicy(10, False, TICK), stats)
        assert out is rows
    assert (stats.rows_in, stats.rows_out) == (3, 3)


def test_window_groups_versions_from_several_sources_by_seq() -> None:
    # the newer source holds the older version of b: seqs interleave across sources
    newer = [v(9, key=b"a"), v(5, b"b5", key=b"b")]
    older = [v(8, b"b8", key=b"b"), t(6, key=b"c")]
    stats = RetentionStats()
    out = retain([newer, older], RetentionPolicy(9, True, TICK), stats)
    assert out == [v(9, key=b"a"), v(8, b"b8", key=b"b")]
    assert stats.versions_dropped == 1 and stats.tombstones_dropped == 1


def test_duplicate_seq_keeps_the_version_of_the_newest_source() -> None:
    newer, older = [v(5, b"new", key=b"a")], [v(5, b"old", key=b"a")]
    out = retain([newer, older], RetentionPolicy(0, False, TICK), RetentionStats())
    assert out == [v(5, b"new", key=b"a")]


def test_window_stats_count_every_kind_of_drop() -> None:
    rows = [v(9, b"e", exp=1, key=b"a"), m(8, b"x", exp=1, key=b"b"), v(3, key=b"b"),
            t(9, key=b"c"), v(2, key=b"c"), m(9, b"2", key=b"d"), m(8, b"1", key=b"d")]
    stats = RetentionStats()
    out = retain([rows], RetentionPolicy(9, True, TICK, ConcatMergeOperator()), stats)
    assert out == [v(3, key=b"b"), m(9, b"12", key=b"d")]
    assert stats.as_dict() == {
        "rows_in": 7, "rows_out": 2, "versions_dropped": 1, "tombstones_dropped": 2,
        "expired_to_tombstone": 1, "expired_merges_dropped": 1, "merge_operands_folded": 1,
    }


# ---------------------------------------------------------------------------- properties
def _snapshot_read(versions: Sequence[Row], seq: int, op: MergeOperator | None) -> bytes | None:
    visible = sorted((r for r in versions if r[1] <= seq), key=lambda r: -r[1])
    return resolve_versions(K, visible, op)


def _expire(versions: Sequence[Row], tick: int) -> list[Row]:
    out = []
    for r in versions:
        if r[4] is not None and r[4] <= tick:
            if r[2] == MERGE:
                continue
            r = t(r[1], ts=r[5])
        out.append(r)
    return out


_kind = st.sampled_from([VALUE, VALUE, TOMBSTONE, MERGE])


@st.composite
def _versions(draw: st.DrawFn) -> list[Row]:
    seqs = draw(st.lists(st.integers(1, 60), min_size=1, max_size=12, unique=True))
    rows = []
    for s in sorted(seqs, reverse=True):
        kind = draw(_kind)
        exp = draw(st.sampled_from([None, None, TICK - 5, TICK + 5]))
        if kind == TOMBSTONE:
            rows.append(t(s))
        elif kind == MERGE:
            rows.append(m(s, bytes([97 + s % 26]), exp=exp))
        else:
            rows.append(v(s, b"v%d" % s, exp=exp))
    return rows


@settings(max_examples=300, deadline=None)
@given(_versions(), st.integers(0, 60), st.booleans(), st.booleans())
def test_every_snapshot_at_or_above_min_seq_reads_the_same(
    versions: list[Row], min_seq: int, bottom: bool, with_op: bool
) -> None:
    op = ConcatMergeOperator() if with_op else None
    out = keep(versions, min_seq=min_seq, bottom=bottom, op=op)
    expected_source = _expire(versions, TICK)
    for seq in range(min_seq, 62):
        if op is None and any(r[2] == MERGE for r in expected_source if r[1] <= seq):
            # without an operator the unfolded operands must all still be there
            want = [r for r in expected_source if r[1] <= seq]
            got = [r for r in out if r[1] <= seq]
            assert _unfolded_prefix(want) == _unfolded_prefix(got)
            continue
        assert _snapshot_read(out, seq, op) == _snapshot_read(expected_source, seq, op)


def _unfolded_prefix(rows: Sequence[Row]) -> list[tuple[int, bytes]]:
    """The operands down to the first value (or tombstone, which reads like no older
    version at all), as a reader folds them."""
    out: list[tuple[int, bytes]] = []
    for r in sorted(rows, key=lambda r: -r[1]):
        if r[2] == TOMBSTONE:
            break
        out.append((r[2], r[3]))
        if r[2] != MERGE:
            break
    return out


@settings(max_examples=200, deadline=None)
@given(_versions(), st.integers(0, 60))
def test_compacting_the_output_again_reads_the_same(versions: list[Row], min_seq: int) -> None:
    # not byte-idempotent, as in 0.17: an operand whose older neighbour expired is folded
    # with the next version only in the second pass; every read stays the same
    op = ConcatMergeOperator()
    once = keep(versions, min_seq=min_seq, bottom=True, op=op)
    twice = keep(once, min_seq=min_seq, bottom=True, op=op) if once else []
    for seq in range(min_seq, 62):
        assert _snapshot_read(twice, seq, op) == _snapshot_read(once, seq, op)
    assert len(twice) <= len(once)


@pytest.mark.parametrize("bottom", [False, True])
def test_window_equals_per_key_retention(bottom: bool) -> None:
    rows = [v(9, key=b"a"), v(3, key=b"a"), t(8, key=b"b"), m(7, b"q", key=b"c"),
            v(6, b"z", exp=1, key=b"d"), v(5, key=b"e")]
    policy = RetentionPolicy(9, bottom, TICK)
    by_key: list[Row] = []
    for key in (b"a", b"b", b"c", b"d", b"e"):
        by_key += retain_versions([r for r in rows if r[0] == key], policy, RetentionStats())
    assert retain([rows], policy, RetentionStats()) == by_key


# ------------------------------------------------- range boundaries and visible ranges
@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 40), _kind), min_size=1,
                max_size=80, unique_by=lambda x: (x[0], x[1])),
       st.lists(st.integers(0, 31), max_size=5), st.integers(0, 40), st.booleans())
def test_splitting_the_key_space_into_ranges_does_not_change_the_output(
    items: list[tuple[int, int, int]], cuts: list[int], min_seq: int, bottom: bool
) -> None:
    from slatelib.core.range_split import ranges_from_boundaries

    rows = sorted(((b"%02d" % k, s, kind, b"" if kind == TOMBSTONE else b"v", None, 1)
                   for k, s, kind in items), key=lambda r: (r[0], -r[1]))
    policy = RetentionPolicy(min_seq, bottom, TICK, ConcatMergeOperator())
    whole = retain([rows], policy, RetentionStats())
    pieces: list[Row] = []
    for rng in ranges_from_boundaries([b"%02d" % c for c in sorted(set(cuts))]):
        pieces += retain([[r for r in rows if rng.contains(r[0])]], policy, RetentionStats())
    assert pieces == whole


def test_a_tombstone_outside_a_views_visible_range_shadows_nothing() -> None:
    from slatelib.core.ranges import BytesRange

    visible = BytesRange.half_open(b"a", b"m")
    newer_l0 = [t(9, key=b"b"), t(9, key=b"x")]  # b is visible, x lies outside the view
    older_run = [v(3, b"b-old", key=b"b"), v(3, b"x-old", key=b"x")]
    clipped = [r for r in newer_l0 if visible.contains(r[0])]
    out = [r for batch in retained_batches([[clipped], [older_run]],
                                           RetentionPolicy(9, True, TICK), RetentionStats(),
                                           fill_rows=1, use_native=ENGINE["native"])
           for r in batch]
    assert out == [v(3, b"x-old", key=b"x")]
