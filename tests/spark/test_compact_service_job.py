"""``jobs/compact.py --service --until-idle`` on the session's ``local[2]`` Spark: several
databases compacted by size-tiered rules, their key ranges run as Spark tasks."""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slatelib.config import ServiceSettings
from slatelib.core.compactions import CompactionStatus
from slatelib.jobs.compact import build_parser, run
from slatelib.objstore import open_store
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from tests.spark.test_compact_job import SETTINGS, make_db, scan

pytestmark = pytest.mark.spark


def test_service_until_idle_compacts_several_databases_on_spark(spark: Any,
                                                                tmp_path: Path) -> None:
    live = {name: make_db(tmp_path, name, seed) for seed, name in enumerate("abc", 1)}
    status = tmp_path / "status.json"
    args = build_parser().parse_args([
        "--service", *(a for n in live for a in ("--db", f"file://{tmp_path}/{n}")),
        "--until-idle", "--max-concurrent", "2", "--parallelism", "3",
        "--status-file", str(status)])
    report, code = run(spark, SETTINGS, args)
    assert (code, report["status"], report["stop_reason"]) == (0, "success", "until_idle")
    assert report["totals"]["compactions"] == 3 and report["totals"]["errors"] == 0
    store = open_store(f"file://{tmp_path}")
    for db in report["databases"]:
        name = db["db"].rsplit("/", 1)[1]
        [one] = db["history"]
        assert (len(one["sources"]), one["destination"], one["tasks"]) == (4, 0, 3), db
        assert one["rows_in"] == 480 and one["rows_out"] == len(live[name])
        m = ManifestStore(store, name).read_latest().value
        assert (len(m.l0), len(m.compacted)) == (0, 1)
        assert scan(tmp_path, name) == live[name]
    final = json.loads(status.read_text())
    assert final["state"] == "stopped" and len(final["databases"]) == 3


def test_two_sigterms_abandon_a_compaction_and_cancel_its_spark_job(spark: Any,
                                                                    tmp_path: Path) -> None:
    live = make_db(tmp_path, "db", 1)
    marker = tmp_path / "release"
    status = tmp_path / "status.json"

    def held_task(task: Any) -> Any:  # on an executor: holds its key range until released
        import time as _time

        from slatelib.ops.compaction import run_compaction_task

        for _ in range(1200):
            if marker.exists():
                break
            _time.sleep(0.05)
        return run_compaction_task(task)

    def signal_twice() -> None:
        done = threading.Event()
        for _ in range(1200):  # until the status file shows the compaction running
            if status.exists() and json.loads(status.read_text())["running"]:
                os.kill(os.getpid(), signal.SIGTERM)
                done.wait(0.2)
                os.kill(os.getpid(), signal.SIGTERM)
                return
            done.wait(0.05)

    args = build_parser().parse_args([
        "--service", "--db", f"file://{tmp_path}/db", "--status-file", str(status)])
    settings = replace(SETTINGS, service=ServiceSettings(status_interval=0.05))
    sender = threading.Thread(target=signal_twice, daemon=True)
    sender.start()
    try:
        report, code = run(spark, settings, args, task_fn=held_task)
    finally:
        marker.write_text("x")  # ends the executor's task if the cancel did not
        sender.join(60)
    assert (code, report["stop_reason"]) == (0, "SIGTERM")
    assert report["totals"]["abandoned"] == 1 and report["totals"]["compactions"] == 0
    store = open_store(f"file://{tmp_path}")
    m = ManifestStore(store, "db").read_latest().value
    assert (len(m.l0), len(m.compacted)) == (4, 0) and scan(tmp_path, "db") == live
    [entry] = CompactionsStore(store, "db").read_latest().value.recent_compactions
    assert entry.status == CompactionStatus.FAILED  # its outputs are garbage for GC
    assert json.loads(status.read_text())["state"] == "stopped"
