"""jobs/export.py on the shared local[2] session: Parquet and Delta exports read back with
deltalake and Spark's Parquet reader, incremental exports after overwrites, deletes, merges
and a compaction (checked against a fresh full export), and bad input refused with nothing
committed. Every Delta test runs with both writers (``--delta-writer delta-spark`` and
``delta-rs``); tests/spark/test_export_delta_writers.py checks them against each other."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql.types import BinaryType, StructField, StructType

from slatelib import Db, DbReader, create_checkpoint, delete_checkpoint, list_checkpoints
from slatelib.config import Settings
from slatelib.errors import StorageError
from slatelib.jobs.export import build_parser, run
from slatelib.ops.compaction import run_compaction
from slatelib.ops.export.arrow_rows import arrow_schema
from slatelib.ops.export.files import CHANGES_PREFIX
from slatelib.ops.export.pin import EXPORT_CHECKPOINT_NAME
from slatelib.testing.clock import FakeClock
from tests.conftest import GOLDEN_DIR, load_expected
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.spark

KV = StructType([StructField("key", BinaryType(), False), StructField("value", BinaryType(), False)])
WRITERS = ("delta-spark", "delta-rs")
RS_DELTA = ("--format", "delta", "--delta-writer", "delta-rs")


def export(spark: Any, db: str, to: str, *argv: str) -> tuple[dict[str, Any], int]:
    args = build_parser().parse_args(["--db", db, "--to", to, "--partitions", "2", *argv])
    return run(spark, Settings(), args)


def delta_content(uri: str) -> dict[bytes, bytes]:
    rows = DeltaTable(uri).to_pyarrow_table().to_pylist()
    out = {r["key"]: r["value"] for r in rows}
    assert len(out) == len(rows)  # one row per key
    return out


def delta_content_rows(uri: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = DeltaTable(uri).to_pyarrow_table().to_pylist()
    return rows


def scan(store: str, path: str) -> dict[bytes, bytes]:
    with DbReader.open(path, store, mode="latest", merge_operator="concat") as r:
        return dict(r.scan())


@pytest.fixture
def basic(tmp_path: Path) -> Path:
    dst = tmp_path / "fx"
    shutil.copytree(GOLDEN_DIR / "basic", dst / "basic")
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def test_parquet_export_of_an_official_fixture(spark: Any, basic: Path, tmp_path: Path) -> None:
    to = f"file://{tmp_path}/pq"
    report, code = export(spark, f"file://{basic}/basic", to, "--format", "parquet")
    assert code == 0, report
    entry = report["databases"][0]
    live = {k.encode(): v.encode() for k, v in load_expected("basic")["live"].items()}
    assert entry["rows"] == len(live) == report["totals"]["rows"]
    assert entry["bytes"] > 0 and entry["checkpoint"]["manifest_id"] > 0
    assert report["headline"].startswith(f"exported {len(live)} rows")
    got = spark.read.parquet(to)
    assert {bytes(r.key): bytes(r.value) for r in got.collect()} == live
    # a Parquet export does not keep its checkpoint
    assert not [c for c in list_checkpoints("basic", f"file://{basic}")
                if c.name == EXPORT_CHECKPOINT_NAME]


def test_parquet_export_with_the_arrow_writer(spark: Any, basic: Path, tmp_path: Path) -> None:
    to = f"file://{tmp_path}/pq"
    (tmp_path / "pq").mkdir()
    (tmp_path / "pq" / "stale.parquet").write_bytes(b"replaced by the overwrite")
    report, code = export(spark, f"file://{basic}/basic", to, "--format", "parquet",
                          "--parquet-writer", "arrow")
    assert code == 0, report
    entry = report["databases"][0]
    live = {k.encode(): v.encode() for k, v in load_expected("basic")["live"].items()}
    assert entry["rows"] == len(live) and entry["files"] >= 1 and entry["bytes"] > 0
    assert entry["writer"] == "arrow-parquet"
    names = sorted(p.name for p in (tmp_path / "pq").iterdir())
    assert names[0] == "_SUCCESS"
    assert all(re.fullmatch(r"part-\d{5}-[0-9a-f]{16}\.snappy\.parquet", n) for n in names[1:])
    assert not (tmp_path / "pq" / "stale.parquet").exists()
    assert pq.read_table(tmp_path / "pq").schema.equals(arrow_schema(("key", "value")))
    got = spark.read.parquet(to)
    assert {bytes(r.key): bytes(r.value) for r in got.collect()} == live
    assert not [c for c in list_checkpoints("basic", f"file://{basic}")
                if c.name == EXPORT_CHECKPOINT_NAME]
    report, code = export(spark, f"file://{basic}/basic", to, "--format", "parquet",
                          "--parquet-writer", "arrow", "--mode", "append")
    assert code == 0, report
    assert spark.read.parquet(to).count() == 2 * len(live)


def commit_adds(uri: str, version: int) -> tuple[int, int]:
    """(files, bytes) of the add actions of one commit of a local Delta table."""
    log = Path(uri.removeprefix("file://")) / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    adds = [a["add"] for a in actions if "add" in a]
    return len(adds), sum(int(a["size"]) for a in adds)


@pytest.mark.parametrize("writer", WRITERS)
def test_delta_full_and_incremental_exports(spark: Any, tmp_path: Path, writer: str) -> None:
    store, db = f"file://{tmp_path}", f"file://{tmp_path}/db"
    to, fresh = f"{tmp_path}/delta", f"{tmp_path}/fresh"
    use = ("--delta-writer", writer)
    with Db.open("db", store, writer_settings(), merge_operator="concat") as w:
        for i in range(600):
            w.put(b"k%04d" % i, b"v%d" % i)
        w.flush()
        for i in range(0, 600, 7):
            w.merge(b"k%04d" % i, b"+m")
    report, code = export(spark, db, to, "--format", "delta", "--merge-operator", "concat", *use)
    assert code == 0, report
    first = report["databases"][0]
    assert first["writer"] == writer and first["delta_version"] == 0
    assert delta_content(to) == scan(store, "db")
    assert first["rows"] == 600
    if writer == "delta-spark":  # the report's counts are what the commit added
        assert (first["files"], first["bytes"]) == commit_adds(to, 0)
    # the Delta table's files, read by Spark's Parquet reader
    files = DeltaTable(to).file_uris()
    expected = spark.createDataFrame(sorted(scan(store, "db").items()), KV)
    assert_df_equality(spark.read.parquet(*files).orderBy("key"), expected,
                       ignore_nullable=True)
    # more writes, a compaction, more writes; then an incremental export
    with Db.open("db", store, writer_settings(), merge_operator="concat") as w:
        for i in range(0, 600, 3):
            w.put(b"k%04d" % i, b"w%d" % i)
        for i in range(1, 600, 5):
            w.delete(b"k%04d" % i)
        w.merge(b"k0007", b"+again")
    settings = replace(Settings(), compaction=replace(Settings().compaction,
                                                      merge_operator="concat"))
    assert run_compaction("db", store, settings=settings, policy="full",
                          parallelism=2).to_dict()["status"] == "committed"
    with Db.open("db", store, writer_settings(), merge_operator="concat") as w:
        w.put(b"new", b"key")
        w.delete(b"k0002")
    before = delta_content(to)
    report, code = export(spark, db, to, "--format", "delta", "--mode", "incremental",
                          "--merge-operator", "concat", *use)
    assert code == 0, report
    inc = report["databases"][0]
    assert inc["since"] == first["checkpoint"]["id"] and inc["delta_version"] == 1
    expected = scan(store, "db")
    deleted = set(before) - set(expected)
    upserted = {k for k in expected if before.get(k) != expected[k]}
    assert inc["changes"] == {"upserts": len(upserted), "deletes": len(deleted)}
    assert inc["rows"] == len(upserted) + len(deleted) and len(deleted) > 100
    if writer == "delta-spark":
        assert (inc["files"], inc["bytes"]) == commit_adds(to, 1) and inc["files"] > 0
        assert inc["merge"]["numSourceRows"] == inc["rows"]
    assert inc["previous_checkpoint"] == {"id": first["checkpoint"]["id"], "released": True}
    ours = [c for c in list_checkpoints("db", store) if c.name == EXPORT_CHECKPOINT_NAME]
    assert [str(c.id) for c in ours] == [inc["checkpoint"]["id"]]
    # the incremental result equals a fresh full export of the same checkpoint
    report, code = export(spark, db, fresh, "--format", "delta", "--merge-operator", "concat",
                          "--checkpoint", inc["checkpoint"]["id"], *use)
    assert code == 0, report
    assert delta_content(to) == delta_content(fresh) == expected
    assert_df_equality(spark.read.format("delta").load(to), spark.read.format("delta")
                       .load(fresh), ignore_row_order=True, ignore_nullable=True)
    # nothing changed since: a commit all the same, recording the new checkpoint
    report, code = export(spark, db, to, "--format", "delta", "--mode", "incremental",
                          "--merge-operator", "concat", *use)
    assert code == 0, report
    again = report["databases"][0]
    assert again["rows"] == 0 and again["changes"] == {"upserts": 0, "deletes": 0}
    assert again["delta_version"] == 2 and again["since"] == inc["checkpoint"]["id"]
    assert again["previous_checkpoint"] == {"id": inc["checkpoint"]["id"], "released": True}
    assert delta_content(to) == expected
    if writer == "delta-spark":
        assert (again["files"], again["bytes"]) == commit_adds(to, 2) == (0, 0)


def _refused(spark: Any, db: str, to: str, *argv: str) -> dict[str, Any]:
    report, code = export(spark, db, to, *argv)
    assert code != 0
    return report["databases"][0]


@pytest.mark.parametrize("writer", WRITERS)
def test_bad_input_is_refused_and_nothing_is_committed(spark: Any, basic: Path,
                                                       tmp_path: Path, writer: str) -> None:
    db, store = f"file://{basic}/basic", f"file://{basic}"
    use = ("--delta-writer", writer)
    target = tmp_path / "t"
    before = {c.id for c in list_checkpoints("basic", store)}
    unknown = str(uuid.uuid4())
    e = _refused(spark, db, str(target), "--format", "delta", "--checkpoint", unknown, *use)
    assert e["status"] == "data_error" and f"checkpoint {unknown} not found" in \
        e["error"]["message"]
    cp = create_checkpoint("basic", store, lifetime=1, clock=FakeClock(1_000_000_000_000))
    e = _refused(spark, db, str(target), "--format", "parquet", "--checkpoint", str(cp.id))
    assert "expired at" in e["error"]["message"]
    e = _refused(spark, f"file://{tmp_path}/none/db", str(target), "--format", "delta", *use)
    assert e["status"] == "data_error" and "none/db" in e["error"]["message"]
    assert not target.exists()
    (target / "data").mkdir(parents=True)
    (target / "data" / "x.csv").write_text("1,2\n")
    e = _refused(spark, db, str(target), "--format", "delta", *use)
    assert e["status"] == "invalid_input" and "not a Delta table" in e["error"]["message"]
    assert sorted(p.name for p in target.rglob("*")) == ["data", "x.csv"]
    e = _refused(spark, db, str(tmp_path / "absent"), "--format", "delta", "--mode",
                 "incremental", *use)
    assert "no Delta table there" in e["error"]["message"]
    created = {c.id for c in list_checkpoints("basic", store)} - before - {cp.id}
    assert created == set()  # every refusal left no checkpoint behind


@pytest.mark.parametrize("writer", WRITERS)
def test_incremental_refuses_when_the_last_exports_checkpoint_is_gone(
        spark: Any, basic: Path, tmp_path: Path, writer: str) -> None:
    db, store, to = f"file://{basic}/basic", f"file://{basic}", f"{tmp_path}/d"
    use = ("--delta-writer", writer)
    report, code = export(spark, db, to, "--format", "delta", *use)
    assert code == 0, report
    cp = report["databases"][0]["checkpoint"]["id"]
    assert delete_checkpoint("basic", store, cp)
    e = _refused(spark, db, to, "--format", "delta", "--mode", "incremental", *use)
    assert e["status"] == "data_error" and f"checkpoint {cp} not found" in e["error"]["message"]
    assert DeltaTable(to).version() == 0
    assert not [c for c in list_checkpoints("basic", store) if c.name == EXPORT_CHECKPOINT_NAME]
    # after an append the table is not a checkpoint's view: incremental refuses too
    report, code = export(spark, db, to, "--format", "delta", "--mode", "append", *use)
    assert code == 0, report
    assert report["databases"][0]["delta_version"] == 1
    assert len(delta_content_rows(to)) == 2 * report["databases"][0]["rows"]
    e = _refused(spark, db, to, "--format", "delta", "--mode", "incremental", *use)
    assert "was an append" in e["error"]["message"]
    assert json.loads(json.dumps(report))["databases"][0]["mode"] == "append"


def _staging_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith(CHANGES_PREFIX))


def test_incremental_staging_is_removed_in_every_outcome_and_a_stale_one_is_ignored(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """delta-rs incremental: the changes Spark stages in ``_slatelib-changes-<id>/`` are
    deleted whether the merge fails, is interrupted or succeeds, a failed merge commits
    nothing, and a stale staging folder (a killed run's) changes nothing."""
    import slatelib.spark.export as spark_export

    store, db, root = f"file://{tmp_path}", f"file://{tmp_path}/db", tmp_path / "delta"
    to = str(root)
    with Db.open("db", store, writer_settings()) as w:
        for i in range(300):
            w.put(b"k%04d" % i, b"v%d" % i)
    report, code = export(spark, db, to, *RS_DELTA)
    assert code == 0, report
    first = report["databases"][0]["checkpoint"]["id"]
    with Db.open("db", store, writer_settings()) as w:
        for i in range(0, 300, 2):
            w.put(b"k%04d" % i, b"w%d" % i)
        for i in range(1, 300, 9):
            w.delete(b"k%04d" % i)
    before = delta_content(to)

    def unchanged() -> None:
        assert DeltaTable(to).version() == 0 and delta_content(to) == before
        assert _staging_dirs(root) == []
        ours = [str(c.id) for c in list_checkpoints("db", store)
                if c.name == EXPORT_CHECKPOINT_NAME]
        assert ours == [first]  # the failed run's checkpoint was deleted, the last kept

    # the staged changes fail after one batch: read into the merge's table (the default),
    # and inside delta-rs' merge streaming them (streamed_exec=True)
    real = spark_export.read_staged
    real_merge = spark_export.deltars.merge_changes

    def failing(uri: str, files: Any, schema: Any, **_: Any) -> Any:
        batches = iter(real(uri, files, schema, batch_rows=16))

        def gen() -> Any:
            yield next(batches)
            raise OSError("injected failure in the merge")

        return pa.RecordBatchReader.from_batches(schema, gen())

    monkeypatch.setattr(spark_export, "read_staged", failing)
    e = _refused(spark, db, to, *RS_DELTA, "--mode", "incremental")
    assert "injected failure in the merge" in e["error"]["message"]
    unchanged()
    monkeypatch.setattr(spark_export.deltars, "merge_changes",
                        lambda *a, **k: real_merge(*a, **k, streamed_exec=True))
    e = _refused(spark, db, to, *RS_DELTA, "--mode", "incremental")
    assert "injected failure in the merge" in e["error"]["message"]
    unchanged()
    monkeypatch.undo()
    # interrupted during the merge (Ctrl-C)
    def interrupted(*_: Any, **__: Any) -> Any:
        assert len(_staging_dirs(root)) == 1  # staged while the merge runs
        raise KeyboardInterrupt

    monkeypatch.setattr(spark_export.deltars, "merge_changes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export(spark, db, to, *RS_DELTA, "--mode", "incremental")
    unchanged()
    monkeypatch.undo()
    # reading back what Spark staged fails
    def unreadable(*_: Any, **__: Any) -> Any:
        raise StorageError("injected failure listing the staged files")

    monkeypatch.setattr(spark_export, "staged_files", unreadable)
    e = _refused(spark, db, to, *RS_DELTA, "--mode", "incremental")
    assert "injected failure listing" in e["error"]["message"]
    unchanged()
    monkeypatch.undo()
    # a killed run's staging folder: valid change files (deleting every key) that must not
    # be applied, and a corrupt one
    stale = root / f"{CHANGES_PREFIX}0123456789abcdef"
    stale.mkdir()
    pq.write_table(pa.table({"_change": ["delete"] * 300,
                             "key": [b"k%04d" % i for i in range(300)],
                             "value": [b""] * 300}), stale / "part-00000.snappy.parquet")
    (stale / "part-00001.snappy.parquet").write_bytes(b"not parquet")
    report, code = export(spark, db, to, *RS_DELTA, "--mode", "incremental")
    assert code == 0, report
    inc = report["databases"][0]
    assert inc["delta_version"] == 1 and inc["since"] == first
    expected = scan(store, "db")
    changed = {k for k in set(before) | set(expected) if before.get(k) != expected.get(k)}
    assert inc["rows"] == len(changed) == inc["changes"]["upserts"] + inc["changes"]["deletes"]
    assert inc["changes"]["deletes"] == len(set(before) - set(expected)) == 34
    assert inc["bytes"] > 0 and inc["merge"]["num_source_rows"] == len(changed)
    assert delta_content(to) == expected
    assert _staging_dirs(root) == [stale.name]  # left alone (a concurrent run's, perhaps)
    # nothing to change: an empty commit with the new mark, and no staging left either
    report, code = export(spark, db, to, *RS_DELTA, "--mode", "incremental")
    assert code == 0, report
    again = report["databases"][0]
    assert again["rows"] == 0 and again["changes"] == {"upserts": 0, "deletes": 0}
    assert again["delta_version"] == 2 and again["since"] == inc["checkpoint"]["id"]
    assert delta_content(to) == expected and _staging_dirs(root) == [stale.name]
