"""resolve_window: the visible row per key, as DbReader resolves it."""

from __future__ import annotations

import pytest

from slatelib.core.merge import as_merge_operator
from slatelib.core.row import MERGE, TOMBSTONE, VALUE
from slatelib.core.visible_rows import resolve_window
from slatelib.errors import MergeOperatorMissingError


def test_plain_values_pass_through_with_their_metadata() -> None:
    rows = [(b"a", 5, VALUE, b"1", None, 10), (b"b", 6, VALUE, b"2", 99, 11)]
    assert resolve_window(rows, None) == rows


def test_newest_version_wins_whatever_the_source_order() -> None:
    # versions of one key from two sources, the older source first
    rows = [(b"a", 3, VALUE, b"old", None, 1), (b"a", 9, VALUE, b"new", None, 2),
            (b"b", 4, VALUE, b"x", None, 3)]
    assert resolve_window(rows, None) == [rows[1], rows[2]]


def test_tombstone_hides_the_key_and_older_values() -> None:
    rows = [(b"a", 7, TOMBSTONE, b"", None, None), (b"a", 2, VALUE, b"v", None, None),
            (b"c", 1, VALUE, b"c", None, None)]
    assert resolve_window(rows, None) == [rows[2]]


def test_merge_operands_fold_down_to_the_base_value() -> None:
    op = as_merge_operator("concat")
    rows = [(b"m", 5, MERGE, b"+c", None, 50), (b"m", 3, MERGE, b"+b", None, 30),
            (b"m", 1, VALUE, b"a", None, 10), (b"n", 4, MERGE, b"x", None, 40),
            (b"n", 2, TOMBSTONE, b"", None, None)]
    assert resolve_window(rows, op) == [(b"m", 5, VALUE, b"a+b+c", None, 50),
                                        (b"n", 4, VALUE, b"x", None, 40)]


def test_merge_operands_without_an_operator_raise_naming_the_key() -> None:
    with pytest.raises(MergeOperatorMissingError, match="6d"):
        resolve_window([(b"m", 1, MERGE, b"x", None, None)], None)


def test_empty_window() -> None:
    assert resolve_window([], None) == []
