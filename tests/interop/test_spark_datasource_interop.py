"""The ``slatedb`` Spark data source and the export against the official 0.17.0 reader:
every official-written fixture read by Spark equals the official ``DbReader``'s scan, and an
incremental Delta export after official writes and an official compaction equals a fresh
full export and the official scan (what a reviewer will try)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql.types import BinaryType, StructField, StructType

import slatelib.spark
from slatelib.config import Settings
from slatelib.jobs.export import build_parser, run
from tests.conftest import FIXTURE_NAMES, load_expected
from tests.interop.official import (
    Concat,
    DbSettings,
    Delete,
    FixedPrefix,
    Merge,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
)

pytestmark = [pytest.mark.interop, pytest.mark.spark]

KV = StructType([StructField("key", BinaryType(), False), StructField("value", BinaryType(), False)])


def official_scan(root: Path, name: str, *, merge: bool, segments: bool = False,
                  ) -> list[tuple[bytes, bytes]]:
    with OfficialReader.open(root, name, merge_operator=Concat() if merge else None,
                             segment_extractor=FixedPrefix(4) if segments else None) as r:
        return r.scan()


def test_every_fixture_equals_the_official_scan(spark: Any, fixture_copy: Path) -> None:
    slatelib.spark.register(spark)
    for name in FIXTURE_NAMES:
        expected = load_expected(name)
        merge = bool(expected.get("merge_operator"))
        r = (spark.read.format("slatedb").option("db", f"file://{fixture_copy}/{name}")
             .option("store_root", f"file://{fixture_copy}").option("partitions", "2")
             .option("min_partition_bytes", "1"))
        if merge:
            r = r.option("merge_operator", "concat")
        df = r.load()  # a temporary checkpoint of the latest state
        official = official_scan(fixture_copy, name, merge=merge,
                                 segments=bool(expected.get("segment_extractor")))
        assert_df_equality(df, spark.createDataFrame(official, KV))


def _export(spark: Any, db: str, to: str, *argv: str) -> dict[str, Any]:
    args = build_parser().parse_args(["--db", db, "--to", to, "--format", "delta",
                                      "--merge-operator", "concat", "--partitions", "2", *argv])
    report, code = run(spark, Settings(), args)
    assert code == 0, report
    entry: dict[str, Any] = report["databases"][0]
    return entry


def _content(uri: str) -> list[tuple[bytes, bytes]]:
    return sorted((r["key"], r["value"]) for r in DeltaTable(uri).to_pyarrow_table().to_pylist())


def test_incremental_export_after_official_writes_and_compaction(spark: Any,
                                                                 tmp_path: Path) -> None:
    db, to, fresh = f"file://{tmp_path}/db", f"{tmp_path}/t", f"{tmp_path}/fresh"
    with OfficialDb.open(tmp_path, "db", DbSettings(block_size=1024),
                         merge_operator=Concat()) as w:
        w.write([Put(b"k%04d" % i, b"v%d" % i) for i in range(400)])
        w.flush_memtable()
        w.write([Merge(b"k%04d" % i, b"+m") for i in range(0, 400, 9)])
        w.flush_memtable()
        w.write([Put(b"wal:%d" % i, b"w") for i in range(5)])
        w.flush_wal()
        first = _export(spark, db, to)
        assert _content(to) == official_scan(tmp_path, "db", merge=True)
        w.write([Put(b"k%04d" % i, b"x%d" % i) for i in range(0, 400, 4)])
        w.write([Delete(b"k%04d" % i) for i in range(1, 400, 6)] + [Delete(b"wal:0")])
        w.write([Merge(b"k0009", b"+again"), Merge(b"new", b"n")])
        w.flush_memtable()
        OfficialAdmin(tmp_path, "db").compact()  # every L0 into a sorted run
        w.write([Put(b"after", b"compaction"), Delete(b"k0010")])
        w.flush_wal()
        inc = _export(spark, db, to, "--mode", "incremental")
    assert inc["since"] == first["checkpoint"]["id"]
    assert inc["changes"]["upserts"] > 0 and inc["changes"]["deletes"] > 0
    full = _export(spark, db, fresh, "--checkpoint", inc["checkpoint"]["id"])
    assert full["rows"] == len(_content(to))
    assert _content(to) == _content(fresh) == official_scan(tmp_path, "db", merge=True)
