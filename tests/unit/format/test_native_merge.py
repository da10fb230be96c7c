"""The native k-way merge (the ``Pipe`` of ``slatelib/csrc/pipe.h`` over Python rows, through
:mod:`slatelib.format.native_merge`) against the pure-Python reference.

On random sources (several versions per key, equal seqs across sources, TTLs, tombstones,
merge operands, random block cuts and batch sizes) the native merge must return exactly
what the reference returns: the merged rows, the resolved pairs of a scan, and the rows and
counters of 0.17's retention, with and without a merge operator. The unit merge matrix
(``tests/unit/core/test_retention.py``) runs against both paths as well.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatelib.core.merge import ConcatMergeOperator, MergeOperator
from slatelib.core.retention import RetentionPolicy, RetentionStats
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.errors import CorruptObjectError, MergeOperatorMissingError
from slatelib.format.native_merge import (
    HAVE_NATIVE_MERGE,
    merged_rows,
    resolved_pairs,
    retained_batches,
)
from tests.unit.native_only import require_native

TICK = 1_000
DIFF = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def merge_built() -> None:
    """Optional for users, not for these tests: a missing build is a failure."""
    require_native(HAVE_NATIVE_MERGE, "slatelib._speedups")


@st.composite
def sources(draw: st.DrawFn) -> list[list[list[Row]]]:
    """1-5 sources, each sorted (key asc, seq desc) and cut into blocks at random."""
    out = []
    for _ in range(draw(st.integers(1, 5))):
        items = draw(st.lists(st.tuples(st.integers(0, 12), st.integers(1, 40),
                                        st.sampled_from([VALUE, VALUE, TOMBSTONE, MERGE]),
                                        st.sampled_from([None, None, TICK - 1, TICK, TICK + 1]),
                                        st.sampled_from([None, 5])),
                              max_size=40, unique_by=lambda x: (x[0], x[1])))
        rows: list[Row] = []
        for k, seq, kind, exp, ts in items:
            key = b"k%02d" % k if k % 3 else b"k%d" % k  # keys of different lengths
            value = b"" if kind == TOMBSTONE else b"%d.%d" % (k, seq)
            rows.append((key, seq, kind, value, None if kind == TOMBSTONE else exp, ts))
        rows.sort(key=lambda r: (r[0], -r[1]))
        cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=6)))
        blocks, at = [], 0
        for c in [*cuts, len(rows)]:
            blocks.append(rows[at:c])  # empty blocks too: sources may yield them
            at = c
        out.append(blocks)
    return out


def flat(batches: list[list[Row]]) -> list[Row]:
    return [r for b in batches for r in b]


@DIFF
@given(sources())
def test_merged_rows_equal_heapq_merge(srcs: list[list[list[Row]]]) -> None:
    assert list(merged_rows(srcs)) == list(merged_rows(srcs, use_native=False))


@DIFF
@given(sources(), st.booleans(), st.integers(1, 7))
def test_resolved_pairs_equal_the_reference(srcs: list[list[list[Row]]], with_op: bool,
                                            batch: int) -> None:
    op = ConcatMergeOperator() if with_op else None

    def run(use_native: bool) -> object:
        try:
            return list(resolved_pairs(srcs, op, batch=batch, use_native=use_native))
        except MergeOperatorMissingError as exc:
            return ("missing operator", str(exc))

    assert run(True) == run(False)


@DIFF
@given(sources(), st.integers(0, 41), st.booleans(), st.booleans(), st.integers(1, 9))
def test_retention_equals_the_windowed_reference(
    srcs: list[list[list[Row]]], min_seq: int, bottom: bool, with_op: bool, fill: int
) -> None:
    op = ConcatMergeOperator() if with_op else None
    policy = RetentionPolicy(min_seq, bottom, TICK, op)
    got_stats, want_stats = RetentionStats(), RetentionStats()
    got = list(retained_batches(srcs, policy, got_stats, fill_rows=fill))
    want = list(retained_batches(srcs, policy, want_stats, fill_rows=fill, use_native=False))
    assert flat(got) == flat(want)
    assert got_stats == want_stats
    assert all(got), "batches are never empty"
    for a, b in zip(got, got[1:], strict=False):
        assert a[-1][0] != b[0][0], "a key's versions straddle two batches"


# keys around the merge's 8-byte prefix compare: zero bytes, a shared 8-byte prefix, keys that
# are prefixes of others (a zero pad must not tie or misorder them)
EDGE_KEYS = [b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"a\x00\x00\x01", b"abcdefg",
             b"abcdefg\x00", b"abcdefgh", b"abcdefgh\x00", b"abcdefgh\x01", b"abcdefgi",
             b"\xff" * 7, b"\xff" * 8, b"\xff" * 9]


@DIFF
@given(st.lists(st.lists(st.tuples(st.sampled_from(EDGE_KEYS), st.integers(1, 9)),
                         max_size=20), min_size=1, max_size=5))
def test_merged_rows_order_keys_near_the_prefix_compare(
    raw: list[list[tuple[bytes, int]]]
) -> None:
    srcs = [[sorted({(k, s, VALUE, b"v", None, None) for k, s in rows},
                    key=lambda r: (r[0], -r[1]))] for rows in raw]
    got = list(merged_rows(srcs))
    assert got == list(merged_rows(srcs, use_native=False))
    assert [(r[0], -r[1]) for r in got] == sorted((r[0], -r[1]) for r in got)


def test_a_key_below_its_predecessor_in_the_first_8_bytes_is_out_of_order() -> None:
    bad = [[(b"abcdefgh\x01", 1, VALUE, b"x", None, None), (b"abcdefg", 1, VALUE, b"y", None,
                                                              None)]]
    with pytest.raises(CorruptObjectError, match="source 0, row 1: out of order"):
        list(merged_rows([bad]))


def test_a_source_out_of_order_is_a_corrupt_input_naming_the_source() -> None:
    good = [[(b"a", 1, VALUE, b"x", None, None)]]
    bad = [[(b"b", 1, VALUE, b"x", None, None)], [(b"a", 2, VALUE, b"y", None, None)]]
    with pytest.raises(CorruptObjectError, match="source 1, row 1: out of order"):
        list(merged_rows([good, bad]))
    seq_up = [[(b"a", 1, VALUE, b"x", None, None), (b"a", 2, VALUE, b"y", None, None)]]
    with pytest.raises(CorruptObjectError, match="source 0, row 1: out of order"):
        list(retained_batches([seq_up], RetentionPolicy(0, False, TICK), RetentionStats()))


@pytest.mark.parametrize("row", [
    (b"a", 1, VALUE, b"x"),                    # not a 6-tuple
    ("a", 1, VALUE, b"x", None, None),         # str key
    (b"a", -1, VALUE, b"x", None, None),       # negative seq
    (b"a", 1, 7, b"x", None, None),            # unknown kind
])
def test_a_malformed_row_is_a_corrupt_input(row: tuple[object, ...]) -> None:
    with pytest.raises(CorruptObjectError, match="source 0, row 0"):
        list(resolved_pairs([[[row]]], None))  # type: ignore[list-item]


def test_errors_of_the_merge_operator_and_of_sources_pass_through_unchanged() -> None:
    class Boom(MergeOperator):
        def merge(self, key: bytes, existing: bytes | None, operand: bytes) -> bytes:
            raise ValueError("operator says no")

    rows = [[(b"a", 2, MERGE, b"x", None, None), (b"a", 1, VALUE, b"y", None, None)]]
    with pytest.raises(ValueError, match="operator says no") as info:
        list(retained_batches([rows], RetentionPolicy(5, False, TICK, Boom()), RetentionStats()))
    assert not isinstance(info.value, CorruptObjectError)
    with pytest.raises(ValueError, match="operator says no"):
        list(resolved_pairs([rows], Boom()))

    def failing() -> object:
        yield [(b"a", 1, VALUE, b"x", None, None)]
        raise OSError("store went away")

    with pytest.raises(OSError, match="store went away"):
        list(resolved_pairs([failing()], None))  # type: ignore[list-item]


def test_a_scan_pulls_blocks_lazily() -> None:
    pulled: list[int] = []

    def source() -> object:
        for i in range(1000):
            pulled.append(i)
            yield [(b"%06d" % i, 1, VALUE, b"v", None, None)]

    it = resolved_pairs([source()], None, batch=4)  # type: ignore[list-item]
    assert next(it) == (b"000000", b"v")
    assert len(pulled) < 10, "the merge must stream, not drain its sources"


def test_stats_count_rows_dropped_across_sources() -> None:
    newer = [[(b"a", 5, VALUE, b"new", None, None), (b"b", 9, TOMBSTONE, b"", None, None)]]
    older = [[(b"a", 5, VALUE, b"dup", None, None), (b"a", 3, VALUE, b"old", None, None),
              (b"b", 2, VALUE, b"gone", None, None), (b"c", 1, VALUE, b"x", TICK, None)]]
    stats = RetentionStats()
    out = flat(list(retained_batches([newer, older], RetentionPolicy(9, True, TICK), stats)))
    assert out == [(b"a", 5, VALUE, b"new", None, None)]
    assert stats.as_dict() == {
        "rows_in": 6, "rows_out": 1, "versions_dropped": 3, "tombstones_dropped": 2,
        "expired_to_tombstone": 1, "expired_merges_dropped": 0, "merge_operands_folded": 0,
    }


def test_no_native_turns_the_merge_and_sst_finishing_off() -> None:
    """``SLATELIB_NO_NATIVE=1`` turns the native merge and SST finishing off, in a subprocess
    (``make test-pure`` runs the whole unit suite that way: the merge matrix's Python half,
    the read semantics, the scan path)."""
    repo = Path(__file__).resolve().parents[3]
    env = dict(os.environ, SLATELIB_NO_NATIVE="1")
    probe = subprocess.run(
        [sys.executable, "-c", "from slatelib.format import native_merge as m, native as n; "
         "print(m.HAVE_NATIVE_MERGE, n.sstwrite is None)"],
        cwd=repo, env=env, capture_output=True, text=True, check=True,
    )
    assert probe.stdout.split() == ["False", "True"]
