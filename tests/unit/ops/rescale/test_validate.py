"""Checking targets against their sources: scans as picklable tasks, failures as values,
the checkpoint to read a source at."""

from __future__ import annotations

import pickle
import uuid
from dataclasses import replace
from typing import Any

import pytest

from slatelib import DbReader, bulk_load, create_checkpoint
from slatelib.config import Settings, SstSettings
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
    from slatelib.format import native, seam
    from slatelib.ops.rescale import validate

    assert validate.range_stats is seam.range_stats
    assert (seam._PIPE is not None) == (
        native.speedups is not None and hasattr(native.speedups, "range_stats"))
    task = ScanTask(store.spec, "src", None, b"k03", None, None, 0, "source")
    fast = run_scan_task(task).stats
    monkeypatch.setattr(seam, "_PIPE", None)
    assert run_scan_task(task).stats == fast and fast is not None and fast.keys == 17


# ------------------------------------------------------------------ chunks as one task
def _small_blocks() -> Settings:
    return Settings(sst=SstSettings(block_size=256, min_filter_keys=10))


def test_a_chunk_scans_the_target_and_its_parts_opening_each_reader_once(
        store: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.ops.rescale import validate

    cp = create_checkpoint("src", store)
    plan = plan_merge("j", [("src", str(cp.id)), ("src2", str(cp.id))], "whole", now_ms=1)
    plan = replace(plan, sources=plan.sources[:1],
                   targets=(replace(plan.targets[0], parts=plan.targets[0].parts[:1]),))
    bulk_load("whole", store, [(b"k%02d" % i, b"v%d" % i) for i in range(20)])
    opened: list[tuple[str, str | None]] = []
    real_open = validate.open_reader

    def counting(task: ScanTask) -> DbReader:
        opened.append((task.path, task.checkpoint))
        return real_open(task)

    monkeypatch.setattr(validate, "open_reader", counting)
    target = ScanTask(store.spec, "whole", None, None, b"k10", None, 0, "target")
    part = ScanTask(store.spec, "src", str(cp.id), None, b"k10", None, 0, "source")
    later = ScanTask(store.spec, "whole", None, b"k10", None, None, 0, "target")
    chunk = validate.ChunkTask((target, part, later))
    out = validate.run_chunk_task(pickle.loads(pickle.dumps(chunk)))
    assert [o.stats.keys for o in out] == [10, 10, 10]  # type: ignore[union-attr]
    assert opened == [("whole", None), ("src", str(cp.id))]  # "whole" once for two scans
    [only] = validate.chunk_tasks(store, plan, 0, None, {0: str(cp.id)})
    assert [(s.path, s.side) for s in only.scans] == [("whole", "target"), ("src", "source")]


def test_a_failed_scan_in_a_chunk_is_a_value_and_the_others_still_run(
        store: ObjectStore) -> None:
    from slatelib.ops.rescale.validate import ChunkTask, run_chunk_task

    missing = ScanTask(store.spec, "missing", None, None, None, None, 0, "target")
    fine = ScanTask(store.spec, "src", None, None, None, None, 0, "source")
    out = run_chunk_task(ChunkTask((missing, fine)))
    assert out[0].stats is None and out[0].error_type == "NotADatabaseRootError"
    assert out[1].stats is not None and out[1].stats.keys == 20


def test_a_target_with_few_ssts_is_cut_into_balanced_chunks(store: ObjectStore) -> None:
    from slatelib.ops.rescale.validate import FEW_SSTS, chunk_keys, target_cuts
    from slatelib.store.manifest_store import ManifestStore

    rows = [(b"key%04d" % i, b"v" * (10 if i < 300 else 200)) for i in range(400)]
    bulk_load("one", store, rows, settings=_small_blocks())  # one SST, many blocks
    m = ManifestStore(store, "one").read_latest().value
    assert chunk_keys(m) == []  # one SST: by SSTs, a single chunk
    assert target_cuts(store, "one", m) == []
    cuts = target_cuts(store, "one", m, chunks=4)
    assert len(cuts) == 3 and cuts == sorted(set(cuts))
    bounds = [b"", *cuts, b"\xff"]
    size = [sum(len(k) + len(v) for k, v in rows if a <= k < b)
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    # by stored bytes (small rows carry more per-row overhead): the large values are cut finer
    assert max(size) < 2 * min(size), size
    assert all(cut >= b"key0300" for cut in cuts[1:])
    assert FEW_SSTS >= 1


def test_a_target_with_many_ssts_is_cut_at_its_sst_first_keys(
        store: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.ops.rescale import validate
    from slatelib.store.manifest_store import ManifestStore

    bulk_load("many", store, [(b"k%03d" % i, b"v%d" % i) for i in range(60)],
              target_sst_size=64)
    m = ManifestStore(store, "many").read_latest().value
    ssts = len({v.sst_id for v in m.all_views()})
    monkeypatch.setattr(validate, "FEW_SSTS", ssts - 1)
    assert validate.target_cuts(store, "many", m, chunks=2) == validate.chunk_keys(m)
    assert len(validate.chunk_keys(m)) == ssts - 1


def test_a_tiny_target_asked_for_more_chunks_than_keys_keeps_its_own(
        store: ObjectStore) -> None:
    from slatelib.ops.rescale.validate import target_cuts
    from slatelib.store.manifest_store import ManifestStore

    bulk_load("tiny", store, [(b"a", b"1"), (b"b", b"2")])
    m = ManifestStore(store, "tiny").read_latest().value
    assert target_cuts(store, "tiny", m, chunks=8) == []


def test_one_target_is_checked_on_its_own(store: ObjectStore) -> None:
    from slatelib.ops.rescale.validate import check_target, source_checkpoints

    bulk_load("b", store, [(b"k%02d" % i, b"v%d" % i * 40) for i in range(10, 20)],
              settings=_small_blocks())  # a target of several blocks: room for 3 chunks
    bulk_load("src2", store, [(b"k%02d" % i, b"v%d" % i * 40) for i in range(20)])
    cp = create_checkpoint("src2", store)
    plan = with_split_keys(plan_split("j", "src2", str(cp.id), ["a", "b"], None, now_ms=1),
                           [b"k10"])
    calls: list[int] = []

    def mapper(fn: Any, items: Any) -> list[Any]:
        calls.append(len(items))
        return [fn(i) for i in items]

    check = check_target(store, plan, 1, mapper, None, source_checkpoints(store, plan),
                         chunks=3)
    assert check.problem is None and check.actual.keys == check.expected.keys == 10
    assert calls == [3]  # one mapper call for the target, one item per chunk
