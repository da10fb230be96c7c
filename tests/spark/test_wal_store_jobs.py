"""Every Spark job on an official database whose WAL lives in a separate store (official
``with_wal_object_store``), on the session's ``local[2]``: with ``--wal-store`` (or a
database entry naming its WAL store) each job does its work and the official reader, given
the same WAL store, reads every write; without it each job refuses (exit 5) and nothing in
either store changes. The data source reads the WAL tail with its ``wal_store`` option."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.jobs import compact, export, gc, rescale
from slatelib.spark.datasource import planned_frame
from tests.interop.official import DbSettings, Delete, Model, OfficialDb, Put, read_all

pytestmark = pytest.mark.spark

DB = "db"
SETTINGS = Settings(sst=SstSettings(block_size=512, min_filter_keys=10),
                    compaction=CompactionSettings(min_range_bytes=1, max_sst_size=4096))


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def age(*roots: Path) -> None:
    then = time.time() - 3600
    for root in roots:
        for p in root.rglob("*"):
            if p.is_file():
                os.utime(p, (then, then))


@pytest.fixture
def wal_db(tmp_path: Path) -> tuple[Path, Path, Model]:
    """An official database in ``main`` with its WAL in ``wal``: three L0s, a delete, and
    rows only in the WAL; the writer closed (no embedded compactor), every object an hour
    old."""
    main, wal = tmp_path / "main", tmp_path / "wal"
    main.mkdir()
    wal.mkdir()
    model = Model()
    settings = DbSettings(compactor=False, extra={"garbage_collector_options": "null"})
    with OfficialDb.open(main, DB, settings, model=model, wal_store=wal) as db:
        for r in range(3):
            for i in range(80):
                db.write([Put(b"key%04d" % (i * 3 % 240), b"v%d-%d" % (r, i) * 4)])
                if i % 40 == 39:
                    db.flush_wal()
            db.write([Delete(b"key%04d" % r)])
            db.flush_memtable()
        for i in range(50):
            db.write([Put(b"tail%03d" % i, b"w%d" % i)])
            if i % 10 == 9:
                db.flush_wal()
        db.close("wal")
    age(main, wal)
    return main, wal, model


def job(module: Any, spark: Any, *argv: str) -> tuple[dict[str, Any], int]:
    args = module.build_parser().parse_args(list(argv))
    report, code = module.run(spark, SETTINGS, args)
    return report, code


def test_every_job_refuses_without_the_wal_store_and_changes_nothing(
        spark: Any, wal_db: tuple[Path, Path, Model], tmp_path: Path) -> None:
    main, wal, _ = wal_db
    before = tree(main), tree(wal)
    url = f"file://{main}/{DB}"
    root = ["--store-root", f"file://{main}"]
    runs = [
        (compact, [*root, "--db", url, "--policy", "l0", "--takeover"]),
        (gc, [*root, "--db", url, "--no-dry-run", "--min-age", "0s", "--force"]),
        (export, [*root, "--db", url, "--to", f"file://{tmp_path}/out", "--format", "parquet"]),
        (rescale, ["split", *root, "--db", url, "--into", "2", "--to",
                   f"file://{main}/shard-{{i}}"]),
    ]
    for module, argv in runs:
        report, code = job(module, spark, *argv)
        assert code == 5, (module.__name__, report)
        error = (report.get("error") or report["databases"][0]["error"])["message"]
        assert "--wal-store" in error and "WAL" in error, error
    assert (tree(main), tree(wal)) == before
    assert not (tmp_path / "out").exists()


def test_compact_and_gc_jobs_with_the_wal_store(spark: Any, wal_db: tuple[Path, Path, Model],
                                                tmp_path: Path) -> None:
    main, wal, model = wal_db
    url = f"file://{main}/{DB}"
    root = ["--store-root", f"file://{main}"]
    report, code = job(compact, spark, *root, "--db", url, "--wal-store", f"file://{wal}",
                       "--policy", "l0")
    assert code == 0, report
    assert report["databases"][0]["outcome"] == "committed"
    assert read_all(main, DB, wal_store=wal) == model.items()
    age(main, wal)
    wal_before = tree(wal)
    entry = json.dumps({"db": url, "wal_store": f"file://{wal}"})  # as a DAG passes it
    report, code = job(gc, spark, *root, "--db", entry, "--no-dry-run", "--min-age", "0s",
                       "--force")
    assert code == 0, report
    (db,) = report["databases"]
    assert db["wal_store"] == f"file://{wal}" and db["kinds"]["wal"]["deleted"] > 0
    assert len(tree(wal)) < len(wal_before)  # collected in the WAL store
    assert read_all(main, DB, wal_store=wal) == model.items()


def test_export_job_and_data_source_read_the_wal_tail(
        spark: Any, wal_db: tuple[Path, Path, Model], tmp_path: Path) -> None:
    main, wal, model = wal_db
    out = tmp_path / "out"
    report, code = job(export, spark, "--store-root", f"file://{main}", "--db",
                       f"file://{main}/{DB}", "--wal-store", f"file://{wal}", "--to",
                       f"file://{out}", "--format", "parquet", "--partitions", "2")
    assert code == 0, report
    rows = pq.read_table(str(out)).to_pylist()
    assert sorted((r["key"], r["value"]) for r in rows) == model.items()
    from slatelib import create_checkpoint

    cp = create_checkpoint(DB, f"file://{main}", lifetime=600)  # pins the WAL tail too
    frame = planned_frame(spark, {"db": f"file://{main}/{DB}", "store_root": f"file://{main}",
                                  "wal_store": f"file://{wal}", "checkpoint": str(cp.id),
                                  "partitions": "2"})
    assert sorted((r.key, r.value) for r in frame.collect()) == model.items()
    with pytest.raises(Exception, match="--wal-store"):
        planned_frame(spark, {"db": f"file://{main}/{DB}", "store_root": f"file://{main}",
                              "checkpoint": str(cp.id)})


def test_rescale_split_with_the_wal_store(spark: Any, wal_db: tuple[Path, Path, Model]) -> None:
    main, wal, model = wal_db
    report, code = job(rescale, spark, "split", "--store-root", f"file://{main}", "--db",
                       f"file://{main}/{DB}", "--into", "2", "--to",
                       f"file://{main}/shard-{{i}}", "--wal-store", f"file://{wal}")
    assert code == 0, report
    assert report["outcome"] == "done" and report["validation"]["ok"]
    assert report["sources"][0]["flushed"]["wal_rows"] > 0  # the WAL store's tail
    got: list[tuple[bytes, bytes]] = []
    for i in range(2):
        got += read_all(main, f"shard-{i}", wal_store=wal)
    assert sorted(got) == model.items()
    assert not (main / DB / "wal").exists()  # the flush wrote its fences in the WAL store
