"""Reading one checkpoint of a database in byte-balanced key ranges. Spark-free.

:func:`plan_scan` (driver) splits the views of the pinned manifest into key ranges of
balanced input bytes with the compaction planner's range split
(:func:`slatelib.ops.engine.split_ranges`), intersected with the requested key
range, and returns one picklable :class:`ScanTask` per range carrying only the views that
overlap it. :func:`scan_task_rows` (executor) reads a task with the compaction input path
(only the blocks that may hold keys of the range, CRC-checked, prefetched) plus the WAL rows
the pinned manifest references, merges the sources in windows and resolves each key as
``DbReader`` does (:func:`slatelib.core.visible_rows.resolve_window`): tombstones, merge
operands, views of clones and projections (``visible_range``), segments, WAL rows.
:func:`scan_task_buffers` reads the same rows as Arrow buffers
(:func:`slatelib.format.seam.visible_buffers`), through the native pipeline when it is
built: blocks are checked (compressed ones decompressed first), merged and resolved
natively into Arrow buffers, with no Python object per row (WAL rows enter as rows; keys
whose merge operands need the operator are folded in Python).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from slatelib.core.compaction_source import effective_range, estimate_view_size
from slatelib.core.external_dbs import external_roots
from slatelib.core.manifest import Manifest, SortedRun, SstView
from slatelib.core.merge import MergeOperator
from slatelib.core.ranges import BytesRange
from slatelib.core.row import Row
from slatelib.core.visible_rows import VisibleRow, resolve_window
from slatelib.core.window_merge import merge_windows
from slatelib.errors import InvalidArgumentError
from slatelib.format import seam
from slatelib.format.native_pipe import ArrowBuffers
from slatelib.format.sst import SstWriterOptions
from slatelib.ids import Ulid
from slatelib.objstore import ObjectStore, StoreSpec
from slatelib.ops.engine import (
    CompactionTask,
    InputView,
    ReadTimer,
    TaskSource,
    TaskView,
    input_buffers,
    load_merge_operator,
    open_inputs,
    source_blocks,
    source_rows,
    split_ranges,
)
from slatelib.reader import replay_wal
from slatelib.store.table_store import TableStore
from slatelib.store.wal_store import WalStore

NO_SPLIT_SST_SIZE = 1 << 50
"""``max_sst_size`` for the range split: a read writes no SSTs, so output size never forces
more ranges."""
DEFAULT_MIN_PARTITION_BYTES = 16 * 1024 * 1024
WAL_CHUNK_ROWS = 8192


@dataclass(frozen=True, slots=True)
class ScanTask:
    """One key range of one checkpoint read, for one executor (small, frozen, picklable).

    ``wal_manifest`` is the pinned manifest stripped of its trees (what WAL replay needs:
    ``replay_after_wal_id``, ``last_l0_seq``), or None when it references no WAL rows.
    """

    store: StoreSpec
    db_path: str
    manifest_id: int
    checkpoint_id: uuid.UUID
    index: int
    range: BytesRange
    sources: tuple[TaskSource, ...]
    wal_manifest: Manifest | None
    merge_operator: str | None
    estimated_bytes: int
    max_fetch_tasks: int = 4
    bytes_to_fetch: int = 2 * 1024 * 1024


def _trees(m: Manifest) -> list[tuple[tuple[SstView, ...], tuple[SortedRun, ...]]]:
    out = [(m.l0, m.compacted)]
    out += [(seg.l0, seg.compacted) for seg in (m.segments or ())]
    return out


def _sources(m: Manifest, tables: TableStore, key_range: BytesRange,
             ) -> list[tuple[str, list[InputView]]]:
    """Every source (an L0 view, a sorted run) newest first, as the read view orders them,
    with its views that have keys in ``key_range``."""
    external = external_roots(tables.paths.root, m, shape_only=True)
    out: list[tuple[str, list[InputView]]] = []

    def views(vs: Sequence[SstView], l0: bool) -> list[InputView]:
        got = []
        for v in vs:
            handle = m.sst(v.sst_id)
            eff = effective_range(v, handle.info).intersect(key_range)
            if eff.is_empty():
                continue
            tv = TaskView(v, handle, tables.sst_path(handle.id, external))
            got.append(InputView(v, tv, eff, estimate_view_size(v, handle.info), l0))
        return got

    for n, (l0, runs) in enumerate(_trees(m)):
        out += [(f"t{n}:l0:{v.id}", views([v], True)) for v in l0]
        out += [(f"t{n}:sr:{r.id}", views(r.views, False)) for r in runs]
    return [(name, ivs) for name, ivs in out if ivs]


def plan_scan(
    store: ObjectStore,
    db_path: str,
    pinned: Manifest,
    *,
    manifest_id: int,
    checkpoint_id: uuid.UUID,
    key_range: BytesRange | None = None,
    partitions: int = 1,
    min_partition_bytes: int = DEFAULT_MIN_PARTITION_BYTES,
    merge_operator: str | None = None,
) -> list[ScanTask]:
    """One task per byte-balanced key range of ``pinned`` within ``key_range`` (at most
    ``partitions``, none below ``min_partition_bytes`` of input unless there is only one).
    An empty ``key_range`` gives no task.

    Raises:
        InvalidArgumentError: ``partitions`` or ``min_partition_bytes`` below 1.
        CorruptObjectError / ChecksumMismatchError: an unreadable SST index.
    """
    if partitions < 1 or min_partition_bytes < 1:
        raise InvalidArgumentError(
            f"partitions ({partitions}) and min_partition_bytes ({min_partition_bytes}) "
            "must be at least 1")
    rng = key_range or BytesRange.all()
    if rng.is_empty():
        return []
    tables = TableStore(store, db_path)
    sources = _sources(pinned, tables, rng)
    views = [iv for _, ivs in sources for iv in ivs]
    ranges = [rng]
    if views and partitions > 1:
        split = split_ranges(store, views, parallelism=partitions,
                             max_sst_size=NO_SPLIT_SST_SIZE,
                             min_range_bytes=min_partition_bytes)
        ranges = [r.intersect(rng) for r in split]
        ranges = [r for r in ranges if not r.is_empty()]
    has_wal = pinned.wal_id_last_seen > pinned.replay_after_wal_id
    wal_manifest = (replace(pinned, ssts=(), l0=(), compacted=(), segments=(), checkpoints=(),
                            external_dbs=()) if has_wal else None)
    tasks = []
    for index, r in enumerate(ranges):
        hit = []
        weight = 0
        for name, ivs in sources:
            mine = [iv for iv in ivs if not iv.effective.intersect(r).is_empty()]
            if mine:
                hit.append(TaskSource(name, tuple(iv.task_view for iv in mine)))
                weight += sum(iv.size for iv in mine)
        tasks.append(ScanTask(
            store=store.spec, db_path=db_path, manifest_id=manifest_id,
            checkpoint_id=checkpoint_id, index=index, range=r, sources=tuple(hit),
            wal_manifest=wal_manifest, merge_operator=merge_operator,
            estimated_bytes=weight))
    return tasks


def _as_compaction_task(task: ScanTask) -> CompactionTask:
    """The compaction input reader takes a :class:`CompactionTask`; only its store, range and
    sources matter for reading (the output fields are never used by a read)."""
    return CompactionTask(
        store=task.store, db_path=task.db_path, compaction_id=Ulid(0), index=task.index,
        range=task.range, sources=task.sources, retention_min_seq=0, bottom=False,
        clock_tick=0, sst_options=SstWriterOptions(), max_sst_size=NO_SPLIT_SST_SIZE,
        merge_operator=task.merge_operator, max_fetch_tasks=task.max_fetch_tasks,
        bytes_to_fetch=task.bytes_to_fetch)


def _wal_rows(store: ObjectStore, task: ScanTask) -> list[Row]:
    m = task.wal_manifest
    if m is None:
        return []
    table, _ = replay_wal(WalStore(store, task.db_path), m, last_wal_id=m.wal_id_last_seen)
    rng = task.range
    return [r for r in table.rows() if rng.contains(r[0])]


def _chunks(rows: list[Row]) -> Iterator[list[Row]]:
    for i in range(0, len(rows), WAL_CHUNK_ROWS):
        yield rows[i:i + WAL_CHUNK_ROWS]


@contextmanager
def _task_streams(task: ScanTask, store: ObjectStore | None, reader: Callable[..., Any],
                  ) -> Iterator[tuple[list[Any], MergeOperator | None]]:
    """The sources of ``task``'s range, newest first (the WAL rows in chunks, then one
    stream per input from ``reader``: ``source_rows`` or ``source_blocks``), with their
    fetch threads running for the duration of the ``with``, and the merge operator."""
    obj_store = store if store is not None else task.store.open()
    op = load_merge_operator(task.merge_operator)
    prefetch, fetch_bytes = input_buffers(len(task.sources), task.max_fetch_tasks,
                                          task.bytes_to_fetch)
    threads = max(2, min(32, len(task.sources) * prefetch))
    timer = ReadTimer()
    with ThreadPoolExecutor(threads, thread_name_prefix="export-io") as pool:
        inputs = [views for views in open_inputs(_as_compaction_task(task), obj_store, pool)
                  if views]
        streams: list[Any] = []
        wal = _wal_rows(obj_store, task)
        if wal:
            streams.append(_chunks(wal))  # newest source first
        streams += [reader(obj_store, views, pool, prefetch=prefetch, fetch_bytes=fetch_bytes,
                           timer=timer) for views in inputs]
        yield streams, op


def scan_task_rows(task: ScanTask, *, store: ObjectStore | None = None,
                   ) -> Iterator[list[VisibleRow]]:
    """The visible rows of ``task``'s range in key order, one list per merged window
    (see the module docstring). ``store`` defaults to opening ``task.store``.

    Raises:
        InvalidArgumentError: an unknown merge operator.
        MergeOperatorMissingError: merge operands without a merge operator.
        SstMissingError / ManifestMissingError: an object the checkpoint pins is gone.
        CorruptObjectError / ChecksumMismatchError: a damaged block (object and block named).
        UnavailableError / StorageError: storage failures.
    """
    with _task_streams(task, store, source_rows) as (streams, op):
        for window in merge_windows(streams):
            visible = resolve_window(window, op)
            if visible:
                yield visible


def scan_task_buffers(task: ScanTask, *, store: ObjectStore | None = None, seq: bool = False,
                      expire_ts: bool = False, create_ts: bool = False,
                      ) -> Iterator[ArrowBuffers]:
    """The visible rows of ``task``'s range, as :func:`scan_task_rows` returns them, in
    batches of Arrow buffers (``seq`` / ``expire_ts`` / ``create_ts``: with those columns)
    from the native pipeline when it is built (:func:`slatelib.format.seam.visible_buffers`).
    Raises what :func:`scan_task_rows` raises."""
    with _task_streams(task, store, source_blocks) as (streams, op):
        yield from seam.visible_buffers(streams, op, seq=seq, expire_ts=expire_ts,
                                        create_ts=create_ts)
