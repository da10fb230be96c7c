"""The execute breakdown (:mod:`slatelib.ops.compaction.breakdown`) of ``jobs/compact.py``
on the session's ``local[2]`` Spark: one-shot reports and worker-mode records, and the
worker's ranges of one compaction run as one Spark job."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from slatelib.jobs.compact import build_parser, run
from slatelib.objstore import open_store
from slatelib.ops.compaction.breakdown import PARTS
from tests.compaction_fixtures import schedule_compaction
from tests.spark.test_compact_job import SETTINGS, make_db

pytestmark = pytest.mark.spark


def job(spark: Any, *argv: str) -> tuple[dict[str, Any], int]:
    return run(spark, SETTINGS, build_parser().parse_args(list(argv)))


def consistent(b: dict[str, Any], ranges: int) -> None:
    assert set(b) == {"execute_s", "tasks_s", "task_share", "overhead_s", "overhead_share",
                      "parts_s"}
    assert set(b["parts_s"]) == set(PARTS)
    assert 0.0 < b["tasks_s"] <= b["execute_s"]
    assert 0.0 <= b["task_share"] <= 1.0
    assert b["task_share"] + b["overhead_share"] == pytest.approx(1.0)
    assert b["overhead_s"] == pytest.approx(b["execute_s"] - b["tasks_s"], abs=0.002)
    assert sum(b["parts_s"].values()) == pytest.approx(b["overhead_s"], abs=0.001 * 8)
    # Spark's part is there: its tasks reach the executors after the submit
    assert b["parts_s"]["scheduling"] + b["parts_s"]["task_launch"] > 0.0
    assert ranges >= 2


def test_one_shot_report_has_a_consistent_execute_breakdown(spark: Any,
                                                            tmp_path: Path) -> None:
    make_db(tmp_path, "a", 1)
    report, code = job(spark, "--db", f"file://{tmp_path}/a", "--parallelism", "2")
    db = report["databases"][0]
    assert code == 0 and db["outcome"] == "committed"
    b = db["execute_breakdown"]
    assert b["execute_s"] == db["phases_s"]["execute"]
    consistent(b, db["tasks"])
    # the tasks' own time is at least the slowest task's and at most their sum
    totals = [m["total_s"] for m in db["task_metrics"]]
    assert max(totals) - 0.002 <= b["tasks_s"] <= sum(totals) + 0.002
    assert f"tasks {round(100 * b['tasks_s'] / b['execute_s'])}% of execute" in \
        report["headline"]


def _jobs_so_far(spark: Any) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def test_worker_records_a_breakdown_and_runs_a_compaction_as_one_spark_job(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.ops.compaction import worker

    store = open_store(f"file://{tmp_path}")
    for name, seed in (("a", 1), ("b", 2)):
        make_db(tmp_path, name, seed)
        schedule_compaction(store, name)
    recorded: list[tuple[str, int]] = []
    record = worker._Job.record

    def counting(self: Any, index: int, outputs: Any) -> None:
        recorded.append((self.db.name, index))
        record(self, index, outputs)

    monkeypatch.setattr(worker._Job, "record", counting)
    before = _jobs_so_far(spark)
    report, code = job(spark, "--worker", "--until-idle", "--db", f"file://{tmp_path}/a",
                       "--db", f"file://{tmp_path}/b", "--parallelism", "3")
    assert code == 0 and report["totals"]["compacted"] == 2
    records = [j for d in report["databases"] for j in d["jobs"]]
    assert [r["status"] for r in records] == ["compacted", "compacted"]
    # each finished range recorded once (from the tasks' accumulator or the results)
    assert sorted(recorded) == sorted(set(recorded))
    assert len(recorded) == sum(r["ranges"] for r in records)
    for r in records:
        consistent(r["execute_breakdown"], r["ranges"])
        assert r["execute_breakdown"]["execute_s"] <= r["seconds"]
    deadline = time.monotonic() + 5  # the status tracker hears of jobs a little later
    while len(_jobs_so_far(spark) - before) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_jobs_so_far(spark) - before) == 2  # one per compaction, not one per range
    assert sum(r["ranges"] for r in records) > 2
