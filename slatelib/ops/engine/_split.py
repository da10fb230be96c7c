"""The range split (private to :mod:`slatelib.ops.engine`): a spec's input views, SST
indexes for range splitting, and turning a spec plus ranges into tasks.

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
from dataclasses import dataclass, fields
from itertools import repeat
from operator import attrgetter, is_
from typing import Any

from slatelib.core.compaction_inputs import InputView as InputView  # re-exported
from slatelib.core.compaction_plan import CompactionSpec
from slatelib.core.compaction_source import view_range_and_size
from slatelib.core.external_dbs import external_roots
from slatelib.core.manifest import Manifest, SstView
from slatelib.core.range_split import (
    COARSE_FRACTION,
    Anchor,
    RunKeys,
    block_anchors,
    hot_ranges_sorted,
    overlapping_views,
    overlaps,
    range_count,
    run_keys,
    sort_anchors,
    split_sorted,
)
from slatelib.core.ranges import UNBOUNDED, Bound, BoundKind, BytesRange, span
from slatelib.errors import InternalError
from slatelib.format import seam
from slatelib.format.sst import SstWriterOptions
from slatelib.ids import Ulid
from slatelib.objstore import ObjectStore, StoreSpec
from slatelib.ops.engine._task import CompactionTask, TaskSource, TaskView
from slatelib.store.sst_reader import INDEX_SLOT, BlockCache, SstReader
from slatelib.store.table_store import TableStore


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
        sst_map = manifest.sst_map
        built: list[InputView | None] = (
            seam.identity_input_views(views, paths, sst_map, l0_ids)
            if isinstance(sst_map, dict) else [None] * len(views))
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
        seam.untrack_frozen(out, _UNTRACKED)
    return out


def _sst_paths(tables: TableStore, external: dict[Ulid, str],
               views: Sequence[SstView]) -> list[str]:
    """``tables.sst_path(view.sst_id, external)`` of every view: in one call
    (:func:`slatelib.paths.ulid_names`, native when built) when no SST lives in an external
    database."""
    if not external:
        return seam.ulid_names(*tables.paths.compacted_parts, [v.sst_id for v in views])
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
    anchors = sort_anchors(_anchors(store, views, fine, io_threads, cache))
    ranges = split_sorted(anchors, count)
    hot = hot_ranges_sorted(ranges, anchors, count)
    if hot:
        refine = {i for i, v in enumerate(views) if i not in fine
                  and any(overlaps(v.effective, ranges[h]) for h in hot)}
        if refine:
            anchors = sort_anchors(_anchors(store, views, fine | refine, io_threads, cache))
            ranges = split_sorted(anchors, count)
    return ranges


def coarse_anchors(views: Sequence[InputView], fine: set[int] | frozenset[int] = frozenset(),
                   ) -> list[Anchor]:
    """``view_anchor(v.effective, v.size)`` of every view whose index is not in ``fine``.

    One tuple per view, built without a Python call per view and with the cyclic GC paused
    (:func:`gc_paused`: a full compaction of a large database makes one per SST, and the
    collections their allocation triggers would walk the manifest's objects again).
    """
    chosen = [v for i, v in enumerate(views) if i not in fine] if fine else views
    with gc_paused():
        keys = list(map(_START_KEY, chosen))
        sizes = list(map(_SIZE, chosen))
        if None in keys:  # an unbounded start anchors at b""
            keys = [b"" if k is None else k for k in keys]
        if sizes and min(sizes) < 0:
            sizes = [s if s > 0 else 0 for s in sizes]
        return list(map(tuple.__new__, repeat(Anchor), zip(keys, sizes, strict=True)))


_START_KEY, _SIZE = attrgetter("effective.start.key"), attrgetter("size")


def _anchors(store: ObjectStore, views: Sequence[InputView], fine: set[int],
             io_threads: int, cache: BlockCache | None) -> list[Anchor]:
    out = coarse_anchors(views, fine)
    # Indexes already in the cache (the job's source check read them all before the
    # fence) are decoded objects: their anchors are pure CPU work, done here rather than
    # on threads that would only contend for the GIL. The others are read on threads.
    order = sorted(fine)
    cached = set() if cache is None else {
        i for i in order if cache.lookup((views[i].task_view.path, INDEX_SLOT)) is not None}
    got: dict[int, list[Anchor]] = {i: fine_anchors(store, views[i], cache) for i in cached}
    to_read = [i for i in order if i not in cached]
    if to_read:
        with ThreadPoolExecutor(max(1, min(io_threads, len(to_read)))) as pool:
            got.update(zip(to_read, pool.map(lambda i: fine_anchors(store, views[i], cache),
                                             to_read), strict=True))
    for i in order:
        out.extend(got[i])
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
    views are not in key order is scanned view by view, with the same result. The per-run
    key lists are taken by C-level passes (``run_keys``), a range's hits are usually one
    slice of the run, and the tasks are filled through their slots, without the frozen
    dataclass's ``__init__`` (docs/rfcs/0014-large-manifest-planning.md).
    """
    sources = _task_sources(spec, views)
    hits: list[list[TaskSource]] = [[] for _ in ranges]
    for name, tvs, effs, keys in sources:
        for index, rng in enumerate(ranges):
            if keys is None:
                hit = tuple(tv for tv, e in zip(tvs, effs, strict=True) if overlaps(e, rng))
            else:
                found = overlapping_views(keys, rng)
                if found and found[-1] - found[0] + 1 == len(found):  # one slice: no index
                    hit = tuple(tvs[found[0]:found[-1] + 1])
                else:
                    hit = tuple(map(tvs.__getitem__, found))
            if hit:
                hits[index].append(_new_source(name, hit))
    new, fields = object.__new__, _task_fields(spec, opts)
    tasks = []
    for index, rng in enumerate(ranges):
        # CompactionTask without the frozen dataclass's __init__ (one object.__setattr__
        # per field): the same field values as CompactionTask(...) with these arguments.
        task = new(CompactionTask)
        for setter, value in fields:
            setter(task, value)
        _TASK_INDEX(task, index)
        _TASK_RANGE(task, rng)
        _TASK_SOURCES(task, tuple(hits[index]))
        tasks.append(task)
    return tasks


_TaskInputs = tuple[str, list[TaskView], list[BytesRange], RunKeys | None]


def _task_sources(spec: CompactionSpec, views: Sequence[InputView]) -> list[_TaskInputs]:
    """Per source of ``spec`` (its L0 views, then its runs): the name, the task views and
    effective ranges of its input views, and the run's keys (None: scan view by view).

    ``views`` normally is what :func:`input_views` returned for ``spec``, in the order of
    ``spec.views()``; then each source is a slice of it (checked by identity of every view,
    in C), else the input views are looked up by view id.
    """
    ivs = list(views)
    positional = len(ivs) == len(spec.l0_views) + sum(len(r.views) for r in spec.runs)
    by_view: dict[Ulid, InputView] | None = None
    out: list[_TaskInputs] = []
    at = 0
    groups: list[tuple[str, Sequence[SstView], bool]] = [
        (f"l0:{v.id}", (v,), False) for v in spec.l0_views]
    groups += [(f"sr:{r.id}", r.views, True) for r in spec.runs]
    for name, group, is_run in groups:
        part: list[InputView] | None = None
        if positional:
            part = ivs[at:at + len(group)]
            at += len(group)
            if not all(map(is_, map(_VIEW, part), group)):
                positional, part = False, None
        if part is None:
            if by_view is None:
                by_view = {iv.view.id: iv for iv in ivs}
            part = [by_view[v.id] for v in group]
        effs = list(map(_EFFECTIVE, part))
        out.append((name, list(map(_TASK_VIEW, part)), effs,
                    run_keys(effs) if is_run else None))
    return out


_VIEW, _EFFECTIVE, _TASK_VIEW = attrgetter("view"), attrgetter("effective"), attrgetter("task_view")
_SOURCE_NAME, _SOURCE_VIEWS = (TaskSource.__dict__[f].__set__ for f in ("name", "views"))


def _new_source(name: str, views: tuple[TaskView, ...]) -> TaskSource:
    src = object.__new__(TaskSource)
    _SOURCE_NAME(src, name)
    _SOURCE_VIEWS(src, views)
    return src


_TASK_INDEX, _TASK_RANGE, _TASK_SOURCES = (CompactionTask.__dict__[f].__set__
                                           for f in ("index", "range", "sources"))


def _task_fields(spec: CompactionSpec, opts: TaskOptions) -> list[tuple[Any, object]]:
    """(slot setter, value) of every :class:`CompactionTask` field shared by a spec's tasks;
    every other field (index, range, sources) is set per task. Checked against the class's
    fields so that a new field cannot be left unset."""
    values: dict[str, object] = {
        "store": opts.store, "db_path": opts.db_path, "compaction_id": opts.compaction_id,
        "retention_min_seq": spec.retention_min_seq, "bottom": spec.bottom,
        "clock_tick": spec.clock_tick, "sst_options": opts.sst_options,
        "max_sst_size": opts.max_sst_size, "merge_operator": opts.merge_operator,
        "max_fetch_tasks": opts.max_fetch_tasks, "bytes_to_fetch": opts.bytes_to_fetch,
        "min_ulid_ms": opts.min_ulid_ms, "after_outputs": None,
    }
    names = {f.name for f in fields(CompactionTask)}
    if names != set(values) | {"index", "range", "sources"}:
        raise InternalError(f"build_tasks does not set CompactionTask fields "
                            f"{sorted(names ^ (set(values) | {'index', 'range', 'sources'}))}")
    return [(CompactionTask.__dict__[k].__set__, v) for k, v in values.items()]
