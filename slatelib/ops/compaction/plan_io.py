"""Driver-side reads for planning: the compactor state, SST indexes for range splitting,
and turning a spec plus ranges into tasks.

State is read compactions-first, then the manifest (0.17's ``CompactorStateReader`` order).
Range splitting reads an SST's index only when that SST is large next to a range (or sits
in a range that came out hot), so planning a compaction of a large sorted run costs a few
index reads, not one per SST.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from slatelib.core.compaction_plan import CompactionSpec
from slatelib.core.compaction_source import effective_range, estimate_view_size
from slatelib.core.compactions import Compactions
from slatelib.core.external_dbs import external_roots
from slatelib.core.manifest import Manifest, SstView
from slatelib.core.range_split import (
    COARSE_FRACTION,
    Anchor,
    block_anchors,
    hot_ranges,
    overlaps,
    range_count,
    split_by_weight,
    view_anchor,
)
from slatelib.core.ranges import BytesRange
from slatelib.format.sst import SstWriterOptions
from slatelib.ids import Ulid
from slatelib.objstore import ObjectStore, StoreSpec
from slatelib.ops.compaction.task import CompactionTask, TaskSource, TaskView
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sequenced import Versioned
from slatelib.store.sst_reader import BlockCache, SstReader
from slatelib.store.table_store import TableStore


@dataclass(frozen=True)
class DbState:
    manifest: Versioned[Manifest]
    compactions: Versioned[Compactions] | None


def read_state(manifests: ManifestStore, compactions: CompactionsStore) -> DbState:
    """The latest compactions file (if any), then the latest manifest.

    Raises:
        ManifestMissingError: no database at this path.
        CorruptObjectError: an undecodable latest version.
    """
    state = compactions.try_read_latest()
    return DbState(manifests.read_latest(), state)


@dataclass(frozen=True)
class InputView:
    """An input view with its handle and path (``task_view``), keys and estimated size.

    ``l0`` views usually span the whole key space, so their weight is never placed at
    their first key: their indexes are always read for splitting.
    """

    view: SstView
    task_view: TaskView
    effective: BytesRange
    size: int
    l0: bool


def input_views(spec: CompactionSpec, manifest: Manifest, tables: TableStore) -> list[InputView]:
    """Every input view of ``spec`` with its handle, object path, keys and size."""
    external = external_roots(tables.paths.root, manifest)
    l0_ids = set(spec.l0_view_ids)
    out = []
    for view in spec.views():
        handle = manifest.sst(view.sst_id)
        tv = TaskView(view, handle, tables.sst_path(handle.id, external))
        eff = effective_range(view, handle.info)
        out.append(InputView(view, tv, eff, estimate_view_size(view, handle.info),
                             view.id in l0_ids))
    return out


def fine_anchors(store: ObjectStore, iv: InputView, cache: BlockCache | None,
                 ) -> list[Anchor]:
    """Block-level anchors of one view from its SST index (read through ``cache``).

    Raises:
        CorruptObjectError / ChecksumMismatchError: an unreadable SST index.
    """
    handle = iv.task_view.handle
    index = SstReader(store, iv.task_view.path, handle, cache=cache).index()
    info = handle.info
    return block_anchors(index.first_keys, index.offsets, info.filter_offset,
                         info.first_entry or b"", iv.effective)


def split_ranges(
    store: ObjectStore,
    views: Sequence[InputView],
    *,
    parallelism: int,
    max_sst_size: int,
    min_range_bytes: int,
    tasks_per_slot: int = 1,
    io_threads: int = 16,
    cache: BlockCache | None = None,
) -> list[BytesRange]:
    """Key ranges of balanced input bytes for ``views`` (see :mod:`slatelib.core.range_split`).

    ``cache`` holds indexes already read (by the checks before the fence), so that none is
    read twice.

    Raises:
        CorruptObjectError / ChecksumMismatchError: an unreadable SST index.
    """
    total = sum(v.size for v in views)
    count = range_count(total, parallelism=parallelism, max_sst_size=max_sst_size,
                        min_range_bytes=min_range_bytes, tasks_per_slot=tasks_per_slot)
    if count <= 1:
        return [BytesRange.all()]
    limit = total / count / COARSE_FRACTION
    fine = {i for i, v in enumerate(views) if v.l0 or v.size > limit}
    anchors = _anchors(store, views, fine, io_threads, cache)
    ranges = split_by_weight(anchors, count)
    hot = hot_ranges(ranges, anchors, count)
    if hot:
        refine = {i for i, v in enumerate(views) if i not in fine
                  and any(overlaps(v.effective, ranges[h]) for h in hot)}
        if refine:
            anchors = _anchors(store, views, fine | refine, io_threads, cache)
            ranges = split_by_weight(anchors, count)
    return ranges


def _anchors(store: ObjectStore, views: Sequence[InputView], fine: set[int],
             io_threads: int, cache: BlockCache | None) -> list[Anchor]:
    out = [view_anchor(v.effective, v.size) for i, v in enumerate(views) if i not in fine]
    if fine:
        with ThreadPoolExecutor(max(1, min(io_threads, len(fine)))) as pool:
            for got in pool.map(lambda i: fine_anchors(store, views[i], cache), sorted(fine)):
                out.extend(got)
    return out


@dataclass(frozen=True)
class TaskOptions:
    """Everything a task needs besides its range and inputs."""

    store: StoreSpec
    db_path: str
    compaction_id: Ulid
    sst_options: SstWriterOptions
    max_sst_size: int
    merge_operator: str | None
    max_fetch_tasks: int
    bytes_to_fetch: int
    min_ulid_ms: int


def build_tasks(spec: CompactionSpec, views: Sequence[InputView],
                ranges: Sequence[BytesRange], opts: TaskOptions) -> list[CompactionTask]:
    """One task per range, each carrying only the input views that overlap it."""
    by_view = {iv.view.id: iv for iv in views}
    sources: list[tuple[str, list[InputView]]] = [
        (f"l0:{v.id}", [by_view[v.id]]) for v in spec.l0_views
    ]
    sources += [(f"sr:{r.id}", [by_view[v.id] for v in r.views]) for r in spec.runs]
    tasks = []
    for index, rng in enumerate(ranges):
        task_sources = []
        for name, ivs in sources:
            hit = tuple(iv.task_view for iv in ivs if overlaps(iv.effective, rng))
            if hit:
                task_sources.append(TaskSource(name, hit))
        tasks.append(CompactionTask(
            store=opts.store, db_path=opts.db_path, compaction_id=opts.compaction_id,
            index=index, range=rng, sources=tuple(task_sources),
            retention_min_seq=spec.retention_min_seq, bottom=spec.bottom,
            clock_tick=spec.clock_tick, sst_options=opts.sst_options,
            max_sst_size=opts.max_sst_size, merge_operator=opts.merge_operator,
            max_fetch_tasks=opts.max_fetch_tasks, bytes_to_fetch=opts.bytes_to_fetch,
            min_ulid_ms=opts.min_ulid_ms,
        ))
    return tasks
