"""The Spark side of the compaction job: one Spark job per compaction, one partition per
key range, with progress on stderr.

Tasks are :class:`~slatelib.ops.compaction.CompactionTask` values (small, picklable: a
``StoreSpec``, the range and its input views); each executor runs
:func:`slatelib.ops.compaction.run_compaction_task`, which opens its own store and returns the
result, or the failure as a value (Spark would lose the error's type), to the driver.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from slatelib.ops.compaction import CompactionTask, TaskOutcome, run_compaction_task

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROGRESS_INTERVAL_S = 5.0


class SparkTaskRunner:
    """Runs compaction tasks as one Spark job, one partition per task, reporting progress."""

    def __init__(self, spark: SparkSession, *, label: str = "compaction",
                 task_fn: Callable[[CompactionTask], TaskOutcome] = run_compaction_task,
                 progress_interval_s: float = PROGRESS_INTERVAL_S) -> None:
        self.spark = spark
        self.label = label
        self.task_fn = task_fn
        self.progress_interval_s = progress_interval_s

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        if not tasks:
            return []
        sc = self.spark.sparkContext
        group = f"slatelib-compact-{tasks[0].label.split('#')[0]}-{time.monotonic_ns()}"
        sc.setJobGroup(group, f"{self.label}: {len(tasks)} key ranges")
        stop = threading.Event()
        watcher = threading.Thread(target=self._report_progress,
                                   args=(group, len(tasks), stop), daemon=True)
        watcher.start()
        try:
            rdd = sc.parallelize(list(tasks), len(tasks)).map(self.task_fn)
            outcomes: list[TaskOutcome] = rdd.collect()
        finally:
            stop.set()
            watcher.join()
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sys.stderr.write(f"{self.label}: {len(tasks)}/{len(tasks)} key ranges done\n")
        return outcomes

    def _report_progress(self, group: str, total: int, stop: threading.Event) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        last = -1
        while not stop.wait(self.progress_interval_s):
            done = 0
            for job_id in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(job_id)
                for stage_id in info.stageIds if info else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
            if done != last:
                sys.stderr.write(f"{self.label}: {done}/{total} key ranges done\n")
                last = done
