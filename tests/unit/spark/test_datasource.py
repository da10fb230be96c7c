"""Which pushed-down filters the data source applies itself (no Spark session needed)."""

from __future__ import annotations

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    StringContains,
    StringStartsWith,
)

from slatelib.spark.datasource import SlateDbReader, key_condition
from slatelib.spark.options import ReadOptions


def test_key_conditions_are_taken_others_left_to_spark() -> None:
    assert key_condition(EqualTo(("key",), b"a")) == ("=", b"a")
    assert key_condition(GreaterThan(("key",), bytearray(b"a"))) == (">", b"a")
    assert key_condition(GreaterThanOrEqual(("key",), "é")) == (">=", "é".encode())
    assert key_condition(LessThan(("key",), b"z")) == ("<", b"z")
    assert key_condition(LessThanOrEqual(("key",), b"z")) == ("<=", b"z")
    assert key_condition(StringStartsWith(("key",), "ab")) == ("prefix", b"ab")
    assert key_condition(EqualTo(("value",), b"a")) is None
    assert key_condition(In(("key",), (b"a", b"b"))) is None
    assert key_condition(StringContains(("key",), "a")) is None
    assert key_condition(EqualTo(("key",), 3)) is None


def test_push_filters_returns_exactly_the_filters_it_cannot_apply() -> None:
    reader = SlateDbReader(ReadOptions.parse({"db": "file:///d"}))
    taken = GreaterThan(("key",), b"a")
    left = EqualTo(("value",), b"v")
    assert list(reader.pushFilters([taken, left])) == [left]
    assert reader.conditions == [(">", b"a")]
