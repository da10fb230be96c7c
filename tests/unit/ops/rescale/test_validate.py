"""Checking targets against their sources: scans as picklable tasks, failures as values,
the checkpoint to read a source at."""

from __future__ import annotations

import pickle
import uuid
from dataclasses import replace

import pytest

from slatelib import bulk_load, create_checkpoint
from slatelib.core.rescale_plan import plan_merge, plan_split, with_split_keys
from slatelib.errors import DataError, InvalidDbStateError
from slatelib.objstore import ObjectStore
from slatelib.ops.rescale.validate import (
    ScanTask,
    check_targets,
    reading_checkpoint,
    run_scan_task,
    thread_mapper,
)
from tests.unit.writer.support import memory_store


@pytest.fixture
def store() -> ObjectStore:
    s = memory_store()
    bulk_load("src", s, [(b"k%02d" % i, b"v%d" % i) for i in range(20)])
    return s


def test_a_scan_task_travels_and_counts(store: ObjectStore) -> None:
    task = ScanTask(store.spec, "src", None, b"k05", b"k10", None, 0, "source")
    out = run_scan_task(pickle.loads(pickle.dumps(task)))
    assert out.stats is not None and out.stats.keys == 5 and out.error is None


def test_a_failed_scan_is_a_value(store: ObjectStore) -> None:
    out = run_scan_task(ScanTask(store.spec, "missing", None, None, None, None, 0, "target"))
    assert out.stats is None and out.error_type == "NotADatabaseRootError"


def test_targets_missing_keys_are_found(store: ObjectStore) -> None:
    cp = create_checkpoint("src", store)
    plan = with_split_keys(plan_split("j", "src", str(cp.id), ["a", "b"], None, now_ms=1),
                           [b"k10"])
    bulk_load("a", store, [(b"k%02d" % i, b"v%d" % i) for i in range(10)])
    bulk_load("b", store, [(b"k%02d" % i, b"v%d" % i) for i in range(10, 19)])  # one short
    checks = check_targets(store, plan, thread_mapper(2), None)
    assert [c.problem is None for c in checks] == [True, False]
    assert checks[1].expected.keys == 10 and checks[1].actual.keys == 9


def test_an_unreadable_target_fails_the_check(store: ObjectStore) -> None:
    cp = create_checkpoint("src", store)
    plan = with_split_keys(plan_split("j", "src", str(cp.id), ["a", "b"], None, now_ms=1),
                           [b"k10"])
    with pytest.raises(DataError, match="target 'a'"):
        check_targets(store, plan, thread_mapper(1), None)


def test_without_the_job_checkpoint_there_is_nothing_to_compare_with(
        store: ObjectStore) -> None:
    plan = plan_split("j", "src", str(uuid.uuid4()), ["a", "b"], [b"k10"], now_ms=1)
    with pytest.raises(InvalidDbStateError, match="cannot be checked"):
        reading_checkpoint(store, plan, 0)


def test_scans_are_cut_into_chunks_that_add_up(store: ObjectStore) -> None:
    from slatelib.ops.rescale.validate import chunk_keys, scan_tasks
    from slatelib.store.manifest_store import ManifestStore

    cp = create_checkpoint("src", store)
    bulk_load("whole", store, [(b"k%02d" % i, b"v%d" % i) for i in range(20)],
              target_sst_size=64)
    m = ManifestStore(store, "whole").read_latest().value
    keys = chunk_keys(m)
    assert len(keys) >= 3 and chunk_keys(m, limit=3) == [keys[0], keys[len(keys) // 2]]
    firsts = sorted({m.sst(v.sst_id).info.first_entry or b"" for v in m.all_views()})
    assert keys == firsts[1:]  # no cut below the first SST: that chunk would hold nothing
    plan = plan_merge("j", [("src", str(cp.id)), ("src2", str(cp.id))], "whole", now_ms=1)
    plan = replace(plan, sources=plan.sources[:1],
                   targets=(replace(plan.targets[0], parts=plan.targets[0].parts[:1]),))
    tasks = scan_tasks(store, plan, None)
    assert len([t for t in tasks if t.side == "target"]) == len(keys) + 1
    assert all(run_scan_task(t).stats.keys > 0 for t in tasks)  # type: ignore[union-attr]
    [check] = check_targets(store, plan, thread_mapper(2), None)
    assert check.problem is None and check.actual.keys == 20


def test_scans_use_the_native_range_stats_when_built(store: ObjectStore,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.format import native
    from slatelib.ops.rescale import validate

    assert (validate.NATIVE_RANGE_STATS is not None) == (
        native.speedups is not None and hasattr(native.speedups, "range_stats"))
    task = ScanTask(store.spec, "src", None, b"k03", None, None, 0, "source")
    fast = run_scan_task(task).stats
    monkeypatch.setattr(validate, "NATIVE_RANGE_STATS", None)
    assert run_scan_task(task).stats == fast and fast is not None and fast.keys == 17
