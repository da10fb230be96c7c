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
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from slatelib.ops.compaction import CompactionTask, TaskOutcome, run_compaction_task
from slatelib.ops.engine import TaskFailure, task_bytes
from slatelib.ops.progress import start
from slatelib.spark.executors import on_executors
from slatelib.spark.guard import placement
from slatelib.spark.progress import track

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


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
        return self.run_streaming(tasks, None)

    def run_streaming(self, tasks: Sequence[CompactionTask],
                      on_outcome: Callable[[TaskOutcome], None] | None,
                      ) -> list[TaskOutcome]:
        """Run ``tasks`` as one Spark job; ``on_outcome`` (on a driver thread) is called
        with each task's outcome soon after that task finishes, before the job ends (each
        task sends it in an accumulator too), and once for each outcome not seen by then.
        One job for all the ranges of a compaction, instead of one job per range, and
        still every finished range at once (worker mode's progress records)."""
        if not tasks:
            return []
        sc = self.spark.sparkContext
        sizes = [task_bytes(t) for t in tasks]
        progress = start(self.label, unit="bytes", total=sum(sizes))
        # the driver sees each task's add when it finishes; not needed without progress
        done_bytes = None if progress.out is None else sc.accumulator(0)
        finished: Any = None if on_outcome is None else sc.accumulator(
            [], _Appended())  # type: ignore[arg-type]
        fn = self.task_fn

        def run_part(part: Iterator[tuple[CompactionTask, int]]) -> Iterator[TaskOutcome]:
            launched = time.time()  # before the task spec is unpickled (next(part))
            for task, size in part:
                outcome = fn(task)
                if done_bytes is not None:
                    done_bytes.add(size)
                if isinstance(outcome, TaskFailure):
                    outcome = dataclasses.replace(outcome, executor=placement())
                elif outcome.times is not None:
                    outcome = dataclasses.replace(outcome, times=dataclasses.replace(
                        outcome.times, launched=launched))
                if finished is not None:
                    finished.add([outcome])
                yield outcome

        items = list(zip(tasks, sizes, strict=True))
        seen = _Seen(on_outcome)
        rdd = sc.parallelize(items, len(items)).mapPartitions(
            on_executors(sc, run_part, iterator=True))
        with track(sc, progress, counter=done_bytes, settle=False), seen.watch(finished):
            submitted = time.time()
            outcomes: list[TaskOutcome] = list(rdd.collect())
            collected = time.time()
        outcomes = [_stamped(o, submitted, collected) for o in outcomes]
        seen.feed(outcomes)
        progress.update(sum(sizes), fraction=1.0, detail=f"{len(items)}/{len(items)} tasks")
        progress.finish(sum(sizes))
        return outcomes


def _stamped(outcome: TaskOutcome, submitted: float, collected: float) -> TaskOutcome:
    """``outcome`` with the driver's submit and collect times of its Spark job."""
    if isinstance(outcome, TaskFailure) or outcome.times is None:
        return outcome
    return dataclasses.replace(outcome, times=dataclasses.replace(
        outcome.times, submitted=submitted, collected=collected))


class _Appended:
    """The accumulator parameter of finished outcomes: lists, concatenated."""

    def zero(self, value: list[Any]) -> list[Any]:
        return []

    def addInPlace(self, a: list[Any], b: list[Any]) -> list[Any]:  # noqa: N802
        a.extend(b)
        return a


class _Seen:
    """Calls ``on_outcome`` once per task (by index and attempt), from the accumulator
    while the job runs and from the collected outcomes after."""

    POLL_S = 0.05

    def __init__(self, on_outcome: Callable[[TaskOutcome], None] | None) -> None:
        self.on_outcome = on_outcome
        self.done: set[int] = set()
        self.lock = threading.Lock()

    def feed(self, outcomes: Sequence[TaskOutcome]) -> None:
        if self.on_outcome is None:
            return
        with self.lock:
            for o in outcomes:
                if o.index not in self.done:
                    self.done.add(o.index)
                    self.on_outcome(o)

    @contextmanager
    def watch(self, acc: Any) -> Iterator[None]:
        if acc is None or self.on_outcome is None:
            yield
            return
        stop = threading.Event()

        def poll() -> None:
            while not stop.wait(self.POLL_S):
                try:
                    self.feed(list(acc.value))
                except Exception:  # a failing callback must not go unnoticed: see feed
                    log.exception("recording a finished compaction task failed")
                    return

        watcher = threading.Thread(target=poll, name="slatelib-outcomes", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()
