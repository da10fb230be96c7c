"""The rescale check in the compaction tasks: the same figures as the separate scan; a
damaged, missing or extra output SST, a commit that is not the checked outputs and rows
that differ (a value in one byte, a key on one side only, two rows swapped, with windows
cut anywhere) are caught; whatever the tasks cannot vouch for is checked by the scan."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from slatelib import Db
from slatelib.core.manifest import SstHandle
from slatelib.core.rescale_check import RangeStats
from slatelib.core.rescale_plan import RescalePlan
from slatelib.core.rescale_rows import RowWindow
from slatelib.errors import DataError, UnavailableError
from slatelib.objstore import ObjectStore
from slatelib.ops.engine import CompactionResult, CompactionTask, TaskOutcome, ThreadTaskRunner
from slatelib.ops.rescale import RescaleOptions, merge_databases, split_database, task_check
from slatelib.ops.rescale import job as job_module
from slatelib.ops.rescale.record import active_path
from slatelib.ops.rescale.task_check import (
    PartsCheck,
    TaskCheck,
    check_task_outputs,
    output_windows,
    run_checked_compaction_task,
    task_check_of,
)
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from tests.unit.ops.rescale.support import in_range, make_source, read, real_clock
from tests.unit.writer.support import memory_store, writer_settings

SHARDS = ["s-0", "s-1", "s-2"]


def _not_validated(store: ObjectStore) -> None:
    """Nothing released: the job record says running, the sources keep their checkpoints."""
    plan = RescalePlan.from_json(store.get(active_path("src")))
    assert plan.status == "running"
    assert ManifestStore(store, "src").read_latest().value.checkpoints


def test_every_target_is_checked_in_its_tasks_with_the_scans_figures(
        store: ObjectStore, clock: FakeClock) -> None:
    model = make_source(store, clock)
    twin = memory_store()
    make_source(twin, real_clock())
    fused = split_database("src", store, SHARDS, clock=clock).to_dict()
    scanned = split_database("src", twin, SHARDS, clock=clock,
                             options=RescaleOptions(check_in_tasks=False)).to_dict()
    assert [t["checked_by"] for t in fused["targets"]] == ["compaction tasks"] * 3
    assert [t["checked_by"] for t in scanned["targets"]] == ["scan"] * 3
    assert fused["validation"]["checked_in_tasks"] == 3
    assert scanned["validation"]["checked_in_tasks"] == 0
    assert fused["validation"]["ok"]
    # the same figures; the tasks compared rows (no digest), the scan digests
    figures = [(t["path"], t["ok"], t["expected"]["keys"], t["expected"]["bytes"],
                t["actual"]["keys"], t["actual"]["bytes"])
               for t in fused["validation"]["targets"]]
    assert figures == [(t["path"], t["ok"], t["expected"]["keys"], t["expected"]["bytes"],
                        t["actual"]["keys"], t["actual"]["bytes"])
                       for t in scanned["validation"]["targets"]]
    assert all(t["compared"] == "rows" and t["actual"]["digest"] is None
               and t["expected"]["digest"] is None for t in fused["validation"]["targets"])
    assert all(t["compared"] == "digests" and t["actual"]["digest"] == t["expected"]["digest"]
               for t in scanned["validation"]["targets"])
    assert fused["validation"]["source_keys"] == len(model)
    merged = merge_databases(SHARDS, "m", store, clock=clock).to_dict()
    assert merged["targets"][0]["checked_by"] == "compaction tasks"
    assert merged["validation"]["target_keys"] == len(model)
    assert read(store, "m") == model


def _rows(windows: Iterable[RowWindow]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for keys, values in windows
            for k, v in zip(keys.to_pylist(), values.to_pylist(), strict=True)]


def test_output_windows_read_the_stored_sst(store: ObjectStore, clock: FakeClock,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    model = make_source(store, clock)
    split_database("src", store, SHARDS, clock=clock, at=[b"k00100", b"k00200"])
    m = ManifestStore(store, "s-1").read_latest().value
    outputs = [m.sst(v.sst_id) for v in m.compacted[0].views]
    want = list(in_range(model, b"k00100", b"k00200").items())
    monkeypatch.setattr(task_check, "WINDOW_ROWS", 7)
    windows = list(output_windows(store, "s-1", outputs, None))
    assert len(windows) == -(-len(want) // 7) and _rows(windows) == want
    assert list(output_windows(store, "s-1", [], None)) == []
    path = DbPaths.of("s-1").compacted(outputs[0].id)
    data = bytearray(store.get(path))
    data[len(data) // 3] ^= 0xFF  # a flipped bit in a data block
    store.put(path, bytes(data))
    with pytest.raises(DataError):
        list(output_windows(store, "s-1", outputs, None))


Outputs = Sequence[SstHandle]


def _before_check(hook: Callable[[ObjectStore, CompactionTask, Outputs], None],
                  store: ObjectStore, *, target: str = "s-1") -> Callable[..., TaskCheck]:
    """:func:`check_task_outputs` (what the engine's hook runs once the outputs are
    written) that first runs ``hook`` on ``target``'s outputs."""
    real = task_check.check_task_outputs

    def check(obj_store: ObjectStore, task: CompactionTask, outputs: Outputs,
              scans: Any) -> TaskCheck:
        if task.db_path == target:
            hook(store, task, outputs)
        return real(obj_store, task, outputs, scans)

    return check


def _flip(store: ObjectStore, task: CompactionTask, outputs: Outputs) -> None:
    path = DbPaths.of(task.db_path).compacted(outputs[0].id)
    data = bytearray(store.get(path))
    data[len(data) // 3] ^= 0xFF
    store.put(path, bytes(data))


def _drop(store: ObjectStore, task: CompactionTask, outputs: Outputs) -> None:
    store.delete(DbPaths.of(task.db_path).compacted(outputs[-1].id))


@pytest.mark.parametrize("hook", [_flip, _drop], ids=["damaged", "missing"])
def test_a_damaged_or_missing_output_sst_is_caught_and_nothing_is_released(
        store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
        hook: Callable[[ObjectStore, CompactionTask, Outputs], None]) -> None:
    make_source(store, clock)
    monkeypatch.setattr(task_check, "check_task_outputs", _before_check(hook, store))
    with pytest.raises(DataError):
        split_database("src", store, SHARDS, clock=clock)
    _not_validated(store)


def test_an_output_lost_after_its_tasks_check_is_caught(
        store: ObjectStore, clock: FakeClock) -> None:
    """The tasks read every output back, then one disappears before the commit: the
    driver's look at the committed objects sends the target to the scan, which fails."""
    make_source(store, clock)
    checked: list[CompactionResult] = []

    def batch(tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        outcomes = ThreadTaskRunner(2, task_fn=run_checked_compaction_task)(tasks)
        for t, o in zip(tasks, outcomes, strict=True):
            check = task_check_of(o)
            if t.db_path == "s-1" and isinstance(o, CompactionResult) and check is not None:
                assert check.error is None
                checked.append(o)
                store.delete(DbPaths.of("s-1").compacted(o.outputs[0].id))
        return outcomes

    with pytest.raises(DataError):
        split_database("src", store, SHARDS, clock=clock, batch_runner=batch)
    assert checked
    _not_validated(store)


def test_a_commit_without_one_of_the_checked_outputs_is_caught(
        store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.ops.compaction import run as run_module

    make_source(store, clock)
    real_commit = run_module.commit_manifest

    def commit(manifests: Any, specs: Any, outputs: Any, **kwargs: Any) -> Any:
        [outs] = outputs
        if manifests.root == "s-1" and len(outs) > 1:
            outputs = [outs[:-1]]  # a commit that leaves a checked output out
        return real_commit(manifests, specs, outputs, **kwargs)

    monkeypatch.setattr(run_module, "commit_manifest", commit)
    with pytest.raises(DataError, match="s-1: holds"):
        split_database("src", store, SHARDS, clock=clock, settings=_small_ssts())
    _not_validated(store)


def test_a_commit_with_an_extra_sst_is_caught(
        store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit references an SST no task checked (a copy of the last output under a new
    id, after the last: its rows twice, out of order): the scan reads the target as
    committed and refuses it."""
    from dataclasses import replace

    from slatelib.ids import UlidGenerator
    from slatelib.ops.compaction import run as run_module

    make_source(store, clock)
    real_commit = run_module.commit_manifest

    def commit(manifests: Any, specs: Any, outputs: Any, **kwargs: Any) -> Any:
        [outs] = outputs
        if manifests.root == "s-1" and outs:
            last = outs[-1]
            copy = replace(last, id=UlidGenerator().new(clock.now_ms()))
            paths = DbPaths.of("s-1")
            store.put(paths.compacted(copy.id), store.get(paths.compacted(last.id)))
            outputs = [[*outs, copy]]
        return real_commit(manifests, specs, outputs, **kwargs)

    monkeypatch.setattr(run_module, "commit_manifest", commit)
    # natively the merge refuses the rows out of order; the pure-Python path counts them
    with pytest.raises(DataError, match="'s-1'|s-1: holds"):
        split_database("src", store, SHARDS, clock=clock)
    _not_validated(store)


def _small_ssts() -> Any:
    """Settings whose compactions write several small SSTs per target."""
    from dataclasses import replace

    from slatelib.config import Settings

    s = Settings()
    return replace(s, compaction=replace(s.compaction, max_sst_size=1024))


@pytest.mark.parametrize("flush", ["memtable", "wal"])
def test_a_row_written_to_a_target_after_its_commit_is_caught(
        store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
        flush: str) -> None:
    """The committed target gains a row before the check, in an L0 (its manifest is no
    longer the checked outputs) or only in its WAL: the scan reads it and finds the row."""
    make_source(store, clock)
    real = job_module.compact_target

    def compact(st: ObjectStore, plan: RescalePlan, target: Any, *args: Any,
                **kwargs: Any) -> dict[str, Any]:
        got = real(st, plan, target, *args, **kwargs)
        if target.path == "s-1":
            db = Db.open("s-1", st, writer_settings(), clock=clock)
            db.put(b"k00150x", b"not in the source")
            db.close(flush=flush)
        return got

    monkeypatch.setattr(job_module, "compact_target", compact)
    with pytest.raises(DataError, match="s-1: holds"):
        split_database("src", store, SHARDS, clock=clock)
    _not_validated(store)


Edit = Callable[[list[tuple[bytes, bytes]]], list[tuple[bytes, bytes]]]


def _edit_sources(monkeypatch: pytest.MonkeyPatch, edit: Edit, *, target: int = 1,
                  window: int | None = None) -> None:
    """The tasks of ``target`` read their parts' rows changed by ``edit`` (the rows of one
    part scan, as a list), re-cut into windows of ``window`` rows (default: as read)."""
    real = task_check.source_windows

    def changed(scan: Any, readers: Any) -> Iterator[RowWindow]:
        got = real(scan, readers)
        if scan.target != target:
            return got
        rows = edit(_rows(got))
        return iter(_windows(rows, window or max(1, len(rows))))

    monkeypatch.setattr(task_check, "source_windows", changed)


def _windows(rows: list[tuple[bytes, bytes]], size: int) -> list[RowWindow]:
    return [(pa.array([k for k, _ in rows[i:i + size]], pa.binary()),
             pa.array([v for _, v in rows[i:i + size]], pa.binary()))
            for i in range(0, len(rows), size)]


def _one_byte(rows: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    k, v = rows[40]
    return [*rows[:40], (k, v[:-1] + bytes([v[-1] ^ 1])), *rows[41:]]


def _drop(rows: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return rows[:40] + rows[41:]


def _add(rows: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [*rows[:41], (rows[40][0] + b"+", b"only in the source"), *rows[41:]]


def _swap(rows: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [*rows[:40], rows[41], rows[40], *rows[42:]]


@pytest.mark.parametrize(("edit", "says"), [
    (_one_byte, "key 6b3030313430: the outputs and the sources hold different values"),
    (_drop, "key 6b3030313430: in the outputs, not in the sources"),
    (_add, "key 6b30303134302b: in the sources, missing from the outputs"),
    (_swap, "key 6b3030313430: in the outputs, not in the sources"),
], ids=["value-one-byte", "key-in-outputs-only", "key-in-sources-only", "rows-swapped"])
@pytest.mark.parametrize("window", [None, 3], ids=["as-read", "tiny-windows"])
def test_rows_that_differ_in_the_tasks_fail_the_job(
        store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, edit: Edit,
        says: str, window: int | None) -> None:
    """The driver takes what the tasks found: parts' rows that differ from the outputs' (a
    value in one byte, a key on one side only, two rows in another order; each side cut into
    windows at other rows) are a :class:`DataError` naming the target and the first
    differing key, not a reason to scan again."""
    make_source(store, clock)
    if window is not None:
        monkeypatch.setattr(task_check, "WINDOW_ROWS", 2)  # the outputs' windows: 2 rows
    _edit_sources(monkeypatch, edit, window=window)
    with pytest.raises(DataError, match="s-1: holds") as got:
        split_database("src", store, SHARDS, clock=clock, at=[b"k00100", b"k00200"],
                       options=RescaleOptions(slots=1, parallelism=1))
    assert says in str(got.value) and "first in task 0" in str(got.value)
    _not_validated(store)


def test_windows_cut_at_different_rows_compare_equal(
        store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny windows on both sides, cut at other rows on each (the outputs' every 3 rows or
    64 bytes, the parts' every 5 rows and at each part's end): a split and a merge (one
    task over the three parts, read one after the other in key order) are checked in their
    tasks and pass."""
    model = make_source(store, clock)
    monkeypatch.setattr(task_check, "WINDOW_ROWS", 3)
    monkeypatch.setattr(task_check, "WINDOW_BYTES", 64)
    _edit_sources(monkeypatch, lambda rows: rows, target=0, window=5)
    split = split_database("src", store, SHARDS, clock=clock).to_dict()
    assert [t["checked_by"] for t in split["targets"]] == ["compaction tasks"] * 3
    assert split["validation"]["ok"] and split["validation"]["target_keys"] == len(model)
    merged = merge_databases(SHARDS, "m", store, clock=clock,  # one task: all three parts
                             options=RescaleOptions(live_window_s=0, parallelism=1,
                                                    slots=1)).to_dict()
    assert merged["targets"][0]["compaction"]["tasks"] == 1
    assert merged["targets"][0]["checked_by"] == "compaction tasks"
    assert merged["validation"]["ok"] and merged["validation"]["target_keys"] == len(model)
    assert read(store, "m") == model


def test_a_merge_of_sources_given_out_of_key_order_is_checked_in_its_tasks(
        store: ObjectStore, clock: FakeClock) -> None:
    """A merge's parts are whole sources (no range) in the order given: the task reads them
    in key order (by first key), so one task over all three passes."""
    model = make_source(store, clock)
    split_database("src", store, SHARDS, clock=clock)
    merged = merge_databases(["s-2", "s-0", "s-1"], "m", store, clock=clock,
                             options=RescaleOptions(live_window_s=0, parallelism=1,
                                                    slots=1)).to_dict()
    assert merged["targets"][0]["compaction"]["tasks"] == 1
    assert merged["targets"][0]["checked_by"] == "compaction tasks"
    assert merged["validation"]["ok"] and merged["validation"]["target_keys"] == len(model)
    assert read(store, "m") == model


def test_empty_ranges_compare_as_empty_streams(store: ObjectStore, clock: FakeClock) -> None:
    """A task's check over a range that holds no key: no outputs against empty parts is
    equal (0 keys each side); the task's real outputs against empty parts are rows in the
    outputs only; no outputs against the real parts are rows missing from the outputs."""
    make_source(store, clock)
    found: dict[str, Any] = {}

    def batch(tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        outcomes = ThreadTaskRunner(2, task_fn=run_checked_compaction_task)(tasks)
        for t, o in zip(tasks, outcomes, strict=True):
            parts = t.after_outputs
            if t.db_path == "s-1" and isinstance(parts, PartsCheck) and "empty" not in found:
                check = task_check_of(o)
                assert isinstance(o, CompactionResult) and check is not None
                assert check.equal and check.outputs is not None
                assert check.outputs.keys > 0
                empty = tuple(replace(sc, start=b"k00150a", end=b"k00150b")
                              for sc in parts.scans)
                found["empty"] = check_task_outputs(store, t, [], empty)
                found["extra"] = check_task_outputs(store, t, o.outputs, empty)
                found["missing"] = check_task_outputs(store, t, [], parts.scans)
        return outcomes

    report = split_database("src", store, SHARDS, clock=clock, at=[b"k00100", b"k00200"],
                            batch_runner=batch, options=RescaleOptions(slots=1, parallelism=1))
    assert report.to_dict()["validation"]["ok"]
    empty, extra, missing = found["empty"], found["extra"], found["missing"]
    assert empty.equal and empty.error is None
    assert (empty.outputs, empty.sources) == (RangeStats(), RangeStats())
    assert not extra.equal and extra.error is None and extra.difference.kind == "extra"
    assert extra.difference.row == 0 and extra.difference.key == b"k00100"
    assert extra.sources == RangeStats() and extra.outputs.keys == 100
    assert not missing.equal and missing.difference.kind == "missing"
    assert missing.difference.key == b"k00100" and missing.sources.keys == 100


def test_a_task_check_that_fails_leaves_its_target_to_the_scan(
        store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    model = make_source(store, clock)
    real = task_check.source_windows

    def failing(scan: Any, readers: Any) -> Iterator[RowWindow]:
        if scan.target == 2:
            raise UnavailableError("simulated")
        return real(scan, readers)

    monkeypatch.setattr(task_check, "source_windows", failing)
    report = split_database("src", store, SHARDS, clock=clock).to_dict()
    assert [t["checked_by"] for t in report["targets"]] == [
        "compaction tasks", "compaction tasks", "scan"]
    reason = report["targets"][2]["scan_reason"]
    assert "reading source 'src' at checkpoint" in reason and "UnavailableError: simulated" in reason
    assert report["validation"]["ok"] and report["validation"]["checked_in_tasks"] == 2
    assert report["validation"]["target_keys"] == len(model)


def test_tasks_run_without_their_hook_and_runner_factories_are_checked_by_the_scan(
        store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock)

    def execute_only(task: CompactionTask) -> TaskOutcome:  # a task function without hooks
        return ThreadTaskRunner(1)([replace(task, after_outputs=None)])[0]

    report = split_database("src", store, SHARDS, clock=clock,
                            batch_runner=ThreadTaskRunner(2, task_fn=execute_only)).to_dict()
    assert [t["checked_by"] for t in report["targets"]] == ["scan"] * 3
    assert all("without the in-task check" in t["scan_reason"] for t in report["targets"])
    plain = memory_store()
    make_source(plain, clock)
    report = split_database("src", plain, SHARDS, clock=clock,
                            batch_runner=ThreadTaskRunner(2)).to_dict()
    assert [t["checked_by"] for t in report["targets"]] == ["compaction tasks"] * 3
    twin = memory_store()
    make_source(twin, clock)
    report = split_database("src", twin, SHARDS, clock=clock,
                            runner_factory=lambda _: ThreadTaskRunner(2)).to_dict()
    assert [t["checked_by"] for t in report["targets"]] == ["scan"] * 3
    assert report["validation"]["ok"]


def test_checked_tasks_carry_their_parts_at_the_checkpoint(
        store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock)
    seen: list[tuple[str, PartsCheck]] = []

    def batch(tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        seen.extend((t.db_path, t.after_outputs) for t in tasks
                    if isinstance(t.after_outputs, PartsCheck))
        return ThreadTaskRunner(2, task_fn=run_checked_compaction_task)(tasks)

    report = split_database("src", store, SHARDS, clock=clock, at=[b"k00100", b"k00200"],
                            batch_runner=batch, options=RescaleOptions(slots=2)).to_dict()
    cp = report["sources"][0]["checkpoint_id"]
    by_target = dict(seen)
    assert sorted(by_target) == SHARDS
    for _, parts in seen:
        assert all(s.path == "src" and s.checkpoint == cp and s.side == "source"
                   for s in parts.scans)
    mid = [s for path, parts in seen if path == "s-1" for s in parts.scans]
    assert min(s.start or b"" for s in mid) == b"k00100"
    assert max(s.end or b"" for s in mid) == b"k00200"


def test_a_rerun_checks_targets_compacted_before_the_crash_by_the_scan(
        store: ObjectStore, clock: FakeClock) -> None:
    from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash

    model = make_source(store, clock)
    flaky = FlakyObjectStore(store)
    flaky.crash("put_if_absent", path="s-2/manifest/", skip=3)  # right after its commit
    with pytest.raises(SimulatedCrash):
        split_database("src", flaky, SHARDS, clock=clock)
    report = split_database("src", store, SHARDS, clock=clock).to_dict()
    assert [t["checked_by"] for t in report["targets"]] == ["scan"] * 3
    assert all(t["scan_reason"] == "not compacted by this run" for t in report["targets"])
    assert report["validation"]["ok"] and report["validation"]["target_keys"] == len(model)


def test_a_split_checked_in_its_tasks_runs_one_batch_and_no_scan(
        store: ObjectStore, clock: FakeClock) -> None:
    model = make_source(store, clock)
    batches: list[int] = []
    scans: list[int] = []

    def batch(tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        batches.append(len(tasks))
        return ThreadTaskRunner(2, task_fn=run_checked_compaction_task)(tasks)

    def mapper(fn: Any, items: Sequence[Any]) -> list[Any]:
        scans.append(len(items))
        return [fn(i) for i in items]

    report = split_database("src", store, SHARDS, clock=clock, batch_runner=batch,
                            mapper=mapper, options=RescaleOptions(slots=2)).to_dict()
    assert len(batches) == 1 and scans == []  # one Spark job in the job, no check job
    assert report["validation"]["ok"] and report["validation"]["source_keys"] == len(model)
