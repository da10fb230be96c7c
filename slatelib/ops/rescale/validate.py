"""Checking a rescale before it reports success: every target holds exactly its sources'
ranges at the job's checkpoints. This is the separate scan: the job checks a target this
way when its compaction tasks could not (:mod:`~.task_check`; a rerun after a crash, for
example), or every target with ``RescaleOptions(check_in_tasks=False)``.

Each target is scanned as it is now, and each of its parts (a source range) at the
checkpoint it was cloned from, in chunks of about one target SST (at least as many as the
caller asks for, balanced by bytes when the target has few SSTs: :func:`target_cuts`). A
chunk is one :class:`ChunkTask` (small, picklable: :class:`ScanTask` values, each a
``StoreSpec`` and a range): the target's scan and its parts' scans over the same keys, in one
executor task that opens each database's reader once (:func:`run_chunk_task`). A
:data:`Mapper` runs the chunks anywhere (threads here, Spark executors in the job): every
target's in one call (:func:`check_targets`, what the job does: one Spark job), or one
target's (:func:`check_target`). Keys, key + value bytes and an order-independent digest
must agree
(:class:`~slatelib.core.rescale_check.RangeStats`), which also proves that every target is
readable. The stats are computed in C (``slatelib._speedups.range_stats``, the same numbers as
the pure-Python ``RangeStats.of``) when the extension is built:
:func:`slatelib.format.seam.range_stats`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from slatelib.core.manifest import Manifest
from slatelib.core.rescale_check import RangeStats, compare_stats
from slatelib.core.rescale_plan import RescalePlan, balanced_split_keys
from slatelib.errors import (
    DataError,
    InvalidArgumentError,
    InvalidDbStateError,
    StorageError,
    UnavailableError,
)
from slatelib.format import seam
from slatelib.objstore import ObjectStore, StoreSpec
from slatelib.ops.engine import fine_anchors, load_merge_operator
from slatelib.ops.rescale.balance import manifest_views
from slatelib.reader import DbReader
from slatelib.store.manifest_store import ManifestStore

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

_TRANSIENT: dict[str, type[Exception]] = {"UnavailableError": UnavailableError,
                                          "StorageError": StorageError}

MAX_CHUNKS_PER_TARGET = 64
"""Most scan chunks per target (and per part)."""

FEW_SSTS = 16
"""A target of at most this many SSTs is cut into chunks of balanced bytes read from its SST
indexes (:func:`target_cuts`); a larger one at its SSTs' first keys."""

Mapper = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]
"""Runs a function over items somewhere and returns the results in item order."""

range_stats = seam.range_stats
""":meth:`RangeStats.of` of ``(key, value)`` pairs: natively when the extension is built (the
same keys, bytes and digest, tests/unit/core/test_rescale_check.py), else in Python."""


def thread_mapper(workers: int = 4) -> Mapper:
    """A :data:`Mapper` on a thread pool of this process."""

    def run(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if len(items) <= 1 or workers <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(min(workers, len(items)),
                                thread_name_prefix="rescale-scan") as pool:
            return list(pool.map(fn, items))

    return run


@dataclass(frozen=True)
class ScanTask:
    """Scan ``path`` (at ``checkpoint``, else its latest state) over ``[start, end)``."""

    store: StoreSpec
    path: str
    checkpoint: str | None
    start: bytes | None
    end: bytes | None
    merge_operator: str | None
    target: int
    """Index of the target this scan is for."""
    side: str
    """``"target"`` or ``"source"``."""


@dataclass(frozen=True)
class ScanOutcome:
    task: ScanTask
    stats: RangeStats | None
    error: str | None = None
    error_type: str | None = None


def open_reader(task: ScanTask) -> DbReader:
    """A reader of ``task``'s database: at its checkpoint, else at its latest state.

    Raises:
        SlateError: as :meth:`DbReader.open`.
    """
    return DbReader.open(task.path, task.store.open(), checkpoint=task.checkpoint,
                         mode="latest", merge_operator=load_merge_operator(task.merge_operator))


class ReaderPool:
    """The readers of one executor task, one per database and checkpoint, each opened on
    first use and closed by :meth:`close` (a chunk scans a target and its parts with one
    open each, not one per scan)."""

    def __init__(self) -> None:
        self._readers: dict[tuple[str, str | None], DbReader] = {}

    def get(self, task: ScanTask) -> DbReader:
        """Raises: SlateError: as :meth:`DbReader.open`."""
        key = (task.path, task.checkpoint)
        reader = self._readers.get(key)
        if reader is None:
            reader = self._readers[key] = open_reader(task)
        return reader

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()


def run_scan_task(task: ScanTask, readers: ReaderPool | None = None) -> ScanOutcome:
    """Scan one range; a failure comes back as a value (what a mapper ships to executors).
    ``readers``: take the reader from there (left open) instead of opening and closing one."""
    try:
        with open_reader(task) if readers is None else nullcontext(readers.get(task)) as reader:
            return ScanOutcome(task, reader.scan_stats(task.start, task.end))
    except Exception as exc:  # every failure becomes a value; the driver raises
        log.warning("rescale scan failed [path=%s, error=%s]", task.path, exc)
        return ScanOutcome(task, None, str(exc), type(exc).__name__)


@dataclass(frozen=True)
class ChunkTask:
    """One chunk of one target: the target's scan and its parts' scans over the same keys,
    run by one executor task (:func:`run_chunk_task`)."""

    scans: tuple[ScanTask, ...]


def run_chunk_task(chunk: ChunkTask) -> list[ScanOutcome]:
    """Every scan of ``chunk``, in order, each database's reader opened once; failures come
    back as values (:func:`run_scan_task`)."""
    readers = ReaderPool()
    try:
        return [run_scan_task(t, readers) for t in chunk.scans]
    finally:
        try:
            readers.close()
        except Exception as exc:  # the stats are taken; a reader that fails to close is no failure
            log.warning("rescale scan: closing a reader failed [error=%s]", exc)


def reading_checkpoint(store: ObjectStore, plan: RescalePlan, source: int) -> str:
    """A checkpoint of ``source`` that pins the manifest the job cloned: the job's own, or
    (when that is gone) a target's final checkpoint copied from it.

    Raises:
        InvalidDbStateError: neither is there any more.
    """
    src = plan.sources[source]
    latest = ManifestStore(store, src.path).read_latest().value
    if latest.checkpoint(uuid.UUID(src.checkpoint_id)) is not None:
        return src.checkpoint_id
    for t in plan.targets:
        m = ManifestStore(store, t.path).try_read_latest()
        for e in () if m is None else m.value.external_dbs:
            if (e.path == src.path and str(e.source_checkpoint_id) == src.checkpoint_id
                    and e.final_checkpoint_id is not None
                    and latest.checkpoint(e.final_checkpoint_id) is not None):
                return str(e.final_checkpoint_id)
    raise InvalidDbStateError(
        f"source {src.path!r} no longer holds checkpoint {src.checkpoint_id} of rescale job "
        f"{plan.job_id} (nor a target's copy of it): the targets cannot be checked against it")


def chunk_keys(m: Manifest, *, limit: int = MAX_CHUNKS_PER_TARGET) -> list[bytes]:
    """Keys that cut a target's scan into chunks of about one SST each (its SSTs' first
    keys but the smallest, at most ``limit - 1`` of them, evenly picked): stats of disjoint
    chunks add up, so the chunks run in parallel. No SST holds a key below the smallest
    first key, so a cut there would only add a chunk (a target and a source scan) that
    reads nothing; the first chunk starts at the beginning of the key space instead."""
    firsts = sorted({m.sst(v.sst_id).info.first_entry or b"" for v in m.all_views()} - {b""})
    firsts = firsts[1:]
    if len(firsts) < limit:
        return firsts
    step = len(firsts) / (limit - 1)
    return sorted({firsts[int(i * step)] for i in range(limit - 1)})


def _clip(start: bytes | None, end: bytes | None, a: bytes | None, b: bytes | None,
          ) -> tuple[bytes | None, bytes | None] | None:
    """``[start, end) ∩ [a, b)`` (None: unbounded; None result: empty)."""
    lo = a if start is None else start if a is None else max(start, a)
    hi = b if end is None else end if b is None else min(end, b)
    if lo is not None and hi is not None and lo >= hi:
        return None
    return lo, hi


def target_cuts(store: ObjectStore, path: str, m: Manifest, *, chunks: int = 1,
                limit: int = MAX_CHUNKS_PER_TARGET) -> list[bytes]:
    """Keys that cut the target at ``path`` (manifest ``m``) into chunks: about one per SST
    (:func:`chunk_keys`), at least ``chunks`` and at most ``limit``. A target of at most
    :data:`FEW_SSTS` SSTs is cut at keys that balance its bytes, from its SST indexes (the
    anchors of :mod:`slatelib.core.range_split`), so that its few chunks take about equally
    long; a larger one at its SSTs' first keys, which needs no read. Either way the cuts
    are strictly ascending, so the chunks tile the key space.

    Raises:
        CorruptObjectError / ChecksumMismatchError / SstMissingError: an unreadable index.
    """
    keys = chunk_keys(m, limit=limit)
    count = min(limit, max(chunks, len(keys) + 1))
    if count <= 1 or len({v.sst_id for v in m.all_views()}) > FEW_SSTS:
        return keys
    views = manifest_views(store, path, m)
    with ThreadPoolExecutor(max(1, min(FEW_SSTS, len(views))),
                            thread_name_prefix="rescale-chunks") as pool:
        anchors = [a for got in pool.map(lambda v: fine_anchors(store, v, None), views)
                   for a in got]
    try:
        return list(balanced_split_keys(anchors, count))
    except InvalidArgumentError:  # fewer distinct block keys than chunks: a small target
        return keys


def source_checkpoints(store: ObjectStore, plan: RescalePlan) -> dict[int, str]:
    """:func:`reading_checkpoint` of every source, by index.

    Raises:
        InvalidDbStateError: a source checkpoint to compare with is gone.
    """
    return {i: reading_checkpoint(store, plan, i) for i in range(len(plan.sources))}


def chunk_tasks(store: ObjectStore, plan: RescalePlan, target: int, merge_operator: str | None,
                checkpoints: Mapping[int, str], *, chunks: int = 1) -> list[ChunkTask]:
    """The target's key space cut into chunks (:func:`target_cuts`): per chunk, one task
    that scans the target as it is now and each part (its source range at the checkpoint
    in ``checkpoints``) clipped to the chunk.

    Raises:
        CorruptObjectError / ChecksumMismatchError / SstMissingError: an unreadable index.
    """
    spec = store.spec
    t = plan.targets[target]
    latest = ManifestStore(store, t.path).try_read_latest()
    cuts: list[bytes | None] = [None]
    cuts += [] if latest is None else target_cuts(store, t.path, latest.value, chunks=chunks)
    cuts.append(None)
    out = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        scans = [ScanTask(spec, t.path, None, a, b, merge_operator, target, "target")]
        for p in t.parts:
            rng = p.range
            part = _clip(None if rng is None else rng.start.key,
                         None if rng is None else rng.end.key, a, b)
            if part is not None:
                scans.append(ScanTask(spec, plan.sources[p.source].path,
                                      checkpoints[p.source], *part, merge_operator, target,
                                      "source"))
        out.append(ChunkTask(tuple(scans)))
    return out


def scan_tasks(store: ObjectStore, plan: RescalePlan, merge_operator: str | None,
               ) -> list[ScanTask]:
    """Every scan of every target's chunks (:func:`chunk_tasks`), flattened."""
    checkpoints = source_checkpoints(store, plan)
    return [s for ti in range(len(plan.targets))
            for c in chunk_tasks(store, plan, ti, merge_operator, checkpoints)
            for s in c.scans]


COMPARED_DIGESTS = "digests"
"""``compared`` of a target checked by the scan: keys, bytes and the order-independent
digests of its chunks (their cuts differ from the target's SSTs and the sources')."""
COMPARED_ROWS = "rows"
"""``compared`` of a target checked in its compaction tasks: the rows themselves, keys and
values byte for byte in key order (:mod:`slatelib.core.rescale_rows`); no digest."""


@dataclass(frozen=True)
class TargetCheck:
    """One target's check: its parts' figures (``expected``) and its own (``actual``),
    what was compared (:data:`COMPARED_DIGESTS`: the digests are meaningful;
    :data:`COMPARED_ROWS`: they are not computed), and what differs (None: nothing), with
    the first differing row when rows were compared."""

    path: str
    expected: RangeStats
    actual: RangeStats
    problem: str | None
    compared: str = COMPARED_DIGESTS
    first_difference: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        expected, actual = self.expected.to_dict(), self.actual.to_dict()
        if self.compared != COMPARED_DIGESTS:
            expected["digest"] = actual["digest"] = None
        return {"path": self.path, "ok": self.problem is None, "compared": self.compared,
                "expected": expected, "actual": actual,
                **({} if self.problem is None else {"problem": self.problem}),
                **({} if self.first_difference is None
                   else {"first_difference": self.first_difference})}


def check_target(store: ObjectStore, plan: RescalePlan, target: int, mapper: Mapper,
                 merge_operator: str | None, checkpoints: Mapping[int, str], *,
                 chunks: int = 1) -> TargetCheck:
    """Scan one target and its parts, chunk by chunk (one mapper call); the comparison.

    Raises:
        UnavailableError / StorageError / DataError: a scan failed (the first failure,
            named), or the target's indexes are unreadable.
    """
    tasks = chunk_tasks(store, plan, target, merge_operator, checkpoints, chunks=chunks)
    outcomes: list[ScanOutcome] = [o for got in mapper(run_chunk_task, tasks) for o in got]
    _raise_first_failure(outcomes)
    return _compare(plan.targets[target].path, outcomes)


def check_targets(store: ObjectStore, plan: RescalePlan, mapper: Mapper,
                  merge_operator: str | None, *, chunks: int = 1,
                  only: Sequence[int] | None = None) -> list[TargetCheck]:
    """Scan every target (``only``: those, by index) and its parts (one mapper call for
    all); the comparison per target, in the order of ``only``.

    Raises:
        InvalidDbStateError: a source checkpoint to compare with is gone.
        UnavailableError / StorageError / DataError: a scan failed (the first failure,
            named).
    """
    which = list(range(len(plan.targets))) if only is None else list(only)
    if not which:
        return []
    checkpoints = source_checkpoints(store, plan)
    tasks = [c for ti in which
             for c in chunk_tasks(store, plan, ti, merge_operator, checkpoints, chunks=chunks)]
    outcomes: list[ScanOutcome] = [o for got in mapper(run_chunk_task, tasks) for o in got]
    _raise_first_failure(outcomes)
    return [_compare(plan.targets[ti].path, [o for o in outcomes if o.task.target == ti])
            for ti in which]


def _raise_first_failure(outcomes: Sequence[ScanOutcome]) -> None:
    failed = [o for o in outcomes if o.stats is None]
    if failed:
        o = failed[0]
        kind = _TRANSIENT.get(o.error_type or "", DataError)
        raise kind(f"rescale check: scanning {o.task.side} {o.task.path!r} failed: "
                   f"{o.error_type}: {o.error}")


def _compare(path: str, outcomes: Sequence[ScanOutcome]) -> TargetCheck:
    expected = RangeStats()
    actual = RangeStats()
    for o in outcomes:
        assert o.stats is not None
        if o.task.side == "target":
            actual = actual + o.stats
        else:
            expected = expected + o.stats
    return TargetCheck(path, expected, actual, compare_stats(path, expected, actual))
