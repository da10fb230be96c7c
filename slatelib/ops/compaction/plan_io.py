"""Driver-side reads for planning: the compactor state, SST indexes for range splitting,
and turning a spec plus ranges into tasks.

State is read compactions-first, then the manifest (0.17's ``CompactorStateReader`` order).
Range splitting reads an SST's index only when that SST is large next to a range (or sits
in a range that came out hot), so planning a compaction of a large sorted run costs a few
index reads, not one per SST.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from slatelib.core.compaction_plan import CompactionSpec
from slatelib.core.compaction_source import view_range_and_size
from slatelib.core.compactions import Compactions
from slatelib.core.external_dbs import external_roots
from slatelib.core.manifest import Manifest, SstView
from slatelib.core.range_split import (
    COARSE_FRACTION,
    Anchor,
    RunKeys,
    block_anchors,
    hot_ranges,
    overlapping_views,
    overlaps,
    range_count,
    run_keys,
    split_by_weight,
    view_anchor,
)
from slatelib.core.ranges import UNBOUNDED, Bound, BoundKind, BytesRange, span
from slatelib.format import manifest_native
from slatelib.format.sst import SstWriterOptions
from slatelib.ids import Ulid, ulid_to_str
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


@dataclass(frozen=True, slots=True)
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
    """Every input view of ``spec`` with its handle, object path, keys and size.

    One :class:`InputView` and one :class:`TaskView` per view (a full compaction of a large
    database has one per SST; see docs/rfcs/0014-large-manifest-planning.md), with the
    values of ``InputView(view, TaskView(view, handle, path), effective_range(...),
    estimate_view_size(...), is_l0)``: plain identity views natively
    (``identity_input_views``) when the extension is built, the others without the frozen
    dataclasses' ``__init__``; none of them tracked by the cyclic GC afterwards.

    Raises:
        CorruptObjectError: a view of the spec has no SST in the manifest.
    """
    external = external_roots(tables.paths.root, manifest)
    l0_ids = {v.id for v in spec.l0_views}
    sst = manifest.sst
    views = spec.views()
    paths = _sst_paths(tables, external, views)
    new, set_view, set_handle, set_path = object.__new__, _TV_VIEW, _TV_HANDLE, _TV_PATH
    set_iv_view, set_tv, set_eff, set_size, set_l0 = _IV_SETTERS
    set_kind, set_key = _BOUND_KIND, _BOUND_KEY
    included = BoundKind.INCLUDED
    out: list[InputView] = []
    append = out.append
    with gc_paused():
        native = _native_planning()
        sst_map = manifest.sst_map
        built: list[InputView | None] = (
            native.identity_input_views(views, paths, sst_map, l0_ids)
            if native is not None and isinstance(sst_map, dict) else [None] * len(views))
        for view, path, done in zip(views, paths, built, strict=True):
            if done is not None:  # a plain identity view, built natively
                append(done)
                continue
            handle = sst(view.sst_id)
            tv = new(TaskView)
            set_view(tv, view)
            set_handle(tv, handle)
            set_path(tv, path)
            info = handle.info
            if view.visible_range is None:  # view_range_and_size's identity case, inlined
                first = new(Bound)
                set_kind(first, included)
                set_key(first, info.first_entry or b"")
                last_key = info.last_entry
                if last_key is None:
                    last = UNBOUNDED
                else:
                    last = new(Bound)
                    set_kind(last, included)
                    set_key(last, last_key)
                eff = span(first, last)
                size = info.index_offset + info.index_len
            else:
                eff, size = view_range_and_size(view, info)
            iv = new(InputView)
            set_iv_view(iv, view)
            set_tv(iv, tv)
            set_eff(iv, eff)
            set_size(iv, size)
            set_l0(iv, view.id in l0_ids)
            append(iv)
        if manifest_native.ext is not None:
            manifest_native.ext.untrack_frozen(out, _UNTRACKED)
    return out


_ZERO_NAME = ulid_to_str(0)
_configured: list[object] = []  # the extension configure_planning() was called on


def _native_planning() -> manifest_native.ManifestExt | None:
    """The extension, configured with the planning classes, or None without it."""
    ext = manifest_native.ext
    if ext is None:
        return None
    if not _configured or _configured[0] is not ext:
        ext.configure_planning(InputView, TaskView, BytesRange, Bound, BoundKind.INCLUDED,
                               UNBOUNDED)
        _configured[:] = [ext]
    return ext


def _sst_paths(tables: TableStore, external: dict[Ulid, str],
               views: Sequence[SstView]) -> list[str]:
    """``tables.sst_path(view.sst_id, external)`` of every view, formatted natively (one
    call) when the extension is built and no SST lives in an external database."""
    ext = manifest_native.ext
    if ext is not None and not external:
        # DbPaths.compacted(id) is head + ulid_to_str(id) + tail; the ULID is its end.
        head, _, tail = tables.paths.compacted(0).rpartition(_ZERO_NAME)
        try:
            return ext.ulid_names(head, tail, [v.sst_id for v in views])
        except (OverflowError, TypeError, ValueError):
            pass  # an id out of range (or a non-ASCII root): the reference path says which
    return [tables.sst_path(v.sst_id, external) for v in views]


_gc_lock = threading.Lock()
_gc_depth = 0
_gc_restore = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector around a bulk construction of acyclic objects.

    Justification (docs/rfcs/0014-large-manifest-planning.md): :func:`input_views` makes
    five tracked objects per input view; at 100k views the collections this allocation
    triggers walked them again and again and took about half the time. Every object made
    inside refers only to objects that existed before it, so no cycle can form among them
    and the collector could free nothing of theirs; reference counting still frees
    everything as usual. With the native extension they are then untracked
    (``untrack_frozen``) before the pause ends, so the deferred collections do not walk
    them either; without it the pause only defers those collections. Nesting and threads are counted:
    the collector is re-enabled when the outermost pause ends, and only if it was enabled
    when the first began (a caller that disabled it keeps it disabled).
    """
    global _gc_depth, _gc_restore
    with _gc_lock:
        if _gc_depth == 0:
            _gc_restore = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_restore:
                gc.enable()


_BOUND_KIND, _BOUND_KEY = Bound.__dict__["kind"].__set__, Bound.__dict__["key"].__set__
_UNTRACKED = (InputView, TaskView, BytesRange, Bound)
"""Frozen classes whose instances made by :func:`input_views` leave the cyclic GC."""
_TV_VIEW, _TV_HANDLE, _TV_PATH = (TaskView.__dict__[f].__set__ for f in ("view", "handle", "path"))
_IV_SETTERS = tuple(InputView.__dict__[f].__set__
                    for f in ("view", "task_view", "effective", "size", "l0"))


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
    """One task per range, each carrying only the input views that overlap it.

    A sorted run's views are in key order, so the views of a run that overlap a range are
    found by bisection (:func:`~slatelib.core.range_split.overlapping_views`): O(views +
    ranges * log views) rather than a test of every view against every range. A run whose
    views are not in key order is scanned view by view, with the same result.
    """
    by_view = {iv.view.id: iv for iv in views}
    sources: list[tuple[str, list[InputView], RunKeys | None]] = [
        (f"l0:{v.id}", [by_view[v.id]], None) for v in spec.l0_views
    ]
    for r in spec.runs:
        ivs = [by_view[v.id] for v in r.views]
        sources.append((f"sr:{r.id}", ivs, run_keys([iv.effective for iv in ivs])))
    tasks = []
    for index, rng in enumerate(ranges):
        task_sources = []
        for name, ivs, keys in sources:
            if keys is None:
                hit = tuple(iv.task_view for iv in ivs if overlaps(iv.effective, rng))
            else:
                hit = tuple(ivs[i].task_view for i in overlapping_views(keys, rng))
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
