"""Compacting targets with their key-range tasks gathered into few batches: who runs with
whom, the order of outcomes, and what becomes of failures."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from slatelib.errors import InternalError, UnavailableError
from slatelib.ops.engine import CompactionTask, TaskFailure, TaskOutcome, TaskRunner
from slatelib.ops.rescale.pipeline import TaskGather, compact_targets
from slatelib.testing.faulty import SimulatedCrash


class _Task:
    """Stands in for a CompactionTask: the gather only reads ``index`` (and ``db_path`` in
    these tests)."""

    def __init__(self, db: int, index: int) -> None:
        self.db_path = f"db-{db}"
        self.index = index


def _tasks(db: int, count: int) -> list[CompactionTask]:
    return [_Task(db, i) for i in range(count)]  # type: ignore[misc]


class _Batches:
    """A batch runner recording what ran together; each outcome names its task's database."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, int]]] = []
        self.lock = threading.Lock()

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        with self.lock:
            self.calls.append([(t.db_path, t.index) for t in tasks])
        return [TaskFailure(t.index, "Done", t.db_path, retryable=False) for t in tasks]


def _compact(count: int, seen: dict[int, list[str]]):
    def compact(i: int, runner: TaskRunner | None) -> int:
        assert runner is not None
        got = runner(_tasks(i, count))
        seen[i] = [o.message for o in got]  # type: ignore[union-attr]
        return i
    return compact


def test_the_tasks_of_every_target_in_flight_run_as_one_batch() -> None:
    batches = _Batches()
    seen: dict[int, list[str]] = {}
    out = compact_targets(4, _compact(2, seen), concurrency=4, run_batch=batches)
    out.raise_first()
    assert out.results == [0, 1, 2, 3] and out.batches == [8]
    assert sorted(batches.calls[0]) == [(f"db-{i}", j) for i in range(4) for j in range(2)]
    assert seen == {i: [f"db-{i}"] * 2 for i in range(4)}  # each target got its own outcomes


def test_targets_beyond_the_concurrency_run_in_later_batches() -> None:
    batches = _Batches()
    seen: dict[int, list[str]] = {}
    out = compact_targets(5, _compact(1, seen), concurrency=2, run_batch=batches)
    out.raise_first()
    assert sum(out.batches) == 5 and len(out.batches) >= 3 and max(out.batches) <= 2
    assert seen == {i: [f"db-{i}"] for i in range(5)}


def test_a_target_that_runs_no_tasks_does_not_hold_the_others() -> None:
    batches = _Batches()
    seen: dict[int, list[str]] = {}
    run_some = _compact(1, seen)

    def compact(i: int, runner: TaskRunner | None) -> int:
        if i == 1:
            return -1  # nothing to compact
        if i == 2:
            raise UnavailableError("the store is down")  # failed before running tasks
        return run_some(i, runner)

    out = compact_targets(4, compact, concurrency=4, run_batch=batches)
    assert out.results == [0, -1, None, 3] and isinstance(out.errors[2], UnavailableError)
    assert out.batches == [2] and seen == {0: ["db-0"], 3: ["db-3"]}
    with pytest.raises(UnavailableError, match="down"):
        out.raise_first()


def test_a_retry_runs_in_a_batch_of_its_own() -> None:
    batches = _Batches()

    def compact(i: int, runner: TaskRunner | None) -> int:
        assert runner is not None
        runner(_tasks(i, 1))
        if i == 0:
            runner(_tasks(i, 1))  # e.g. a transient failure retried
        return i

    out = compact_targets(2, compact, concurrency=2, run_batch=batches)
    out.raise_first()
    assert out.batches == [2, 1]


def test_a_failing_batch_fails_every_target_in_it() -> None:
    def broken(tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        raise SimulatedCrash("the driver died")

    out = compact_targets(3, _compact(1, {}), concurrency=3, run_batch=broken)
    assert len(out.fatal) == 3 and out.results == [None, None, None]
    with pytest.raises(SimulatedCrash):
        out.raise_first()


@pytest.mark.parametrize("shuffle", ["reversed", "short"])
def test_a_batch_runner_that_breaks_the_order_contract_is_caught(shuffle: str) -> None:
    def bad(tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        out = [TaskFailure(t.index, "Done", "", retryable=False) for t in tasks]
        return out[::-1] if shuffle == "reversed" else out[:-1]

    out = compact_targets(1, _compact(2, {}), concurrency=1, run_batch=bad)
    assert isinstance(out.errors[0], InternalError) and out.results == [None]
    with pytest.raises(InternalError, match="outcome"):
        out.raise_first()


def test_without_a_batch_runner_each_target_gets_none() -> None:
    got: list[TaskRunner | None] = []

    def compact(i: int, runner: TaskRunner | None) -> int:
        got.append(runner)
        return i

    out = compact_targets(3, compact, concurrency=2, run_batch=None)
    assert got == [None] * 3 and out.results == [0, 1, 2] and out.batches == []


def test_a_crash_stops_new_targets_from_starting() -> None:
    started: list[int] = []

    def compact(i: int, runner: TaskRunner | None) -> int:
        started.append(i)
        if i == 0:
            raise SimulatedCrash("killed")
        return i

    out = compact_targets(4, compact, concurrency=1, run_batch=None)
    assert started == [0] and len(out.fatal) == 1


def test_a_runner_of_a_target_not_in_flight_is_refused() -> None:
    gather = TaskGather(_Batches())
    with pytest.raises(InternalError, match="not active"):
        gather.runner(7)(_tasks(7, 1))
