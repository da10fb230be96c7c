"""An incremental Delta export whose change rows are far larger than the driver may hold:
run through the real entry point (``python -m slatelib.jobs.launcher export``, i.e. ``slate-spark``)
with ``spark.driver.memory=512m``, delta-spark's MERGE keeps the change rows on the
executors. The job's report gives the Python driver's peak RSS (``driver_peak_rss_bytes``),
which must stay far below the change rows' size (delta-rs' merge would hold them all in the
driver: docs/rfcs/0011-spark-datasource-and-export.md, "Incremental merge memory")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from slatelib import Db, WriteBatch
from tests.spark.test_export_job import export
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
CHANGES = 300_000
VALUE_BYTES = 1_000
"""300k changes of 1 kB: about 300 MB of change rows (3 M changes: benchmarks)."""


def table_rows(uri: str) -> int:
    """Rows of a Delta table from its add actions' statistics (no data read)."""
    actions = pa.table(DeltaTable(uri).get_add_actions(flatten=True))
    return int(pc.sum(actions["num_records"]).as_py())


def test_incremental_merge_larger_than_the_driver_runs_on_the_executors(
        spark: Any, tmp_path: Path) -> None:
    store, db, to = f"file://{tmp_path}", f"file://{tmp_path}/db", f"{tmp_path}/delta"
    with Db.open("db", store, writer_settings()) as w:
        for i in range(1_000):
            w.put(b"old%06d" % i, b"v%d" % i)
    # the first export by delta-rs: the incremental one continues its table
    report, code = export(spark, db, to, "--format", "delta", "--delta-writer", "delta-rs")
    assert code == 0, report
    value = b"x" * VALUE_BYTES
    with Db.open("db", store, writer_settings()) as w:
        for start in range(0, CHANGES, 10_000):
            batch = WriteBatch()
            for i in range(start, start + 10_000):
                batch.put(b"new%08d" % i, value)
            w.write(batch)
        for i in range(0, 1_000, 2):
            w.delete(b"old%06d" % i)
    change_bytes = CHANGES * (len(b"new%08d" % 0) + VALUE_BYTES)
    out = tmp_path / "report.json"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "slatelib.jobs.launcher", "export", "--db", db, "--to", to,
         "--format", "delta", "--mode", "incremental", "--delta-writer", "delta-spark",
         "--report", str(out), "--master", "local[2]",
         "--spark-conf", "spark.driver.memory=512m",
         "--spark-conf", "spark.databricks.delta.snapshotPartitions=2",
         "--spark-conf", "spark.sql.shuffle.partitions=4"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=600, check=False)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-4000:]
    entry = json.loads(out.read_text())["databases"][0]
    peak, start = entry["driver_peak_rss_bytes"], entry["driver_rss_at_start_bytes"]
    print(f"\ndriver RSS {start / 2**20:.0f} MiB at the start, peak {peak / 2**20:.0f} MiB, "
          f"for {change_bytes / 2**20:.0f} MiB of change rows; job {seconds:.1f}s (report: "
          f"{entry['seconds']})")
    assert entry["writer"] == "delta-spark", entry
    assert entry["changes"] == {"upserts": CHANGES, "deletes": 500}
    assert entry["rows"] == CHANGES + 500
    assert table_rows(to) == CHANGES + 500
    # the driver grows by a small fraction of the change rows (delta-rs' merge: more than
    # their size), and its whole peak (interpreter, PySpark, pyarrow) stays below them
    assert 0 < start <= peak < change_bytes
    assert peak - start < change_bytes / 10
