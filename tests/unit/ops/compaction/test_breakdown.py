"""The execute breakdown's arithmetic (:mod:`slatelib.ops.compaction.breakdown`), and its
place in a thread-run compaction's report and in the job headline."""

from __future__ import annotations

import random
import uuid

import pytest

from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.row import VALUE
from slatelib.objstore import open_store
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction
from slatelib.ops.compaction.breakdown import PARTS, execute_breakdown, union_s
from slatelib.ops.engine import TaskTimes
from slatelib.ops.job_report import compact_headline, compact_report, db_entry
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db


@pytest.mark.parametrize(("intervals", "expected"), [
    ([], 0.0),
    ([(1.0, 3.0)], 2.0),
    ([(1.0, 3.0), (2.0, 4.0)], 3.0),           # overlapping
    ([(1.0, 2.0), (3.0, 5.0)], 3.0),           # disjoint
    ([(3.0, 5.0), (1.0, 2.0), (1.5, 4.0)], 4.0),  # unsorted, chained
    ([(1.0, 4.0), (2.0, 3.0)], 3.0),           # nested
    ([(2.0, 1.0), (1.0, 1.0)], 0.0),           # reversed and empty count nothing
])
def test_union_s(intervals: list[tuple[float, float]], expected: float) -> None:
    assert union_s(intervals) == pytest.approx(expected)


def test_two_parallel_tasks_name_every_gap() -> None:
    # execute [100, 110): driver 1 s, then Spark 1 s, the tasks' launch, the tasks' own code
    # (one 2..8, the other 2.5..7), results back at 9, the driver's last second
    times = [TaskTimes(submitted=101, launched=102, started=102.5, ended=107, collected=109),
             TaskTimes(submitted=101, launched=101.5, started=102, ended=108, collected=109)]
    b = execute_breakdown(100.0, 10.0, times)
    assert b["execute_s"] == 10.0 and b["tasks_s"] == 6.0
    assert b["task_share"] == 0.6 and b["overhead_share"] == 0.4
    assert b["overhead_s"] == 4.0
    assert b["parts_s"] == {"driver_before_submit": 1.0, "scheduling": 0.5,
                            "task_launch": 0.5, "result": 1.0, "driver_after": 1.0,
                            "other": 0.0}


def test_gap_between_tasks_is_other_and_parts_sum_to_the_overhead() -> None:
    # one slot, two tasks one after the other, with a gap between them
    times = [TaskTimes(submitted=0.0, launched=0.1, started=0.2, ended=1.0, collected=2.3),
             TaskTimes(submitted=0.0, launched=1.4, started=1.5, ended=2.0, collected=2.3)]
    b = execute_breakdown(0.0, 2.5, times)
    assert b["tasks_s"] == pytest.approx(1.3)
    assert b["parts_s"]["other"] == pytest.approx(0.4)  # 1.0..1.4 (1.4..1.5 is a launch)
    assert b["parts_s"]["task_launch"] == pytest.approx(0.2)
    assert b["parts_s"]["scheduling"] == pytest.approx(0.1)
    assert b["parts_s"]["result"] == pytest.approx(0.3)
    assert b["parts_s"]["driver_after"] == pytest.approx(0.2)
    assert sum(b["parts_s"].values()) == pytest.approx(b["overhead_s"], abs=0.003)
    assert set(b["parts_s"]) == set(PARTS)


def test_clocks_out_of_the_phase_are_clamped() -> None:
    # an executor whose clock runs 5 s ahead: its task is clamped into [submitted, collected]
    times = [TaskTimes(submitted=10.0, launched=15.5, started=16.0, ended=30.0,
                       collected=12.0)]
    b = execute_breakdown(10.0, 3.0, times)
    assert 0.0 <= b["tasks_s"] <= b["execute_s"]
    assert b["task_share"] + b["overhead_share"] == pytest.approx(1.0)
    assert b["parts_s"]["driver_after"] == pytest.approx(1.0)  # 12..13


def test_results_without_times_count_no_task_time() -> None:
    b = execute_breakdown(5.0, 2.0, [None, TaskTimes()])
    assert (b["tasks_s"], b["task_share"], b["overhead_s"]) == (0.0, 0.0, 2.0)
    assert sum(b["parts_s"].values()) == pytest.approx(2.0)


def test_thread_run_compaction_reports_a_consistent_breakdown() -> None:
    store = open_store(f"memory://{uuid.uuid4().hex}/")
    new_db(store, "db")
    rng = random.Random(3)
    for s in range(1, 4):
        flush_l0(store, "db", [(b"k%04d" % k, s, VALUE, rng.randbytes(20), None, NOW_MS)
                               for k in rng.sample(range(2000), 600)])
    settings = Settings(sst=SstSettings(block_size=256, min_filter_keys=4),
                        compaction=CompactionSettings(policy="l0", min_range_bytes=1))
    report = run_compaction("db", store, settings=settings, parallelism=2,
                            runner=ThreadTaskRunner(2)).to_dict()
    b = report["execute_breakdown"]
    assert report["status"] == "committed" and report["tasks"] >= 2
    assert b["execute_s"] == report["phases_s"]["execute"]
    assert 0.0 < b["tasks_s"] <= b["execute_s"]
    # the tasks' own time is at least the slowest task's, at most their sum
    totals = [m["total_s"] for m in report["task_metrics"]]
    assert max(totals) - 0.002 <= b["tasks_s"] <= sum(totals) + 0.002
    assert b["task_share"] + b["overhead_share"] == pytest.approx(1.0)
    assert sum(b["parts_s"].values()) == pytest.approx(b["overhead_s"], abs=0.005)


def test_headline_gives_the_tasks_share_of_execute() -> None:
    fields = {"outcome": "committed", "inputs": {"l0_views": 2}, "outputs": {"count": 1},
              "bytes_in": 2000, "bytes_out": 1000,
              "execute_breakdown": {"execute_s": 2.0, "tasks_s": 1.5}}
    other = {**fields, "execute_breakdown": {"execute_s": 2.0, "tasks_s": 1.9}}
    one = compact_report(0, [db_entry("a", 0, fields)], seconds=3.0, dry_run=False)
    assert "; tasks 75% of execute" in one["headline"]
    two = compact_report(0, [db_entry("a", 0, fields), db_entry("b", 0, other)],
                         seconds=3.0, dry_run=False)
    assert "; tasks 85% of execute" in compact_headline(two)
    none = compact_report(0, [db_entry("a", 0, {**fields, "execute_breakdown": {}})],
                          seconds=3.0, dry_run=False)
    assert "of execute" not in none["headline"]
