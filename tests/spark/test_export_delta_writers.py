"""jobs/export.py's two Delta writers against each other, and delta-spark's own bookkeeping:
tables written by delta-spark and delta-rs from one checkpoint hold equal DataFrames
(chispa), each reads the other's tables, incremental exports carry on across writers, and a
delta-spark failure leaves the table, the checkpoints and the session's conf as they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql import functions as F

import slatelib.spark.export as spark_export
from slatelib import Db, create_checkpoint, list_checkpoints
from slatelib.ops.export.pin import EXPORT_CHECKPOINT_NAME
from slatelib.spark.delta_spark import SKIP_EMPTY_COMMITS_CONF, USER_METADATA_CONF
from tests.spark.test_export_job import delta_content, export, scan
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.spark


def spark_table(spark: Any, uri: str) -> Any:
    return spark.read.format("delta").load(uri).orderBy("key")


def ours(store: str) -> list[str]:
    return [str(c.id) for c in list_checkpoints("db", store) if c.name == EXPORT_CHECKPOINT_NAME]


DELTA_SPARK = ("--format", "delta", "--delta-writer", "delta-spark")


def local_db(tmp_path: Path, keys: int) -> tuple[str, str, str]:
    """A database of ``keys`` keys written by slatelib under ``tmp_path``: its store URL,
    its URL, and a Delta target path beside it."""
    store, db, to = f"file://{tmp_path}", f"file://{tmp_path}/db", f"{tmp_path}/delta"
    with Db.open("db", store, writer_settings()) as w:
        for i in range(keys):
            w.put(b"k%04d" % i, b"v%d" % i)
    return store, db, to


def test_both_writers_make_equal_tables_that_read_each_other_and_carry_on_incrementally(
        spark: Any, tmp_path: Path) -> None:
    store, db = f"file://{tmp_path}", f"file://{tmp_path}/db"
    by_spark, by_rs = f"{tmp_path}/by-spark", f"{tmp_path}/by-rs"
    with Db.open("db", store, writer_settings()) as w:
        for i in range(400):
            w.put(b"k%04d" % i, b"v%d" % i)
    cp = str(create_checkpoint("db", store).id)
    for to, writer in ((by_spark, "delta-spark"), (by_rs, "delta-rs")):
        report, code = export(spark, db, to, "--format", "delta", "--checkpoint", cp,
                              "--delta-writer", writer)
        assert code == 0, report
        assert report["databases"][0]["writer"] == writer
    # (a) equal DataFrames, read by delta-spark: its own table and delta-rs' table
    assert spark_table(spark, by_spark).count() == 400
    assert_df_equality(spark_table(spark, by_spark), spark_table(spark, by_rs),
                       ignore_nullable=True)
    # (b) delta-rs reads delta-spark's table: the same rows
    assert delta_content(by_spark) == delta_content(by_rs) == scan(store, "db")
    # more writes; then each table continues with the other writer's incremental export
    with Db.open("db", store, writer_settings()) as w:
        for i in range(0, 400, 3):
            w.put(b"k%04d" % i, b"w%d" % i)
        for i in range(1, 400, 4):
            w.delete(b"k%04d" % i)
        w.put(b"new", b"key")
    before, expected = delta_content(by_rs), scan(store, "db")
    deletes = len(set(before) - set(expected))
    upserts = sum(1 for k, v in expected.items() if before.get(k) != v)
    assert (upserts, deletes) == (102, 100)
    for to, writer in ((by_spark, "delta-rs"), (by_rs, "delta-spark")):
        report, code = export(spark, db, to, "--format", "delta", "--mode", "incremental",
                              "--delta-writer", writer)
        assert code == 0, report
        inc = report["databases"][0]
        assert inc["writer"] == writer and inc["since"] == cp and inc["delta_version"] == 1
        assert inc["changes"] == {"upserts": upserts, "deletes": deletes}
        assert inc["previous_checkpoint"] == {"id": cp, "released": False}  # not ours
    assert_df_equality(spark_table(spark, by_spark), spark_table(spark, by_rs),
                       ignore_nullable=True)
    assert delta_content(by_spark) == delta_content(by_rs) == expected


def test_delta_spark_failures_leave_table_checkpoints_and_conf_unchanged(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, db, to = local_db(tmp_path, 300)
    use = DELTA_SPARK
    # a value the session had before is back after the export, which used its own
    spark.conf.set(USER_METADATA_CONF, "someone else's")
    try:
        report, code = export(spark, db, to, *use)
        assert code == 0, report
        assert spark.conf.get(USER_METADATA_CONF) == "someone else's"
    finally:
        spark.conf.unset(USER_METADATA_CONF)
    first = report["databases"][0]["checkpoint"]["id"]
    assert first in (DeltaTable(to).history(1)[0]["userMetadata"] or "")
    with Db.open("db", store, writer_settings()) as w:
        for i in range(0, 300, 2):
            w.put(b"k%04d" % i, b"w%d" % i)
        w.delete(b"k0001")
    before = delta_content(to)

    def unchanged() -> None:
        assert DeltaTable(to).version() == 0 and delta_content(to) == before
        assert ours(store) == [first]  # the failed run's checkpoint was deleted
        assert spark.conf.get(USER_METADATA_CONF, None) is None
        assert spark.conf.get(SKIP_EMPTY_COMMITS_CONF, None) is None

    real_frame = spark_export._Run.frame
    # every change row twice: Delta's MERGE fails (several source rows for one target row)
    monkeypatch.setattr(spark_export._Run, "frame",
                        lambda self, new, since: real_frame(self, new, since).unionAll(
                            real_frame(self, new, since)))
    report, code = export(spark, db, to, *use, "--mode", "incremental")
    assert code != 0
    assert "multiple source rows matched" in report["databases"][0]["error"]["message"].lower()
    unchanged()
    # a full overwrite failing in its tasks, after some of them wrote their files
    monkeypatch.setattr(spark_export._Run, "frame",
                        lambda self, new, since: real_frame(self, new, since).withColumn(
                            "value", F.when(F.col("key") == F.lit(b"k0290"),
                                            F.raise_error(F.lit("injected failure"))
                                            .cast("binary")).otherwise(F.col("value"))))
    report, code = export(spark, db, to, *use)
    assert code != 0 and "injected failure" in report["databases"][0]["error"]["message"]
    unchanged()
    monkeypatch.undo()
    report, code = export(spark, db, to, *use, "--mode", "incremental")
    assert code == 0, report
    assert delta_content(to) == scan(store, "db") and DeltaTable(to).version() == 1


def test_delta_spark_incremental_passes_maintenance_and_refuses_foreign_writes(
        spark: Any, tmp_path: Path) -> None:
    from delta.tables import DeltaTable as SparkDeltaTable

    store, db, to = f"file://{tmp_path}", f"file://{tmp_path}/db", f"{tmp_path}/delta"
    use = ("--format", "delta", "--delta-writer", "delta-spark")
    with Db.open("db", store, writer_settings()) as w:
        for i in range(200):
            w.put(b"k%04d" % i, b"v%d" % i)
    spark.conf.set("spark.sql.files.maxRecordsPerFile", "50")
    try:
        report, code = export(spark, db, to, *use)
    finally:
        spark.conf.unset("spark.sql.files.maxRecordsPerFile")
    assert code == 0, report
    assert report["databases"][0]["files"] >= 4  # something for OPTIMIZE to compact
    SparkDeltaTable.forPath(spark, to).optimize().executeCompaction()
    spark.sql(f"ALTER TABLE delta.`{to}` SET TBLPROPERTIES ('slatelib.test' = 'yes')")
    ops = [r["operation"] for r in SparkDeltaTable.forPath(spark, to).history().collect()]
    assert ops == ["SET TBLPROPERTIES", "OPTIMIZE", "WRITE"]
    with Db.open("db", store, writer_settings()) as w:
        w.put(b"k0005", b"changed")
    report, code = export(spark, db, to, *use, "--mode", "incremental")
    assert code == 0, report
    assert report["databases"][0]["changes"] == {"upserts": 1, "deletes": 0}
    assert delta_content(to) == scan(store, "db")
    # someone else's write: the table is no longer a checkpoint's view
    spark.createDataFrame([(b"zz", b"foreign")], "key binary, value binary") \
        .write.format("delta").mode("append").save(to)
    report, code = export(spark, db, to, *use, "--mode", "incremental")
    assert code != 0
    assert "version 4 (WRITE) was written by something other" in \
        report["databases"][0]["error"]["message"]
    # --mode auto with a table there is incremental, so it refuses too
    report, code = export(spark, db, to, *use, "--mode", "auto")
    assert code != 0 and "version 4 (WRITE)" in report["databases"][0]["error"]["message"]


def test_delta_writer_choice(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, db = f"file://{tmp_path}", f"file://{tmp_path}/db"
    with Db.open("db", store, writer_settings()) as w:
        w.put(b"k", b"v")
    auto = f"file://{tmp_path}/auto"  # a URL, as production names targets
    report, code = export(spark, db, auto, "--format", "delta")
    assert code == 0 and report["databases"][0]["writer"] == "delta-spark"
    with Db.open("db", store, writer_settings()) as w:
        w.put(b"k2", b"v2")
    report, code = export(spark, db, auto, "--format", "delta", "--mode", "auto")
    assert code == 0, report
    entry = report["databases"][0]
    assert entry["mode"] == "incremental" and entry["changes"] == {"upserts": 1, "deletes": 0}
    assert delta_content(auto) == scan(store, "db")
    # without delta-spark's classes: auto falls back, delta-spark refuses clearly
    monkeypatch.setattr(spark_export.delta_spark, "available", lambda _spark: False)
    report, code = export(spark, db, f"{tmp_path}/rs", "--format", "delta")
    assert code == 0 and report["databases"][0]["writer"] == "delta-rs"
    report, code = export(spark, db, f"{tmp_path}/forced", "--format", "delta",
                          "--delta-writer", "delta-spark")
    assert code == 2
    assert "io.delta.tables.DeltaTable is not on the driver's classpath" in \
        report["databases"][0]["error"]["message"]
    assert not (tmp_path / "forced").exists()


def test_the_merge_runs_without_broadcast_joins_and_restores_the_sessions_setting(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.spark import delta_spark

    store, db, to = local_db(tmp_path, 50)
    use = DELTA_SPARK
    report, code = export(spark, db, to, *use)
    assert code == 0, report
    with Db.open("db", store, writer_settings()) as w:
        w.put(b"k0003", b"new")
        w.delete(b"k0004")
    seen: list[str | None] = []
    real_table = delta_spark._table

    def spying_table(session: Any, uri: str) -> Any:
        seen.append(session.conf.get("spark.sql.autoBroadcastJoinThreshold", None))
        return real_table(session, uri)

    monkeypatch.setattr(delta_spark, "_table", spying_table)
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "12345")
    try:
        report, code = export(spark, db, to, *use, "--mode", "incremental")
        assert code == 0, report
        assert report["databases"][0]["changes"] == {"upserts": 1, "deletes": 1}
        assert "-1" in seen  # the MERGE's table was opened with broadcast joins off
        assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold") == "12345"
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
