"""Write batches: 0.17's replace/append rules, one row per key, TTLs, merge folding."""

from __future__ import annotations

import pytest

from slatelib.core.merge import ConcatMergeOperator
from slatelib.core.row import MERGE, TOMBSTONE, VALUE
from slatelib.errors import InvalidArgumentError, MergeOperatorMissingError
from slatelib.writer.batch import NO_EXPIRY, WriteBatch, batch_rows

NOW = 1_700_000_000_000
CONCAT = ConcatMergeOperator()


def rows(batch: WriteBatch, *, default_ttl: int | None = None, op: object = CONCAT) -> list:
    return batch_rows(batch, 7, NOW, default_ttl_ms=default_ttl, merge_operator=op)  # type: ignore[arg-type]


def test_rows_come_out_in_key_order_with_the_batch_seq_and_create_time() -> None:
    b = WriteBatch().put(b"b", b"2").put(b"a", b"1").delete(b"c")
    assert rows(b) == [
        (b"a", 7, VALUE, b"1", None, NOW),
        (b"b", 7, VALUE, b"2", None, NOW),
        (b"c", 7, TOMBSTONE, b"", None, NOW),
    ]
    assert len(b) == 3


def test_put_and_delete_replace_earlier_operations_on_the_key() -> None:
    b = WriteBatch().put(b"k", b"1").merge(b"k", b"x").delete(b"k").put(b"k", b"final")
    assert len(b) == 1
    assert rows(b) == [(b"k", 7, VALUE, b"final", None, NOW)]


def test_merges_fold_onto_the_put_before_them_into_one_value() -> None:
    b = WriteBatch().put(b"k", b"a").merge(b"k", b"b").merge(b"k", b"c")
    assert rows(b) == [(b"k", 7, VALUE, b"abc", None, NOW)]


def test_merges_without_a_base_stay_one_merge_operand() -> None:
    b = WriteBatch().merge(b"k", b"x").merge(b"k", b"y")
    assert rows(b) == [(b"k", 7, MERGE, b"xy", None, NOW)]


def test_merge_after_delete_becomes_a_value_of_the_operands() -> None:
    b = WriteBatch().delete(b"k").merge(b"k", b"z")
    assert rows(b) == [(b"k", 7, VALUE, b"z", None, NOW)]


def test_ttl_and_default_ttl_and_no_expiry() -> None:
    b = WriteBatch().put(b"a", b"1", ttl=50).put(b"b", b"2").put(b"c", b"3", NO_EXPIRY)
    b.put(b"d", b"4", expire_at_ms=123)
    got = {r[0]: r[4] for r in rows(b, default_ttl=1000)}
    assert got == {b"a": NOW + 50, b"b": NOW + 1000, b"c": None, b"d": 123}
    assert rows(WriteBatch().delete(b"x"), default_ttl=1000)[0][4] is None


def test_merges_with_different_ttls_on_one_key_are_refused() -> None:
    b = WriteBatch().merge(b"k", b"a", ttl=10).merge(b"k", b"b", ttl=20)
    with pytest.raises(InvalidArgumentError, match="share one TTL"):
        rows(b)


def test_a_batch_with_merges_needs_a_merge_operator_naming_the_key() -> None:
    b = WriteBatch().put(b"a", b"1").merge(b"m", b"x")
    with pytest.raises(MergeOperatorMissingError) as info:
        rows(b, op=None)
    assert info.value.key == b"m"


@pytest.mark.parametrize("bad", [
    lambda b: b.put(b"", b"v"),
    lambda b: b.put("str", b"v"),
    lambda b: b.put(b"k", b"v", ttl=-1),
    lambda b: b.put(b"k", b"v", ttl=True),
    lambda b: b.put(b"k", b"v", ttl=5, expire_at_ms=9),
    lambda b: b.merge(b"k", 3),
    lambda b: b.delete(b""),
])
def test_invalid_operations_are_rejected_at_once(bad: object) -> None:
    with pytest.raises(InvalidArgumentError):
        bad(WriteBatch())  # type: ignore[operator]


def test_an_empty_batch_is_refused_when_committed() -> None:
    with pytest.raises(InvalidArgumentError, match="at least one"):
        rows(WriteBatch())


def test_size_tracks_replaced_operations() -> None:
    b = WriteBatch().put(b"k", b"1234").put(b"k", b"1")
    assert b.size_bytes == 2
    b.merge(b"k", b"xy")
    assert b.size_bytes == 5
