"""Progress of the Spark jobs on stderr: GC's distributed listing and deleting learnt from
finished tasks (accumulators and the status tracker, on the shared session), and
``slate-spark gc`` / ``export`` run as processes, whose stderr has progress lines while
stdout is still one JSON report."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slatelib.config import load_settings
from slatelib.jobs.gc import build_parser, run
from slatelib.objstore import open_store
from slatelib.ops.progress import ProgressOutput, progress_output
from tests.conftest import GOLDEN_DIR
from tests.unit.gc_support import DbWriter, manifest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
WALS = 2_600
"""More than the driver's first listing page (1,000) and than the driver deletes itself
(2,000): both are spread over Spark tasks."""


def gc_db(root: Path, wals: int, replay_after: int) -> str:
    w = DbWriter(open_store(f"file://{root}"), "db")
    w.manifests_upto(2, manifest(replay_after=replay_after, last_seen=replay_after))
    for wid in range(1, wals + 1):
        w.wal(wid)
    return f"file://{root}/db"


def test_gc_on_spark_reports_objects_listed_and_deleted_by_the_tasks(
        spark: Any, tmp_path: Path) -> None:
    db = gc_db(tmp_path, WALS, replay_after=2_501)
    conf = tmp_path / "gc.toml"
    conf.write_text("[gc]\nlist_partitions = 3\n")
    args = build_parser().parse_args(["--db", db, "--min-age", "0s", "--force",
                                      "--no-dry-run", "--conf", str(conf)])
    stream = io.StringIO()
    with progress_output(True, interval_s=0.0, stream=stream, tty=False) as out:
        assert isinstance(out, ProgressOutput)
        report, code = run(spark, load_settings(args.conf), args)
    assert code == 0, report
    assert report["totals"]["deleted"] == 2_500 + 1
    lines = stream.getvalue().splitlines()
    [listed] = [x for x in lines if x.startswith("gc list ") and "/db/wal  " in x]
    assert "/db/wal  2,600 objects  " in listed and "  done in " in listed
    # the last line of the distributed delete: the tasks' own count (an accumulator), and
    # the tasks finished out of all (the status tracker of the job group)
    [deleted] = [x for x in lines if x.startswith("gc delete ") and "/db wal  " in x]
    assert "/db wal  2,500/2,500 objects  " in deleted, deleted
    tasks = deleted.rsplit("  ", 1)[1]
    assert tasks.endswith(" tasks") and tasks.split()[0].split("/")[0] == tasks.split()[0].split(
        "/")[1] != "0"
    assert "\r" not in stream.getvalue()


def slate_spark(*argv: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "slatelib.jobs.launcher", *argv, "--master", "local[1]",
         "--spark-conf", "spark.sql.shuffle.partitions=2",
         "--spark-conf", "spark.ui.enabled=false"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
        text=True, timeout=600, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_gc_and_export_jobs_write_progress_to_stderr_and_only_json_to_stdout(
        tmp_path: Path) -> None:
    db = gc_db(tmp_path / "gc", 30, replay_after=21)
    code, out, err = slate_spark("gc", "--db", db, "--min-age", "0s", "--force", "--no-dry-run")
    assert code == 0, err[-3000:]
    report = json.loads(out)  # the whole of stdout: one JSON document
    assert report["job"] == "gc" and report["totals"]["deleted"] == 20 + 1
    assert any(x.startswith("gc list ") and "/db/wal  30 objects  " in x
               for x in err.splitlines()), err[-3000:]
    assert any(x.startswith("gc delete ") and " wal  20/20 objects  " in x
               for x in err.splitlines()), err[-3000:]

    src = tmp_path / "fx"
    shutil.copytree(GOLDEN_DIR / "basic", src / "basic")
    for p in src.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    code, out, err = slate_spark("export", "--db", f"file://{src}/basic",
                                 "--to", f"file://{tmp_path}/pq", "--format", "parquet",
                                 "--partitions", "2")
    assert code == 0, err[-3000:]
    report = json.loads(out)
    assert report["job"] == "export"
    # a slow run also has periodic lines (one every --progress-interval): the last one is
    # the phase's final line
    lines = [x for x in err.splitlines() if x.startswith(f"export file://{src}/basic  ")]
    assert lines, err[-3000:]
    line = lines[-1]
    done, total = line.split("  ")[1].split()[0].split("/")
    assert done == total != "0" and "  done in " in line, line
    # --no-progress: no progress lines at all
    code, out, err = slate_spark("export", "--db", f"file://{src}/basic",
                                 "--to", f"file://{tmp_path}/pq2", "--format", "parquet",
                                 "--no-progress")
    assert code == 0 and json.loads(out)["job"] == "export"
    assert not [x for x in err.splitlines() if x.startswith("export file://")]


def test_rescale_on_spark_shows_its_phases_and_the_bytes_compacted_by_the_tasks(
        spark: Any, tmp_path: Path) -> None:
    from slatelib.jobs.rescale import build_parser as rescale_parser
    from slatelib.jobs.rescale import run as rescale_run
    from tests.spark.test_rescale_job import SETTINGS, _source

    _source(tmp_path)
    root = f"file://{tmp_path}"
    args = rescale_parser().parse_args(["split", "--db", f"{root}/src", "--into", "2",
                                        "--to", f"{root}/shard-{{i}}", "--store-root", root])
    stream = io.StringIO()
    with progress_output(True, interval_s=0.0, stream=stream, tty=False):
        report, code = rescale_run(spark, SETTINGS, args)
    assert code == 0, report
    lines = stream.getvalue().splitlines()
    phases = {x.split("  ")[0] for x in lines if x.startswith("rescale split ")}
    assert {"rescale split plan", "rescale split compact", "rescale split release"} <= phases
    [compacted] = [x for x in lines if x.startswith("rescale compaction  ")]
    done, total = compacted.split("  ")[1].split("/")
    assert done == total and total.endswith("kB"), compacted  # the accumulator's bytes
    tasks_done, tasks = compacted.rsplit("  ", 1)[1].removesuffix(" tasks").split("/")
    assert tasks_done == tasks != "0" and "  done in " in compacted, compacted
