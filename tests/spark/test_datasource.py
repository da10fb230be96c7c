"""``spark.read.format("slatedb")`` on the shared local[2] session: every official-written
fixture equals ``DbReader`` on the same checkpoint (chispa), key filters are pushed down,
the temporary checkpoint is deleted after the read, bad input fails clearly, and the
export's route (``planned_frame``: planned on the driver, read in ``mapInArrow``) gives the
same partitions, schema and rows as the data source, for reads and for change reads."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StructField, StructType

import slatelib.spark
from slatelib import Db, DbReader, create_checkpoint, list_checkpoints
from slatelib.errors import InvalidArgumentError, InvalidDbStateError
from slatelib.ops.export.pin import READ_CHECKPOINT_NAME
from slatelib.spark.datasource import planned_frame
from slatelib.testing.clock import FakeClock
from tests.conftest import FIXTURE_NAMES, GOLDEN_DIR, load_expected
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.spark

KV = StructType([StructField("key", BinaryType(), False), StructField("value", BinaryType(), False)])


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One writable copy of the fixtures for this module (clones next to their source)."""
    dst = tmp_path_factory.mktemp("ds") / "fixtures"
    shutil.copytree(GOLDEN_DIR, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def merge_operator(name: str) -> str | None:
    return "concat" if load_expected(name).get("merge_operator") else None


def reader(spark: Any, root: Path, name: str, **options: str) -> Any:
    slatelib.spark.register(spark)
    r = (spark.read.format("slatedb").option("db", f"file://{root}/{name}")
         .option("store_root", f"file://{root}"))
    if (op := merge_operator(name)) is not None:
        r = r.option("merge_operator", op)
    for k, v in options.items():
        r = r.option(k, v)
    return r


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_equals_dbreader_on_the_same_checkpoint(spark: Any, fixtures: Path,
                                                        name: str) -> None:
    store = f"file://{fixtures}"
    cp = create_checkpoint(name, store, lifetime=3600)
    df = reader(spark, fixtures, name, checkpoint=str(cp.id), partitions="3",
                min_partition_bytes="1").load()
    with DbReader.open(name, store, checkpoint=cp.id, merge_operator=merge_operator(name)) as r:
        expected = spark.createDataFrame(list(r.scan()), KV)
    assert_df_equality(df, expected)
    live = {k.encode(): v.encode() for k, v in load_expected(name)["live"].items()}
    assert {bytes(x.key): bytes(x.value) for x in df.collect()} == live


def test_metadata_columns_and_utf8(spark: Any, fixtures: Path) -> None:
    df = reader(spark, fixtures, "ttl_merge", columns="all", decode="utf8").load()
    assert [f.name for f in df.schema.fields] == ["key", "value", "seq", "expire_ts",
                                                  "create_ts"]
    rows = {r.key: r for r in df.collect()}
    assert all(r.seq > 0 for r in rows.values())
    # expire_ts of a TTL row (the expired one is still returned, as 0.17 does)
    assert rows["ttl:wal:dead"].expire_ts is not None
    assert rows["ttl:wal:dead"].expire_ts < 1_000_000_000_000
    assert list(rows) == sorted(rows)


def test_key_filters_are_pushed_down_and_exact(spark: Any, fixtures: Path) -> None:
    df = reader(spark, fixtures, "basic", decode="utf8").load()
    got = df.filter((df.key >= "key:0040") & (df.key < "key:0050") & (df.value != "x"))
    plan = got._jdf.queryExecution().executedPlan().toString()
    assert "Filter NOT (value" in plan  # the value condition stays with Spark
    assert "key:0040" not in plan and "key:0050" not in plan  # the key ones are not re-evaluated
    with DbReader.open("basic", f"file://{fixtures}", mode="latest") as r:
        expected = [(k.decode(), v.decode()) for k, v in r.scan(b"key:0040", b"key:0050")]
    assert [(x.key, x.value) for x in got.collect()] == expected
    prefix = df.filter(df.key.startswith("big:"))
    assert [x.key for x in prefix.collect()] == ["big:0001"]
    ranged = reader(spark, fixtures, "basic", start="key:0290", end="hex:ff").load()
    assert [bytes(x.key) for x in ranged.collect()] == [b"key:0300"]


def test_temporary_checkpoint_is_deleted_after_the_read(spark: Any, fixtures: Path) -> None:
    store = f"file://{fixtures}"
    before = {c.id for c in list_checkpoints("codec_lz4", store)}
    df = reader(spark, fixtures, "codec_lz4", partitions="3", min_partition_bytes="1").load()
    assert df.count() == len(load_expected("codec_lz4")["live"])
    after = list_checkpoints("codec_lz4", store)
    assert {c.id for c in after} == before
    assert not [c for c in after if c.name == READ_CHECKPOINT_NAME]
    markers = fixtures / "codec_lz4" / "slatelib" / "reads"
    assert not [p for p in markers.rglob("*") if p.is_file()]


def test_unknown_checkpoint_is_refused(spark: Any, fixtures: Path) -> None:
    unknown = uuid.uuid4()
    with pytest.raises(Exception, match=f"checkpoint {unknown} not found"):
        reader(spark, fixtures, "basic", checkpoint=str(unknown)).load().collect()


def test_expired_checkpoint_is_refused(spark: Any, fixtures: Path) -> None:
    store = f"file://{fixtures}"
    cp = create_checkpoint("codec_zlib", store, lifetime=1,
                           clock=FakeClock(1_000_000_000_000))  # expired long ago
    with pytest.raises(Exception, match=f"checkpoint {cp.id} .* expired at"):
        reader(spark, fixtures, "codec_zlib", checkpoint=str(cp.id)).load().collect()


def test_missing_database_is_refused(spark: Any, tmp_path: Path) -> None:
    slatelib.spark.register(spark)
    df = spark.read.format("slatedb").option("db", f"file://{tmp_path}/nothing").load()
    with pytest.raises(Exception, match="nothing"):
        df.collect()
    assert not (tmp_path / "nothing" / "manifest").exists()


def test_bad_option_is_refused_naming_it(spark: Any, fixtures: Path) -> None:
    with pytest.raises(Exception, match="unknown slatedb option"):
        reader(spark, fixtures, "basic", colour="blue").load()


def _with_partition(df: Any) -> Any:
    return df.withColumn("partition", F.spark_partition_id())


def _same_as_the_data_source(spark: Any, options: dict[str, str]) -> Any:
    """``planned_frame`` and ``spark.read.format("slatedb")`` on the same options: the same
    schema, and the same rows in the same Spark partitions, in the same order."""
    slatelib.spark.register(spark)
    via_source = spark.read.format("slatedb").options(**options).load()
    planned = planned_frame(spark, options)
    assert planned.schema == via_source.schema
    assert_df_equality(_with_partition(planned), _with_partition(via_source))
    return planned


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_planned_frame_equals_the_data_source(spark: Any, fixtures: Path, name: str) -> None:
    store = f"file://{fixtures}"
    cp = create_checkpoint(name, store, lifetime=3600)
    options = {"db": f"{store}/{name}", "store_root": store, "checkpoint": str(cp.id),
               "partitions": "3", "min_partition_bytes": "1", "columns": "all"}
    if (op := merge_operator(name)) is not None:
        options["merge_operator"] = op
    df = _same_as_the_data_source(spark, options)
    live = {k.encode(): v.encode() for k, v in load_expected(name)["live"].items()}
    assert {bytes(x.key): bytes(x.value) for x in df.collect()} == live


def test_planned_frame_of_changes_and_of_an_empty_range(spark: Any, tmp_path: Path) -> None:
    store = f"file://{tmp_path}"
    with Db.open("db", store, writer_settings()) as w:
        for i in range(400):
            w.put(b"k%04d" % i, b"v%d" % i)
        w.flush()
    old = create_checkpoint("db", store, lifetime=3600)
    with Db.open("db", store, writer_settings()) as w:
        for i in range(0, 400, 3):
            w.put(b"k%04d" % i, b"w%d" % i)
        for i in range(1, 400, 7):
            w.delete(b"k%04d" % i)
        w.put(b"new", b"x")
    new = create_checkpoint("db", store, lifetime=3600)
    options = {"db": f"{store}/db", "checkpoint": str(new.id), "since_checkpoint": str(old.id),
               "partitions": "2", "min_partition_bytes": "1", "decode": "utf8"}
    changes = {(r._change, r.key) for r in _same_as_the_data_source(spark, options).collect()}
    assert ("upsert", "new") in changes and ("delete", "k0001") in changes
    assert ("upsert", "k0003") in changes and ("delete", "k0015") in changes
    # 134 overwrites, 19 of them deleted again, 57 deletes and one new key
    assert len(changes) == (134 - 19) + 57 + 1
    empty = _same_as_the_data_source(spark, {"db": f"{store}/db", "checkpoint": str(new.id),
                                             "start": "zz", "end": "zzz"})
    assert empty.count() == 0


def test_planned_frame_refuses_without_a_live_checkpoint(spark: Any, fixtures: Path) -> None:
    store = f"file://{fixtures}"
    before = {c.id for c in list_checkpoints("basic", store)}
    with pytest.raises(InvalidArgumentError, match="needs option checkpoint"):
        planned_frame(spark, {"db": f"{store}/basic"})
    unknown = uuid.uuid4()
    with pytest.raises(InvalidDbStateError, match=f"checkpoint {unknown} not found"):
        planned_frame(spark, {"db": f"{store}/basic", "checkpoint": str(unknown)})
    assert {c.id for c in list_checkpoints("basic", store)} == before
