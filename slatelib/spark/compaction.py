"""Compaction tasks on Spark: one Spark job per compaction (or per batch of them), one
partition per key range, with progress on stderr (estimated input bytes of the key ranges
done, rate and ETA; :mod:`slatelib.ops.progress`). What ``jobs/compact.py`` (one-shot,
worker and service modes) and ``jobs/rescale.py`` hand their tasks to.

Tasks are :class:`~slatelib.ops.compaction.CompactionTask` values (small, picklable: a
``StoreSpec``, the range and its input views); each executor runs
:func:`slatelib.ops.compaction.run_compaction_task`, which opens its own store and returns the
result, or the failure as a value (Spark would lose the error's type), to the driver.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from slatelib.ops.compaction import CompactionTask, TaskOutcome, run_compaction_task
from slatelib.ops.engine import TaskFailure, task_bytes
from slatelib.ops.progress import start
from slatelib.spark.executors import on_executors
from slatelib.spark.guard import placement
from slatelib.spark.progress import track

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SparkTaskRunner:
    """Runs compaction tasks as one Spark job, one partition per task, with progress
    (:func:`slatelib.spark.progress.track`: estimated input bytes of the finished key
    ranges, rate and ETA) on the installed progress output."""

    def __init__(self, spark: SparkSession, *, label: str = "compaction",
                 task_fn: Callable[[CompactionTask], TaskOutcome] = run_compaction_task,
                 ) -> None:
        self.spark = spark
        self.label = label
        self.task_fn = task_fn

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        if not tasks:
            return []
        sc = self.spark.sparkContext
        sizes = [task_bytes(t) for t in tasks]
        done_bytes = sc.accumulator(0)  # the driver sees each task's add when it finishes
        fn = self.task_fn

        def run_part(part: Iterator[tuple[CompactionTask, int]]) -> Iterator[TaskOutcome]:
            launched = time.time()  # before the task spec is unpickled (next(part))
            for task, size in part:
                outcome = fn(task)
                done_bytes.add(size)
                if isinstance(outcome, TaskFailure):
                    outcome = dataclasses.replace(outcome, executor=placement())
                elif outcome.times is not None:
                    outcome = dataclasses.replace(outcome, times=dataclasses.replace(
                        outcome.times, launched=launched))
                yield outcome

        progress = start(self.label, unit="bytes", total=sum(sizes))
        items = list(zip(tasks, sizes, strict=True))
        with track(sc, progress, counter=done_bytes):
            outcomes: list[TaskOutcome] = list(
                sc.parallelize(items, len(items))
                .mapPartitions(on_executors(sc, run_part, iterator=True)).collect())
        progress.finish(sum(sizes))
        return outcomes
