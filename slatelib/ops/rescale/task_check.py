"""The rescale check fused into the compaction tasks (docs/rfcs/0016-rescale-check-in-tasks.md).

Each key-range task of a target's compaction, after writing its output SSTs, computes in
the same executor task:

- the rows of the outputs as stored (:func:`output_windows`): each one's object metadata
  (HEAD), then its blocks fetched again, checksum-checked, decoded, merged and resolved by
  the read path (:class:`~slatelib.store.read_view.ReadView` over a manifest of just those
  SSTs, a fresh :class:`TableStore` with no cache: nothing comes from the writer's memory);
- the rows of the target's parts over the task's key range (:func:`source_windows`), each
  read from its source database at the job's checkpoint by an independent
  :class:`DbReader` (its own manifest, views and merge), the parts' disjoint ranges one
  after the other in key order;

and compares the two row streams for exact equality, keys and values byte for byte and in
the same order (:func:`slatelib.core.rescale_rows.compare_row_streams`): both sides cover
exactly the same keys, so no digest is needed, and equal rows are a stronger proof than
equal digests. Both sides come as Arrow buffers from the native pipeline
(``DbReader.scan_buffers``), a window of each at a time.

After the target's commit, :meth:`FusedCheck.verify` checks on the driver, without a Spark
job, that the committed manifest references exactly the checked outputs
(:func:`slatelib.core.rescale_check.committed_problem`), that the objects are still the ones
read, that the tasks' ranges tile the key space and that every task found equal rows. Anything it
cannot vouch for (a task without the check, a check that failed to read, a manifest that
is not exactly the checked outputs, a target with WAL data) is left to the separate check
(:func:`~.validate.check_targets`), which reads the target as it is: never weaker.

Opt-in, through the range engine's hook: :class:`PartsCheck` (the part scans) is the
task's ``after_outputs`` (:class:`slatelib.ops.engine.OutputCheck`), which the engine calls
in the task once the outputs are written (:func:`slatelib.ops.engine.run_compaction_task`),
its :class:`TaskCheck` kept in the result's ``check``; a task without it is the compaction
alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

import pyarrow as pa  # type: ignore[import-untyped]

from slatelib.core.manifest import Manifest, SortedRun, SstHandle, SstView
from slatelib.core.ranges import BoundKind, BytesRange
from slatelib.core.rescale_check import RangeStats, check_tiling, committed_problem
from slatelib.core.rescale_plan import RescalePlan
from slatelib.core.rescale_rows import RowDifference, RowWindow, compare_row_streams
from slatelib.errors import InvalidDbStateError
from slatelib.format.native_pipe import ArrowBuffers
from slatelib.ids import Ulid, ulid_to_str
from slatelib.objstore import ObjectStore
from slatelib.ops.engine import (
    CompactionResult,
    CompactionTask,
    TaskOutcome,
    load_merge_operator,
    run_compaction_task,
)
from slatelib.ops.rescale.validate import COMPARED_ROWS, ReaderPool, ScanTask, TargetCheck
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.read_view import ReadView
from slatelib.store.table_store import TableStore
from slatelib.store.wal_store import WalStore

log = logging.getLogger(__name__)

BatchRunner = Callable[[Sequence[CompactionTask]], list[TaskOutcome]]

CHECKED_BY_TASKS = "compaction tasks"
"""``checked_by`` of a target whose check ran in its compaction tasks."""
CHECKED_BY_SCAN = "scan"
"""``checked_by`` of a target checked by the separate scan (:func:`~.validate.check_targets`)."""

WINDOW_ROWS = 16384
"""Rows per window of each side of a task's row comparison (with :data:`WINDOW_BYTES`:
what a side holds at a time beyond its readers' blocks)."""
WINDOW_BYTES = 4 * 1024 * 1024
"""A window ends once its keys + values reach this many bytes."""


@dataclass(frozen=True)
class OutputObject:
    """One output SST as the task read it back: its id, object size and e-tag."""

    sst_id: Ulid
    size: int
    e_tag: str | None


@dataclass(frozen=True)
class TaskCheck:
    """What one task's check found: the live keys and key + value bytes of its outputs read
    back and of its parts at the checkpoints (``digest`` 0: the rows were compared, not
    hashed), the first row where the two differ (None: identical rows), the outputs'
    objects; or why it could not check (``error``)."""

    outputs: RangeStats | None = None
    sources: RangeStats | None = None
    objects: tuple[OutputObject, ...] = ()
    seconds: float = 0.0
    error: str | None = None
    difference: RowDifference | None = None

    @property
    def equal(self) -> bool:
        """The check ran and found the outputs' rows identical to the parts'."""
        return self.error is None and self.difference is None


@dataclass(frozen=True)
class PartsCheck:
    """The engine hook (``CompactionTask.after_outputs``) of a rescale target's task: the
    scans of its parts (each a source at the job's checkpoint, clipped to the task's range),
    compared with the outputs once they are written (:func:`check_task_outputs`)."""

    scans: tuple[ScanTask, ...] = ()

    def __call__(self, store: ObjectStore, task: CompactionTask,
                 outputs: Sequence[SstHandle]) -> TaskCheck:
        return check_task_outputs(store, task, outputs, self.scans)


def task_check_of(outcome: TaskOutcome) -> TaskCheck | None:
    """The :class:`TaskCheck` a task's hook left in its result (None: a failed task, or one
    that ran without the check)."""
    check = outcome.check if isinstance(outcome, CompactionResult) else None
    return check if isinstance(check, TaskCheck) else None


class SideReadError(Exception):
    """Reading one side of a task's check failed: ``side`` names it (the outputs, or a
    source at its checkpoint); the cause is chained."""

    def __init__(self, side: str, cause: Exception) -> None:
        super().__init__(f"reading {side}: {type(cause).__name__}: {cause}")
        self.side = side


def _named(side: str, windows: Callable[[], Iterator[RowWindow]]) -> Iterator[RowWindow]:
    """The windows of ``windows()``, a failure to open or read them raised as
    :class:`SideReadError` naming ``side``."""
    try:
        yield from windows()
    except Exception as exc:
        raise SideReadError(side, exc) from exc


def arrow_window(b: ArrowBuffers) -> RowWindow:
    """The keys and values of a batch of :meth:`DbReader.scan_buffers` as two Arrow binary
    arrays (no copy: the arrays are views of the batch's buffers)."""
    keys = pa.Array.from_buffers(pa.binary(), b.num_rows,
                                 [None, pa.py_buffer(b.key_offsets), pa.py_buffer(b.key_data)])
    values = pa.Array.from_buffers(pa.binary(), b.num_rows, [
        None, pa.py_buffer(b.value_offsets), pa.py_buffer(b.value_data)])
    keys.validate()
    values.validate()
    return keys, values


def output_windows(store: ObjectStore, db_path: str, outputs: Sequence[SstHandle],
                   merge_operator: str | None) -> Iterator[RowWindow]:
    """What a reader sees in ``outputs`` (SSTs under ``db_path``, in key order), read from
    the store, in windows: every block fetched, checksum-checked, decoded, merged and
    resolved by the read path.

    Raises:
        SlateError: a missing or damaged SST (as any read), as the windows are read.
    """
    if not outputs:
        return iter(())
    views = tuple(SstView(h.id, h.id, None) for h in outputs)
    m = Manifest(ssts=tuple(sorted(outputs, key=lambda h: h.id)),
                 compacted=(SortedRun(0, views),))
    view = ReadView(TableStore(store, db_path), m, (), load_merge_operator(merge_operator))
    return map(arrow_window, view.scan_buffers(None, None, max_rows=WINDOW_ROWS,
                                               max_bytes=WINDOW_BYTES))


def source_windows(scan: ScanTask, readers: ReaderPool) -> Iterator[RowWindow]:
    """What ``scan``'s source holds over its range at its checkpoint, in windows, read by
    the pool's independent :class:`DbReader` of that source.

    Raises:
        SlateError: opening the reader or reading (as any read), as the windows are read.
    """
    reader = readers.get(scan)
    return map(arrow_window, reader.scan_buffers(scan.start, scan.end, max_rows=WINDOW_ROWS,
                                                 max_bytes=WINDOW_BYTES))


def parts_windows(scans: Sequence[ScanTask], readers: ReaderPool) -> Iterator[RowWindow]:
    """The windows of every part scan of a task, in key order: the parts of a target hold
    disjoint key ranges (a split's one part; a merge's sources, which the job refuses when
    their keys overlap, each unclipped and in the order given), so their rows, one part
    after the other by first key, are the task's range in key order. With several parts,
    each one's first key is read first (one pair: :meth:`DbReader.scan`), and a part with
    no row in the range is left out; each part is then read whole when its turn comes.

    Raises:
        SideReadError: opening a reader or reading failed (the source named, the cause
            chained).
    """
    if len(scans) > 1:
        firsts = []
        for scan in scans:
            try:
                first = next(iter(readers.get(scan).scan(scan.start, scan.end)), None)
            except Exception as exc:
                raise SideReadError(_source_side(scan), exc) from exc
            if first is not None:
                firsts.append((first[0], scan))
        scans = [scan for _, scan in sorted(firsts, key=lambda f: f[0])]
    for scan in scans:
        yield from _named(_source_side(scan), partial(source_windows, scan, readers))


def _source_side(scan: ScanTask) -> str:
    return f"source {scan.path!r} at checkpoint {scan.checkpoint}"


def check_task_outputs(store: ObjectStore, task: CompactionTask, outputs: Sequence[SstHandle],
                       scans: Sequence[ScanTask]) -> TaskCheck:
    """The check of one finished task (:class:`TaskCheck`; a failure to read as ``error``,
    a difference between the rows as ``difference``)."""
    started = time.perf_counter()
    try:
        paths = DbPaths.of(task.db_path)
        objects = []
        for h in outputs:
            meta = store.head(paths.compacted(h.id))
            objects.append(OutputObject(h.id, meta.size, meta.e_tag))
        readers = ReaderPool()
        try:
            got = compare_row_streams(
                _named(f"the outputs of {task.db_path!r}", partial(
                    output_windows, store, task.db_path, outputs, task.merge_operator)),
                parts_windows(scans, readers))
        finally:
            try:
                readers.close()
            except Exception as exc:  # the rows are compared
                log.warning("rescale task check: closing a reader failed [error=%s]", exc)
        if got.difference is not None:
            log.warning("rescale task check: rows differ [task=%s, %s]", task.label,
                        got.difference.describe("outputs", "sources"))
        return TaskCheck(got.actual, got.expected, tuple(objects),
                         round(time.perf_counter() - started, 4), difference=got.difference)
    except Exception as exc:  # the compaction stands; the driver falls back to the scan
        log.warning("rescale task check failed [task=%s, error=%s]", task.label, exc)
        return TaskCheck(seconds=round(time.perf_counter() - started, 4),
                         error=str(exc) if isinstance(exc, SideReadError)
                         else f"{type(exc).__name__}: {exc}")


run_checked_compaction_task = run_compaction_task
"""The task function of a rescale's runners: the engine's, which runs a task's
:class:`PartsCheck` after its outputs (kept under this name for ``jobs/rescale.py``). A
failed check never fails the task (:func:`check_task_outputs` reports it as ``error``): the
compaction is committed as without it, and the driver checks that target by the scan."""


def _half_open(r: BytesRange) -> tuple[bytes | None, bytes | None] | None:
    """``r`` as ``[start, end)`` keys (None: unbounded); None when it is not of that shape
    (the scans take half-open ranges only)."""
    s, e = r.start, r.end
    if s.kind not in (BoundKind.INCLUDED, BoundKind.UNBOUNDED) or e.kind not in (
            BoundKind.EXCLUDED, BoundKind.UNBOUNDED):
        return None
    return (None if s.kind == BoundKind.UNBOUNDED else s.key,
            None if e.kind == BoundKind.UNBOUNDED else e.key)


@dataclass
class _Target:
    index: int
    path: str
    parts: list[tuple[str, str, BytesRange]]
    """(source path, checkpoint id, range) per part."""
    runs: list[tuple[CompactionTask, TaskOutcome]]


class FusedCheck:
    """The rescale's side of the fused check: attaches a :class:`PartsCheck` to the targets'
    compaction tasks (:meth:`batch_runner`), keeps their outcomes, and verifies each
    committed target (:meth:`verify`)."""

    def __init__(self, store: ObjectStore, plan: RescalePlan, checkpoints: Mapping[int, str],
                 merge_operator: str | None) -> None:
        self.store = store
        self.merge_operator = merge_operator
        self._lock = threading.Lock()
        self._targets: dict[str, _Target] = {}
        for i, t in enumerate(plan.targets):
            parts = [(plan.sources[p.source].path, checkpoints[p.source],
                      p.range or BytesRange.all()) for p in t.parts]
            self._targets[t.path] = _Target(i, t.path, parts, [])

    def wrap(self, task: CompactionTask) -> CompactionTask:
        """``task`` with its part scans as its hook (unchanged: not a target's, a task with a
        hook already, or a range the scans cannot take)."""
        target = self._targets.get(task.db_path)
        if target is None or task.after_outputs is not None:
            return task
        scans = []
        for path, checkpoint, rng in target.parts:
            clipped = task.range.intersect(rng)
            if clipped.is_empty():
                continue
            keys = _half_open(clipped)
            if keys is None:
                return task
            scans.append(ScanTask(task.store, path, checkpoint, keys[0], keys[1],
                                  self.merge_operator, target.index, "source"))
        return replace(task, after_outputs=PartsCheck(tuple(scans)))

    def batch_runner(self, inner: BatchRunner) -> BatchRunner:
        """``inner`` running the wrapped tasks; every outcome kept for :meth:`verify`."""

        def run(tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
            wrapped = [self.wrap(t) for t in tasks]
            outcomes = inner(wrapped)
            with self._lock:
                for task, outcome in zip(wrapped, outcomes, strict=False):
                    target = self._targets.get(task.db_path)
                    if target is not None:
                        target.runs.append((task, outcome))
            return outcomes

        return run

    def verify(self, index: int, path: str, compaction_id: str | None,
               ) -> TargetCheck | str:
        """The check of target ``path`` as committed by compaction ``compaction_id`` (its
        id as reported), or why the tasks' checks cannot vouch for it (then the separate
        scan checks it).

        Raises:
            SlateError: reading the target's manifest or WAL failed.
        """
        target = self._targets.get(path)
        if target is None or target.index != index:
            return "not a target of this check"
        if compaction_id is None:
            return "not compacted by this run"
        with self._lock:
            runs = [(t, o) for t, o in target.runs if ulid_to_str(t.compaction_id) == compaction_id]
        done: dict[int, tuple[CompactionTask, CompactionResult]] = {}
        for task, outcome in runs:
            if not isinstance(outcome, CompactionResult):
                continue  # a failed attempt: its outputs are never referenced
            if outcome.index in done:
                return f"task {outcome.index} succeeded more than once"
            done[outcome.index] = (task, outcome)
        if not done or sorted(done) != list(range(len(done))):
            return "the compaction's tasks are not all known"
        ordered = [done[i] for i in range(len(done))]
        checks: list[TaskCheck] = []
        for _, outcome in ordered:
            check = task_check_of(outcome)
            if check is None:
                return f"task {outcome.index} ran without the in-task check"
            if check.error is not None:
                return f"task {outcome.index}'s check failed: {check.error}"
            checks.append(check)
        try:
            check_tiling([t.range for t, _ in ordered])
        except InvalidDbStateError as exc:
            return f"the compaction's key ranges do not tile the key space: {exc}"
        outputs = [h for _, o in ordered for h in o.outputs]
        latest = ManifestStore(self.store, path).read_latest()
        m = latest.value
        problem = committed_problem(m, outputs, {p for p, _, _ in target.parts})
        if problem is not None:
            return f"manifest {latest.id}: {problem}"
        if WalStore(self.store, path).exists(m.replay_after_wal_id + 1):
            return f"it has WAL SSTs after {m.replay_after_wal_id}"
        paths = DbPaths.of(path)
        for obj in (o for c in checks for o in c.objects):
            try:
                meta = self.store.head(paths.compacted(obj.sst_id))
            except Exception as exc:  # missing or unreadable: the scan says which
                return f"output SST {ulid_to_str(obj.sst_id)}: {type(exc).__name__}: {exc}"
            if meta.size != obj.size or (obj.e_tag is not None and meta.e_tag != obj.e_tag):
                return (f"output SST {ulid_to_str(obj.sst_id)} is not the object its task "
                        "read back")
        actual = sum((c.outputs for c in checks if c.outputs is not None), RangeStats())
        expected = sum((c.sources for c in checks if c.sources is not None), RangeStats())
        first = next(((i, c.difference) for i, c in enumerate(checks)
                      if c.difference is not None), None)
        problem = None
        difference = None
        if first is not None or (actual.keys, actual.nbytes) != (expected.keys, expected.nbytes):
            problem = (f"{path}: holds {actual.keys} keys / {actual.nbytes} bytes, its sources' "
                       f"ranges {expected.keys} keys / {expected.nbytes} bytes")
            if first is not None:
                i, diff = first
                where = ordered[i][0].range
                difference = {"task": i, **diff.to_dict()}
                problem += (f"; the rows differ, first in task {i} ({where}) at "
                            f"{diff.describe('the outputs', 'the sources')}")
        return TargetCheck(path, expected, actual, problem, compared=COMPARED_ROWS,
                           first_difference=difference)


__all__ = ["CHECKED_BY_SCAN", "CHECKED_BY_TASKS", "WINDOW_BYTES", "WINDOW_ROWS", "FusedCheck",
           "OutputObject", "PartsCheck", "SideReadError", "TaskCheck", "arrow_window",
           "check_task_outputs", "output_windows", "parts_windows", "run_checked_compaction_task",
           "source_windows", "task_check_of"]
