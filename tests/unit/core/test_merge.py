"""Read semantics (format §10): newest version wins, tombstones, merge operands, no TTL."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelib.core.merge import (
    ConcatMergeOperator,
    as_merge_operator,
    merge_sources,
    resolve_rows,
    resolve_versions,
)
from slatelib.core.row import MERGE, TOMBSTONE, VALUE
from slatelib.errors import InvalidArgumentError, MergeOperatorMissingError

CONCAT = ConcatMergeOperator()


def v(key: bytes, seq: int, value: bytes, exp: int | None = None):  # type: ignore[no-untyped-def]
    return (key, seq, VALUE, value, exp, None)


def t(key: bytes, seq: int):  # type: ignore[no-untyped-def]
    return (key, seq, TOMBSTONE, b"", None, None)


def m(key: bytes, seq: int, op: bytes):  # type: ignore[no-untyped-def]
    return (key, seq, MERGE, op, None, None)


def test_newest_value_wins() -> None:
    assert resolve_versions(b"k", [v(b"k", 5, b"new"), v(b"k", 3, b"old")], None) == b"new"


def test_tombstone_hides_older_values() -> None:
    assert resolve_versions(b"k", [t(b"k", 5), v(b"k", 3, b"old")], None) is None


def test_operands_apply_oldest_first_onto_value() -> None:
    rows = [m(b"k", 7, b"+2"), m(b"k", 6, b"+1"), v(b"k", 5, b"base"), m(b"k", 1, b"zz")]
    assert resolve_versions(b"k", rows, CONCAT) == b"base+1+2"


def test_operands_above_tombstone_fold_onto_nothing() -> None:
    assert resolve_versions(b"k", [m(b"k", 7, b"z"), t(b"k", 5), v(b"k", 1, b"x")], CONCAT) == b"z"


def test_operands_without_operator_name_the_key() -> None:
    with pytest.raises(MergeOperatorMissingError) as err:
        resolve_versions(b"\x00key", [m(b"\x00key", 2, b"x")], None)
    assert "006b6579" in str(err.value)


def test_expired_values_are_still_returned() -> None:
    assert resolve_versions(b"k", [v(b"k", 2, b"old-ttl", exp=1)], None) == b"old-ttl"


def test_resolve_rows_skips_deleted_and_merges_across_sources() -> None:
    a = [v(b"a", 9, b"A"), t(b"b", 9), m(b"c", 9, b"2")]
    b = [v(b"b", 1, b"B"), v(b"c", 2, b"1"), v(b"d", 1, b"D")]
    merged = list(merge_sources([a, b]))
    assert [(r[0], r[1]) for r in merged] == [(b"a", 9), (b"b", 9), (b"b", 1), (b"c", 9),
                                              (b"c", 2), (b"d", 1)]
    assert list(resolve_rows(merged, CONCAT)) == [(b"a", b"A"), (b"c", b"12"), (b"d", b"D")]


def test_merge_operator_lookup() -> None:
    assert isinstance(as_merge_operator("concat"), ConcatMergeOperator)
    assert as_merge_operator(lambda k, e, o: o).merge(b"k", None, b"x") == b"x"  # type: ignore[union-attr]
    with pytest.raises(InvalidArgumentError):
        as_merge_operator("nope")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]),
                          st.sampled_from([VALUE, TOMBSTONE, MERGE]),
                          st.binary(max_size=3)), max_size=30))
def test_resolution_matches_a_sequential_model(ops: list[tuple[bytes, int, bytes]]) -> None:
    model: dict[bytes, bytes | None] = {}
    rows = []
    for seq, (key, kind, val) in enumerate(ops, 1):
        if kind == VALUE:
            model[key] = val
        elif kind == TOMBSTONE:
            model[key] = None
            val = b""
        else:
            model[key] = (model.get(key) or b"") + val
        rows.append((key, seq, kind, val, None, None))
    # spread the rows over three "sources" round robin, each sorted
    sources = [sorted(rows[i::3], key=lambda r: (r[0], -r[1])) for i in range(3)]
    got = dict(resolve_rows(merge_sources(sources), CONCAT))
    assert got == {k: val for k, val in model.items() if val is not None}
