"""Running compaction tasks: the :class:`TaskRunner` protocol, the in-process
:class:`ThreadTaskRunner`, :func:`run_compaction_task` (one task, failures as values: what
a runner ships to its workers) and :func:`execute_tasks` (run, retry what failed
transiently, collect the results in task order).

A runner decides only *where* tasks run (threads here, Spark executors in
``slatelib/spark/compaction.py``); which tasks exist and what is committed is the feature's
business (:mod:`slatelib.ops.compaction.run`, :mod:`slatelib.ops.rescale.job`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Protocol

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.errors import InvalidArgumentError
from slatelib.objstore import ObjectStore
from slatelib.ops.engine._execute import execute_compaction_task
from slatelib.ops.engine._task import (
    CompactionResult,
    CompactionTask,
    TaskFailure,
    TaskOutcome,
    TaskTimes,
)

__all__ = [
    "StreamingTaskRunner",
    "TaskRunner",
    "ThreadTaskRunner",
    "execute_tasks",
    "run_compaction_task",
]

log = logging.getLogger(__name__)


def run_compaction_task(task: CompactionTask, *, store: ObjectStore | None = None,
                        clock: Clock = SYSTEM_CLOCK) -> TaskOutcome:
    """:func:`execute_compaction_task`, then the task's hook (``task.after_outputs``, its
    value in ``check``), returning a failure as a :class:`TaskFailure` value instead of
    raising (what runners ship to executors: Spark would lose the error type).

    Raises:
        nothing: every ``Exception`` becomes a :class:`TaskFailure` (a ``BaseException`` such
        as ``KeyboardInterrupt`` still propagates).
    """
    started = time.time()
    try:
        hook = task.after_outputs
        if hook is None:
            result = execute_compaction_task(task, store=store, clock=clock)
        else:
            obj_store = store if store is not None else task.store.open()
            result = execute_compaction_task(task, store=obj_store, clock=clock)
            result = replace(result, check=hook(obj_store, task, result.outputs))
        return replace(result, times=TaskTimes(started=started, ended=time.time()))
    except Exception as exc:  # every failure becomes a value; SimulatedCrash passes
        log.warning("compaction task failed [task=%s, error=%s]", task.label, exc)
        return TaskFailure.of(task.index, exc)


class TaskRunner(Protocol):
    """Runs tasks somewhere (threads, Spark executors) and returns one outcome per task, in
    any order. It must not raise for a failing task: return a :class:`TaskFailure`."""

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]: ...


class ThreadTaskRunner:
    """Runs tasks in a thread pool of this process (``slate compact``, tests)."""

    def __init__(self, max_workers: int | None = None,
                 task_fn: Callable[[CompactionTask], TaskOutcome] = run_compaction_task) -> None:
        self.max_workers = max_workers or os.cpu_count() or 1
        self.task_fn = task_fn

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        return self.run_streaming(tasks, None)

    def run_streaming(self, tasks: Sequence[CompactionTask],
                      on_outcome: Callable[[TaskOutcome], None] | None,
                      ) -> list[TaskOutcome]:
        """:meth:`__call__`, calling ``on_outcome`` with each outcome as its task ends."""
        def one(task: CompactionTask) -> TaskOutcome:
            outcome = self.task_fn(task)
            if on_outcome is not None:
                on_outcome(outcome)
            return outcome

        if len(tasks) <= 1 or self.max_workers <= 1:
            return [one(t) for t in tasks]
        with ThreadPoolExecutor(min(self.max_workers, len(tasks)),
                                thread_name_prefix="compact-task") as pool:
            return list(pool.map(one, tasks))


class StreamingTaskRunner(TaskRunner, Protocol):
    """A runner that can also say when each task ends (worker mode records every finished
    key range at once): ``run_streaming(tasks, on_outcome)`` runs them as ``__call__``
    does, calling ``on_outcome`` once per task with its outcome, soon after it ends."""

    def run_streaming(self, tasks: Sequence[CompactionTask],
                      on_outcome: Callable[[TaskOutcome], None] | None,
                      ) -> list[TaskOutcome]: ...


def execute_tasks(runner: TaskRunner, tasks: Sequence[CompactionTask],
                  max_attempts: int) -> tuple[list[CompactionResult], int]:
    """Run ``tasks``, re-running the ones that failed transiently (new attempts write new
    SSTs; a failed attempt's SSTs are never referenced). Returns the results in task order
    and the number of task runs. Each result's ``times`` carry when its runner call began
    and returned (``submitted``, ``collected``), for the execute breakdown.

    Raises:
        SlateError: the first failure that is not transient, or that kept failing.
    """
    done: dict[int, CompactionResult] = {}
    pending = list(tasks)
    runs = 0
    for attempt in range(1, max(1, max_attempts) + 1):
        runs += len(pending)
        submitted = time.time()
        outcomes = runner(pending)
        collected = time.time()
        failures: list[TaskFailure] = []
        for o in outcomes:
            if isinstance(o, TaskFailure):
                failures.append(replace(o, attempt=attempt))
            else:
                times = o.times or TaskTimes()  # a runner may know its submit better
                times = replace(times, submitted=times.submitted or submitted,
                                collected=times.collected or collected)
                done[o.index] = replace(o, attempt=attempt, times=times)
        missing = {t.index for t in pending} - done.keys() - {f.index for f in failures}
        if missing:
            raise InvalidArgumentError(f"task runner returned no outcome for tasks "
                                       f"{sorted(missing)}")
        fatal = [f for f in failures if not f.retryable]
        if fatal:
            raise fatal[0].to_error()
        if not failures:
            break
        if attempt == max(1, max_attempts):
            raise failures[0].to_error()
        log.warning("retrying failed compaction tasks [tasks=%s, attempt=%d]",
                    sorted(f.index for f in failures), attempt + 1)
        retry = {f.index for f in failures}
        pending = [t for t in tasks if t.index in retry]
    return [done[t.index] for t in tasks], runs
