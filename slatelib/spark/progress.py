"""Progress of Spark work, learnt on the driver from finished tasks (thin over
:mod:`slatelib.ops.progress`).

:func:`track` runs the ``with`` block's Spark jobs in a job group of their own and, from a
watcher thread, polls ``SparkContext.statusTracker()`` for the group's tasks (finished and
total) and, when given, an accumulator that the tasks add their work to (objects listed or
deleted, bytes compacted). Both reach the driver with each finished task's result, through
Spark itself, so this works the same with executors on other hosts; nothing is shared
through files. Progress is therefore per task: a task's work shows when it ends.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from slatelib.ops.progress import Progress

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["POLL_S", "SETTLE_S", "group_tasks", "track"]

POLL_S = 0.2
SETTLE_S = 2.0
"""At most this long after the block, for the status tracker to hear of its last tasks."""
_GROUP = "spark.jobGroup.id"


def group_tasks(sc: SparkContext, group: str) -> tuple[int, int, bool]:
    """``(finished, total, all ended)`` tasks of the stages of the job group's jobs so far,
    and whether every one of those jobs has ended. A stage of an ended job without a
    finished task was skipped (its output was cached or shuffled already) and does not
    count; a running job's pending stages do."""
    tracker = sc.statusTracker()
    done = total = 0
    all_ended = True
    for job_id in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job_id)
        if info is None:
            all_ended = False
            continue
        ended = str(info.status) in ("SUCCEEDED", "FAILED")
        all_ended = all_ended and ended
        for stage_id in info.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is None or (ended and stage.numCompletedTasks == 0):
                continue
            done += stage.numCompletedTasks
            total += stage.numTasks
    return done, total, all_ended


@contextmanager
def track(sc: SparkContext, progress: Progress, *, counter: Any = None,
          poll_s: float = POLL_S, settle: bool = True) -> Iterator[None]:
    """Feed ``progress`` while the block runs: ``counter.value`` (an accumulator) as done
    when given, with the fraction of tasks finished for the ETA (the total being unknown
    unless ``progress`` has one); else the finished tasks out of the tasks so far. The job
    group the block ran in is restored afterwards. A no-op when progress is off.
    ``settle=False``: when the block returns normally, do not wait for the status tracker's
    last counts (the caller finishes ``progress`` with its own; this wait is time the
    job's action would otherwise spend after its results are back)."""
    if progress.out is None:
        yield
        return
    group = f"slatelib-progress-{uuid.uuid4().hex[:12]}"
    previous = sc.getLocalProperty(_GROUP)
    sc.setJobGroup(group, progress.state.label)
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(poll_s):
            try:
                feed(sc, group, progress, counter)
            except Exception:  # progress is best effort: never fail the job over it
                return

    watcher = threading.Thread(target=poll, name="slatelib-progress", daemon=True)
    watcher.start()
    returned = False
    try:
        yield
        returned = True
    finally:
        stop.set()
        watcher.join()
        # The status tracker hears of finished tasks and jobs through Spark's listener bus,
        # a little after the action returned: wait for it (briefly) for the last counts,
        # unless the caller finishes the progress itself.
        deadline = time.monotonic() + (0.0 if returned and not settle else SETTLE_S)
        try:
            while (time.monotonic() < deadline
                   and not feed(sc, group, progress, counter)):
                time.sleep(0.02)
        except Exception:
            pass
        sc.setLocalProperty(_GROUP, previous)  # type: ignore[arg-type]


def feed(sc: SparkContext, group: str, progress: Progress, counter: Any) -> bool:
    """One poll (see :func:`track`); whether every job of the group had ended."""
    done, total, ended = group_tasks(sc, group)
    detail = f"{done}/{total} tasks" if total else ""
    if counter is not None:
        value = int(counter.value)  # a retried task adds again: never past a known total
        if progress.state.total is not None:
            value = min(value, progress.state.total)
        progress.update(value, fraction=done / total if total else None, detail=detail)
    else:
        progress.update(done, total=total or None)
    return ended
