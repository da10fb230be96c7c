"""Where a compaction's ``execute`` phase goes: the tasks' own code, and the rest, named.

Pure arithmetic over the timestamps the tasks and the driver record
(:class:`~slatelib.ops.engine.TaskTimes`), so it costs nothing on the executors and needs no
Spark listener. The report's ``execute_breakdown``::

    {"execute_s": 1.05,        # the execute phase's wall time (== phases_s["execute"])
     "tasks_s": 0.94,          # wall time during which at least one task ran its own code
     "task_share": 0.895,      # tasks_s / execute_s
     "overhead_s": 0.11,       # execute_s - tasks_s
     "overhead_share": 0.105,  # 1 - task_share
     "parts_s": {...}}         # the overhead by cause, summing to overhead_s (PARTS)

Each moment of the phase during which no task runs its own code is given to one part of
:data:`PARTS`, by what was going on then:

- ``driver_before_submit``: before the runner call (the driver's own work in the phase);
- ``scheduling``: after the submit, while no task has reached the runner's code on its
  executor yet (Spark's scheduling, task serialization and shipping, the executor's
  deserialization, Python worker start and the guard's check and unpickle);
- ``task_launch``: a task reached the runner's code but not its own yet (the task spec's
  unpickle, imports);
- ``result``: every task has ended and the results are not back on the driver yet (result
  pickle, transfer, the driver's unpickle, Spark's job end);
- ``driver_after``: after the runner call returned (the driver's bookkeeping);
- ``other``: gaps between tasks while the call runs (more tasks than slots, retries).

Clocks: executor timestamps are clamped to the driver's submit and collect times (a cluster
without synced clocks gives a rougher split, never an impossible one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from slatelib.ops.engine import TaskTimes

__all__ = ["PARTS", "execute_breakdown", "union_s"]

PARTS = ("driver_before_submit", "scheduling", "task_launch", "result", "driver_after",
         "other")


def union_s(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of ``[start, end)`` intervals (empty or reversed ones count
    nothing)."""
    total = 0.0
    cur_start = cur_end = None
    for a, b in sorted((a, b) for a, b in intervals if b > a):
        if cur_end is None or a > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = a, b
        else:
            cur_end = max(cur_end, b)
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


def _clamp(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


def execute_breakdown(start: float, execute_s: float,
                      times: Sequence[TaskTimes | None]) -> dict[str, Any]:
    """The ``execute_breakdown`` of a phase that began at ``start`` (epoch seconds) and
    lasted ``execute_s``, from its tasks' ``times`` (the final attempt's of each task; None
    or zero fields: not known, e.g. a result without times counts no task time)."""
    end = start + max(0.0, execute_s)
    known = [t for t in times if t is not None]
    submitted = _clamp(min((t.submitted for t in known if t.submitted), default=start),
                       start, end)
    collected = _clamp(max((t.collected for t in known if t.collected), default=end),
                       submitted, end)

    def inside(x: float) -> float:
        return _clamp(x, submitted, collected)

    own = [(inside(t.started), inside(t.ended)) for t in known if t.started and t.ended]
    launched = [(inside(t.launched or t.started), inside(t.started))
                for t in known if t.started and t.ended]
    first_launch = min((a for a, _ in launched), default=collected)
    last_end = max((b for _, b in own), default=submitted)
    points = sorted({start, end, submitted, collected, *(x for ab in own for x in ab),
                     *(a for a, _ in launched)})
    parts = dict.fromkeys(PARTS, 0.0)
    for a, b in zip(points, points[1:], strict=False):
        mid = (a + b) / 2
        if b <= a or any(s <= mid < e for s, e in own):
            continue
        parts[_part(mid, submitted, collected, first_launch, last_end, launched)] += b - a
    tasks_s = union_s(own)
    task_share = round(tasks_s / execute_s, 3) if execute_s > 0 else 0.0
    return {"execute_s": round(execute_s, 3), "tasks_s": round(tasks_s, 3),
            "task_share": task_share, "overhead_s": round(max(0.0, execute_s - tasks_s), 3),
            "overhead_share": round(1.0 - task_share, 3),
            "parts_s": {k: round(v, 3) for k, v in parts.items()}}


def _part(mid: float, submitted: float, collected: float, first_launch: float,
          last_end: float, launched: Sequence[tuple[float, float]]) -> str:
    """The part of :data:`PARTS` a moment with no task running its own code belongs to."""
    if mid < submitted:
        return "driver_before_submit"
    if mid >= collected:
        return "driver_after"
    if mid < first_launch:
        return "scheduling"
    if any(a <= mid < b for a, b in launched):
        return "task_launch"
    if mid >= last_end:
        return "result"
    return "other"
