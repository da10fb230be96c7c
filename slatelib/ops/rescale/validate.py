"""Checking a rescale before it reports success: every target holds exactly its sources'
ranges at the job's checkpoints.

Each target is scanned as it is now, and each of its parts (a source range) at the
checkpoint it was cloned from, in chunks of about one target SST, by :class:`ScanTask` values (small, picklable: a
``StoreSpec`` and a range) that a :data:`Mapper` runs anywhere (threads here, Spark
executors in the job). Keys, key + value bytes and an order-independent digest must agree
(:class:`~slatelib.core.rescale_check.RangeStats`), which also proves that every target is
readable. The stats are computed in C (``slatelib._speedups.range_stats``, the same numbers as
the pure-Python ``RangeStats.of``) when the extension is built: :func:`range_stats`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from slatelib.core.manifest import Manifest
from slatelib.core.rescale_check import RangeStats, compare_stats
from slatelib.core.rescale_plan import RescalePlan
from slatelib.errors import DataError, InvalidDbStateError, StorageError, UnavailableError
from slatelib.format import native
from slatelib.objstore import ObjectStore, StoreSpec
from slatelib.ops.compaction.execute import load_merge_operator
from slatelib.reader import DbReader
from slatelib.store.manifest_store import ManifestStore

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

_TRANSIENT: dict[str, type[Exception]] = {"UnavailableError": UnavailableError,
                                          "StorageError": StorageError}

MAX_CHUNKS_PER_TARGET = 64
"""Most scan chunks per target (and per part)."""

Mapper = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]
"""Runs a function over items somewhere and returns the results in item order."""

NativeRangeStats = Callable[[Iterable[tuple[bytes, bytes]]], tuple[int, int, int]]

NATIVE_RANGE_STATS: NativeRangeStats | None = cast(
    "NativeRangeStats | None", getattr(native.speedups, "range_stats", None))
"""``slatelib._speedups.range_stats`` (None: the extension is not built, is disabled by
``SLATELIB_NO_NATIVE``, or is an older build without it)."""


def range_stats(rows: Iterable[tuple[bytes, bytes]]) -> RangeStats:
    """:meth:`RangeStats.of` ``rows``: natively when the extension is built (the same keys,
    bytes and digest, tests/unit/core/test_rescale_check.py), else in Python."""
    if NATIVE_RANGE_STATS is None:
        return RangeStats.of(rows)
    return RangeStats(*NATIVE_RANGE_STATS(rows))


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


def run_scan_task(task: ScanTask) -> ScanOutcome:
    """Scan one range; a failure comes back as a value (what a mapper ships to executors)."""
    try:
        with DbReader.open(task.path, task.store.open(), checkpoint=task.checkpoint,
                           mode="latest", merge_operator=load_merge_operator(
                               task.merge_operator)) as reader:
            return ScanOutcome(task, range_stats(reader.scan(task.start, task.end)))
    except Exception as exc:  # every failure becomes a value; the driver raises
        log.warning("rescale scan failed [path=%s, error=%s]", task.path, exc)
        return ScanOutcome(task, None, str(exc), type(exc).__name__)


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


def scan_tasks(store: ObjectStore, plan: RescalePlan, merge_operator: str | None,
               ) -> list[ScanTask]:
    """Per target, its key space cut into chunks (:func:`chunk_keys`): one scan of the
    target per chunk and one of each part (its source range at the checkpoint) per chunk."""
    spec = store.spec
    checkpoints = {i: reading_checkpoint(store, plan, i) for i in range(len(plan.sources))}
    tasks = []
    for ti, t in enumerate(plan.targets):
        latest = ManifestStore(store, t.path).try_read_latest()
        cuts: list[bytes | None] = [None]
        cuts += [] if latest is None else chunk_keys(latest.value)
        cuts.append(None)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            tasks.append(ScanTask(spec, t.path, None, a, b, merge_operator, ti, "target"))
            for p in t.parts:
                rng = p.range
                part = _clip(None if rng is None else rng.start.key,
                             None if rng is None else rng.end.key, a, b)
                if part is not None:
                    tasks.append(ScanTask(spec, plan.sources[p.source].path,
                                          checkpoints[p.source], *part, merge_operator, ti,
                                          "source"))
    return tasks


@dataclass(frozen=True)
class TargetCheck:
    path: str
    expected: RangeStats
    actual: RangeStats
    problem: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.problem is None,
                "expected": self.expected.to_dict(), "actual": self.actual.to_dict(),
                **({} if self.problem is None else {"problem": self.problem})}


def check_targets(store: ObjectStore, plan: RescalePlan, mapper: Mapper,
                  merge_operator: str | None) -> list[TargetCheck]:
    """Scan every target and its parts; the comparison per target.

    Raises:
        InvalidDbStateError: a source checkpoint to compare with is gone.
        UnavailableError / StorageError / DataError: a scan failed (the first failure,
            named).
    """
    outcomes: list[ScanOutcome] = mapper(run_scan_task, scan_tasks(store, plan,
                                                                   merge_operator))
    failed = [o for o in outcomes if o.stats is None]
    if failed:
        o = failed[0]
        kind = _TRANSIENT.get(o.error_type or "", DataError)
        raise kind(f"rescale check: scanning {o.task.side} {o.task.path!r} failed: "
                   f"{o.error_type}: {o.error}")
    out = []
    for ti, t in enumerate(plan.targets):
        expected = RangeStats()
        actual = RangeStats()
        for o in outcomes:
            if o.task.target != ti:
                continue
            assert o.stats is not None
            if o.task.side == "target":
                actual = actual + o.stats
            else:
                expected = expected + o.stats
        out.append(TargetCheck(t.path, expected, actual, compare_stats(t.path, expected,
                                                                       actual)))
    return out
