"""Compacting a rescale's targets with as few executor jobs as possible (step 5 of
docs/rfcs/0008-rescale-job.md; "Fixed costs" there says why).

Each target is still its own compaction (:func:`slatelib.ops.compaction.run_compaction`:
its own plan, fence, record and commit, on a driver thread), but the key-range tasks of all
the targets in flight run as ONE call of a :data:`BatchRunner` (one Spark job) instead of
one call per target: on a small cluster the fixed cost of a Spark job (scheduling, the
collection round trip, tens of milliseconds of driver CPU) is what a small target's
compaction is mostly made of.

:class:`TaskGather` hands each target a runner that parks the target's tasks until every
target in flight has either handed over its tasks or finished, and then runs them all at
once; :func:`compact_targets` runs the targets, up to ``concurrency`` at once, in waves
through it. Nothing about a target's compaction changes: its tasks, their retries (a
target's second runner call joins the next batch), its commit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from slatelib.errors import InternalError, SlateError
from slatelib.ops.engine import CompactionTask, TaskOutcome, TaskRunner

log = logging.getLogger(__name__)

C = TypeVar("C")

BatchRunner = Callable[[Sequence[CompactionTask]], list[TaskOutcome]]
"""Runs compaction tasks of several databases and returns one outcome per task, IN TASK
ORDER (indexes repeat across databases, so the order is what matches them), a failure as a
:class:`~slatelib.ops.engine.TaskFailure` value."""


class TaskGather:
    """Gathers the task lists of the targets in flight into single :data:`BatchRunner` calls.

    A target is *active* from :meth:`activate` to :meth:`finish`. Its runner
    (:meth:`runner`) parks its tasks; once every active target has parked some, one of the
    waiting threads runs them all as one batch and hands each target its outcomes. A target
    that finishes without running tasks (nothing to compact, a refusal, an error) leaves the
    others free to go.
    """

    def __init__(self, run_batch: BatchRunner) -> None:
        self._run_batch = run_batch
        self._cond = threading.Condition()
        self._active: set[int] = set()
        self._pending: dict[int, list[CompactionTask]] = {}
        self._results: dict[int, list[TaskOutcome] | BaseException] = {}
        self._running = False
        self.batches: list[int] = []
        """Tasks per batch run so far."""

    def activate(self, target: int) -> None:
        with self._cond:
            self._active.add(target)

    def finish(self, target: int) -> None:
        with self._cond:
            self._active.discard(target)
            self._pending.pop(target, None)
            self._results.pop(target, None)
            self._cond.notify_all()

    def runner(self, target: int) -> TaskRunner:
        """The runner to give ``target``'s compaction.

        The runner raises what the batch raised (a :data:`BatchRunner` returns task failures
        as values; anything it raises is a failure of every task in the batch)."""

        def run(tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
            return self._submit(target, tasks)

        return run

    def _submit(self, target: int, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        with self._cond:
            if target not in self._active:
                raise InternalError(f"rescale target {target} runs tasks while not active")
            self._pending[target] = list(tasks)
            self._cond.notify_all()
            while target not in self._results:
                if (not self._running and self._pending
                        and self._active <= self._pending.keys()):
                    batch, self._pending = self._pending, {}
                    self._running = True
                    break
                self._cond.wait()
            else:
                return self._take(target)
        try:
            got: dict[int, list[TaskOutcome]] | BaseException = self._run(batch)
        except BaseException as exc:  # every parked target gets it, this one too
            got = exc
        with self._cond:
            for t in batch:
                self._results[t] = got if isinstance(got, BaseException) else got[t]
            self._running = False
            self._cond.notify_all()
            return self._take(target)

    def _take(self, target: int) -> list[TaskOutcome]:
        got = self._results.pop(target)
        if isinstance(got, BaseException):
            raise got
        return got

    def _run(self, batch: dict[int, list[CompactionTask]]) -> dict[int, list[TaskOutcome]]:
        """One :data:`BatchRunner` call for every parked task; the outcomes by target.

        Raises:
            InternalError: the runner broke its contract (count or order of outcomes).
        """
        flat = [(t, task) for t, tasks in sorted(batch.items()) for task in tasks]
        self.batches.append(len(flat))
        outcomes = self._run_batch([task for _, task in flat]) if flat else []
        if len(outcomes) != len(flat):
            raise InternalError(f"batch runner returned {len(outcomes)} outcomes for "
                                f"{len(flat)} tasks")
        out: dict[int, list[TaskOutcome]] = {t: [] for t in batch}
        for (t, task), outcome in zip(flat, outcomes, strict=True):
            if outcome.index != task.index:
                raise InternalError(f"batch runner returned the outcome of task "
                                    f"{outcome.index} in the place of task {task.index}")
            out[t].append(outcome)
        return out


@dataclass
class Compacted(Generic[C]):
    """What :func:`compact_targets` did, per target (by index): ``results[i]`` what
    ``compact(i, runner)`` returned (None: it failed), ``errors[i]`` its
    :class:`SlateError`, ``seconds[i]`` how long it took; ``fatal``: other exceptions (a
    bug, a crash); ``batches``: tasks per batch (none without a batch runner)."""

    results: list[C | None]
    errors: list[SlateError | None]
    seconds: list[float]
    fatal: list[BaseException] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)

    def raise_first(self) -> None:
        """A fatal error, else the first failed target's error (by target).

        Raises:
            BaseException: as described.
        """
        if self.fatal:
            raise self.fatal[0]
        for err in self.errors:
            if err is not None:
                raise err


def compact_targets(n: int, compact: Callable[[int, TaskRunner | None], C], *,
                    concurrency: int, run_batch: BatchRunner | None) -> Compacted[C]:
    """Run ``compact(i, runner)`` for every target ``i < n``, up to ``concurrency`` at once
    (in index order, a new one as soon as one returns). With ``run_batch``, each target's
    ``runner`` is a :class:`TaskGather` runner, so the tasks of the targets in flight run
    together; without, it is None (the compaction's own default).

    Every target is tried: a :class:`SlateError` is recorded for its target, anything else
    as fatal; nothing is raised here (:meth:`Compacted.raise_first`).
    """
    out: Compacted[C] = Compacted([None] * n, [None] * n, [0.0] * n)
    gather = None if run_batch is None else TaskGather(run_batch)
    lock = threading.Lock()
    queue = deque(range(n))
    width = max(1, min(concurrency, n))
    first = [queue.popleft() for _ in range(min(width, n))]
    for i in first:  # the first wave is active before any of it can run a batch
        if gather is not None:
            gather.activate(i)

    def one(i: int) -> None:
        t = time.perf_counter()
        try:
            out.results[i] = compact(i, None if gather is None else gather.runner(i))
        except SlateError as exc:
            log.error("rescale target compaction failed [target=%d, error=%s]", i, exc)
            out.errors[i] = exc
        except BaseException as exc:  # a bug or a crash: recorded, raised by the caller
            with lock:
                out.fatal.append(exc)
        finally:
            out.seconds[i] = time.perf_counter() - t

    def worker(i: int | None) -> None:
        while i is not None:
            one(i)
            with lock:
                nxt = queue.popleft() if queue and not out.fatal else None
                if gather is not None and nxt is not None:
                    gather.activate(nxt)  # before the finished one leaves: no early batch
            if gather is not None:
                gather.finish(i)
            i = nxt

    threads = [threading.Thread(target=worker, args=(i,), name=f"rescale-target-{i}")
               for i in first]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if gather is not None:
        out.batches = list(gather.batches)
    return out
