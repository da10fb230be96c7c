"""Which pushed-down filters the data source applies itself, and the planned read's function
(:class:`PlannedRead`) over a fixture copy (no Spark session needed)."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
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

from slatelib import create_checkpoint
from slatelib.errors import InvalidArgumentError
from slatelib.spark.datasource import PlannedRead, SlateDbReader, key_condition
from slatelib.spark.options import ReadOptions
from tests.conftest import GOLDEN_DIR


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


def _ids(*ids: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int64())], names=["id"])


def test_planned_read_reads_the_partitions_its_rows_name(tmp_path: Path) -> None:
    shutil.copytree(GOLDEN_DIR / "basic", tmp_path / "basic")
    for p in tmp_path.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    cp = create_checkpoint("basic", f"file://{tmp_path}", lifetime=3600)
    reader = SlateDbReader(ReadOptions.parse({
        "db": f"file://{tmp_path}/basic", "checkpoint": str(cp.id), "partitions": "3",
        "min_partition_bytes": "1"}))
    parts = list(reader.partitions())
    assert len(parts) >= 2
    read = pickle.loads(pickle.dumps(PlannedRead(reader, parts)))  # as Spark ships it

    def table(batches: list[pa.RecordBatch]) -> pa.Table:
        return pa.Table.from_batches(batches, schema=reader.schema)

    got = table(list(read(iter([_ids(1), _ids(), _ids(0)]))))
    expected = table([*reader.read(parts[1]), *reader.read(parts[0])])
    assert got.num_rows > 0 and got.equals(expected)
    everything = table([b for p in parts for b in reader.read(p)])
    assert table(list(read(iter([_ids(*range(len(parts)))])))).equals(everything)
    with pytest.raises(InvalidArgumentError, match=f"partition index {len(parts)} outside"):
        list(read(iter([_ids(len(parts))])))
