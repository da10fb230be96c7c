"""What a memtable flush writes (:func:`plan_l0_rows`): 0.17's merge folding and retention,
through the compaction's own retention (:mod:`slatelib.core.retention`)."""

from __future__ import annotations

import pytest

from slatelib.core.merge import ConcatMergeOperator
from slatelib.core.retention import MERGE_BATCH_SIZE
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.errors import MergeOperatorMissingError
from slatelib.writer.flusher import plan_l0_rows

CONCAT = ConcatMergeOperator()
T = 1_000


def flush(rows: list[Row], *, tick: int = T, min_seq: int = 100, op: object = CONCAT) -> list[Row]:
    return plan_l0_rows(rows, merge_operator=op, clock_tick=tick, min_seq=min_seq)  # type: ignore[arg-type]


def test_only_the_newest_version_of_a_key_is_flushed() -> None:
    got = flush([(b"a", 3, VALUE, b"new", None, 10), (b"a", 2, VALUE, b"old", None, 9),
                 (b"b", 1, TOMBSTONE, b"", None, 8)])
    assert got == [(b"a", 3, VALUE, b"new", None, 10), (b"b", 1, TOMBSTONE, b"", None, 8)]


def test_expired_values_become_tombstones_keeping_create_ts() -> None:
    got = flush([(b"a", 3, VALUE, b"v", T, 10), (b"b", 2, VALUE, b"w", T + 1, 11)])
    assert got == [(b"a", 3, TOMBSTONE, b"", None, 10), (b"b", 2, VALUE, b"w", T + 1, 11)]


def test_an_expired_newest_value_hides_older_unexpired_versions() -> None:
    got = flush([(b"a", 3, VALUE, b"short", T - 1, 10), (b"a", 2, VALUE, b"long", None, 9)])
    assert got == [(b"a", 3, TOMBSTONE, b"", None, 10)]


def test_expired_merge_operands_are_dropped_and_older_versions_kept() -> None:
    rows = [(b"m", 3, MERGE, b"x", T - 5, 10), (b"m", 2, VALUE, b"base", None, 9)]
    assert flush(rows) == [(b"m", 2, VALUE, b"base", None, 9)]


def test_operands_fold_onto_the_base_with_the_newest_create_time() -> None:
    rows = [(b"m", 5, MERGE, b"c", None, 30), (b"m", 4, MERGE, b"b", None, 20),
            (b"m", 3, VALUE, b"a", None, 10), (b"m", 1, VALUE, b"gone", None, 5)]
    assert flush(rows) == [(b"m", 5, VALUE, b"abc", None, 30)]


def test_operands_stop_folding_at_a_different_expire_time() -> None:
    rows = [(b"m", 5, MERGE, b"b", 5000, 30), (b"m", 4, MERGE, b"a", None, 20),
            (b"m", 3, VALUE, b"base", None, 10)]
    assert flush(rows) == [(b"m", 5, MERGE, b"b", 5000, 30), (b"m", 4, VALUE, b"basea", None, 20)]


def test_many_operands_fold_in_batches_in_order() -> None:
    n = 2 * MERGE_BATCH_SIZE + 7
    rows = [(b"m", n - i, MERGE, bytes([65 + (n - 1 - i) % 26]), None, 1) for i in range(n)]
    expected = bytes(65 + i % 26 for i in range(n))
    assert flush(rows, min_seq=n) == [(b"m", n, MERGE, expected, None, 1)]


def test_merge_rows_without_an_operator_fail_the_flush_naming_the_key() -> None:
    with pytest.raises(MergeOperatorMissingError, match="m2"):
        flush([(b"a", 2, VALUE, b"x", None, 1), (b"m2", 1, MERGE, b"x", None, 1)], op=None)


def test_without_merges_no_operator_is_needed_and_rows_pass_through() -> None:
    rows = [(b"a", 2, VALUE, b"x", None, 1), (b"b", 1, TOMBSTONE, b"", None, 1)]
    assert flush(rows, op=None) == rows


def test_versions_above_the_retention_seq_are_kept_and_tombstones_too() -> None:
    rows = [(b"a", 9, VALUE, b"n", None, 1), (b"a", 8, TOMBSTONE, b"", None, 1),
            (b"a", 3, VALUE, b"p", None, 1), (b"a", 2, VALUE, b"q", None, 1)]
    assert [r[1] for r in flush(rows, tick=0, min_seq=5)] == [9, 8, 3]
