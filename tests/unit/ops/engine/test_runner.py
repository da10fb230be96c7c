"""Running range tasks: the engine's hook after the outputs, failures as values, retries."""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pytest

from slatelib.core.compaction_plan import PlanOptions, Policy, plan_compaction
from slatelib.core.manifest import SstHandle
from slatelib.core.ranges import BytesRange
from slatelib.core.row import VALUE
from slatelib.errors import InvalidArgumentError, UnavailableError
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.engine import (
    CompactionResult,
    CompactionTask,
    TaskFailure,
    TaskOptions,
    TaskOutcome,
    ThreadTaskRunner,
    build_tasks,
    execute_tasks,
    input_views,
    run_compaction_task,
)
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.table_store import TableStore
from tests.compaction_fixtures import NOW_MS, SMALL, flush_l0, new_db

ROOT = "db"


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}/")


def tasks(store: ObjectStore, ranges: Sequence[BytesRange]) -> list[CompactionTask]:
    new_db(store, ROOT)
    for n in range(2):
        flush_l0(store, ROOT, [(b"k%03d" % i, n + 1, VALUE, b"v%d" % n, None, NOW_MS)
                               for i in range(50)])
    m = ManifestStore(store, ROOT).read_latest().value
    spec = plan_compaction(m, None, PlanOptions(Policy.L0))
    assert spec is not None
    views = input_views(spec, m, TableStore(store, ROOT))
    return build_tasks(spec, views, ranges, TaskOptions(
        store.spec, ROOT, spec.l0_views[0].id, SMALL, 1 << 30, None, 4, 1 << 20, NOW_MS))


@dataclass(frozen=True)
class CountOutputs:
    """A picklable hook: the number of output SSTs and the bytes of the first, read back."""

    label: str

    def __call__(self, store: ObjectStore, task: CompactionTask,
                 outputs: Sequence[SstHandle]) -> tuple[str, int, int]:
        first = store.get(DbPaths.of(task.db_path).compacted(outputs[0].id))
        return self.label, len(outputs), len(first)


@dataclass(frozen=True)
class Raising:
    def __call__(self, store: ObjectStore, task: CompactionTask,
                 outputs: Sequence[SstHandle]) -> object:
        raise UnavailableError("the hook could not read")


def test_built_tasks_have_no_hook_and_results_no_check(store: ObjectStore) -> None:
    [task] = tasks(store, [BytesRange.all()])
    assert task.after_outputs is None
    result = run_compaction_task(task, store=store)
    assert isinstance(result, CompactionResult) and result.check is None


def test_the_hook_runs_in_the_task_after_the_outputs_and_its_value_is_kept(
        store: ObjectStore) -> None:
    [task] = tasks(store, [BytesRange.all()])
    hooked = replace(task, after_outputs=CountOutputs("t"))
    assert pickle.loads(pickle.dumps(hooked)) == hooked  # it travels with the task
    result = run_compaction_task(hooked, store=store)
    assert isinstance(result, CompactionResult)
    assert result.check == ("t", len(result.outputs), result.metrics.bytes_out)
    [again] = ThreadTaskRunner(1)([hooked])  # the default task function runs hooks too
    assert isinstance(again, CompactionResult) and again.check is not None


def test_a_hook_that_raises_fails_its_task_as_a_value(store: ObjectStore) -> None:
    [task] = tasks(store, [BytesRange.all()])
    failure = run_compaction_task(replace(task, after_outputs=Raising()), store=store)
    assert isinstance(failure, TaskFailure) and failure.retryable
    assert failure.error_type == "UnavailableError" and "could not read" in failure.message


def test_execute_tasks_retries_transient_failures_and_keeps_the_checks(
        store: ObjectStore) -> None:
    built = [replace(t, after_outputs=CountOutputs(str(t.index))) for t in tasks(
        store, [BytesRange.half_open(None, b"k025"), BytesRange.half_open(b"k025", None)])]
    failed: set[int] = set()

    def flaky(batch: Sequence[CompactionTask]) -> list[TaskOutcome]:
        out: list[TaskOutcome] = []
        for t in batch:
            if t.index == 1 and not failed:
                failed.add(t.index)
                out.append(TaskFailure.of(t.index, UnavailableError("executor lost")))
            else:
                out.append(run_compaction_task(t, store=store))
        return out

    results, runs = execute_tasks(flaky, built, max_attempts=2)
    assert runs == 3 and [r.index for r in results] == [0, 1]
    assert [r.attempt for r in results] == [1, 2]
    assert [r.check[0] for r in results] == ["0", "1"]  # type: ignore[index]


def test_a_runner_that_loses_a_task_is_refused(store: ObjectStore) -> None:
    built = tasks(store, [BytesRange.all()])
    with pytest.raises(InvalidArgumentError, match="no outcome for tasks"):
        execute_tasks(lambda batch: [], built, max_attempts=1)
