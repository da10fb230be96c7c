"""Compaction tasks on Spark: one Spark job per compaction (or per batch of them), one
partition per key range, with progress on stderr (key ranges and estimated bytes done, and
an ETA). What ``jobs/compact.py`` (one-shot, worker and service modes) and
``jobs/rescale.py`` hand their tasks to.

Tasks are :class:`~slatelib.ops.compaction.CompactionTask` values (small, picklable: a
``StoreSpec``, the range and its input views); each executor runs
:func:`slatelib.ops.compaction.run_compaction_task`, which opens its own store and returns the
result, or the failure as a value (Spark would lose the error's type), to the driver.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from slatelib.core.compaction_source import estimate_view_size, sst_size
from slatelib.core.humanize import fmt_bytes
from slatelib.ops.compaction import CompactionTask, TaskOutcome, run_compaction_task
from slatelib.ops.engine import TaskFailure
from slatelib.spark.executors import map_on_executors
from slatelib.spark.guard import placement

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROGRESS_INTERVAL_S = 5.0


def task_bytes(task: CompactionTask) -> int:
    """The estimated input bytes of one key range: each input view clipped to the range,
    sized as the planner sizes views (0.17's ``estimate_visible_size``); 0 if unknown."""
    total = 0
    rng = task.range
    for source in task.sources:
        for tv in source.views:
            vis = tv.view.visible_range
            info = tv.handle.info
            if (vis is None and info.last_entry is not None
                    and rng.contains(info.first_entry or b"") and rng.contains(info.last_entry)):
                # The whole SST lies in the range (every view inside a range of a large
                # run): the estimate of the clipped view is the SST's size, without the
                # range arithmetic and the copy of the view below.
                total += sst_size(info)
                continue
            clipped = task.range if vis is None else vis.intersect(task.range)
            try:
                total += estimate_view_size(dataclasses.replace(tv.view, visible_range=clipped),
                                            tv.handle.info)
            except Exception:  # an estimate only: never fail the compaction over it
                continue
    return total


def progress_line(label: str, done: int, total: int, done_bytes: int, total_bytes: int,
                  elapsed_s: float) -> str:
    """``<label>: 3/8 key ranges, 12.0 MB/31.5 MB done, ETA 8 s`` (bytes are estimates of
    the input; the ETA extrapolates the bytes done so far, and is left out until some are)."""
    line = f"{label}: {done}/{total} key ranges, {fmt_bytes(done_bytes)}/{fmt_bytes(total_bytes)} done"
    if 0 < done_bytes < total_bytes and elapsed_s > 0:
        eta = elapsed_s * (total_bytes - done_bytes) / done_bytes
        line += f", ETA {eta:.0f} s"
    return line + f", {elapsed_s:.1f} s"


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
        sizes = [task_bytes(t) for t in tasks]
        total_bytes = sum(sizes)
        done_bytes = sc.accumulator(0)  # the driver sees each task's add when it finishes
        fn = self.task_fn

        def run_one(item: tuple[CompactionTask, int]) -> TaskOutcome:
            outcome = fn(item[0])
            done_bytes.add(item[1])
            if isinstance(outcome, TaskFailure):
                outcome = dataclasses.replace(outcome, executor=placement())
            return outcome

        started = time.monotonic()
        stop = threading.Event()
        watcher = threading.Thread(
            target=self._report_progress,
            args=(group, len(tasks), total_bytes, done_bytes, started, stop), daemon=True)
        watcher.start()
        try:
            outcomes: list[TaskOutcome] = map_on_executors(
                sc, run_one, list(zip(tasks, sizes, strict=True)))
        finally:
            stop.set()
            watcher.join()
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sys.stderr.write(progress_line(self.label, len(tasks), len(tasks), total_bytes,
                                       total_bytes, time.monotonic() - started) + "\n")
        sys.stderr.flush()
        return outcomes

    def _report_progress(self, group: str, total: int, total_bytes: int, done_bytes: Any,
                         started: float, stop: threading.Event) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        last = (-1, -1)
        while not stop.wait(self.progress_interval_s):
            done = 0
            for job_id in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(job_id)
                for stage_id in info.stageIds if info else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
            now = (done, int(done_bytes.value))
            if now != last:
                sys.stderr.write(progress_line(self.label, min(done, total), total,
                                               min(now[1], total_bytes), total_bytes,
                                               time.monotonic() - started) + "\n")
                sys.stderr.flush()
                last = now
