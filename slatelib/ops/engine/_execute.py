"""Executing one compaction task (one key range): read, merge, retain, write. Spark-free.

For every input view that overlaps the task's range, only the blocks that may hold keys of
the range (and of the view's ``visible_range``) are fetched, in coalesced ranged gets of
up to ``bytes_to_fetch`` with at most ``max_fetch_tasks`` fetches in flight per view, and
decoded in those fetch threads. Rows outside the range are clipped at block granularity.
Sources are merged and 0.17's retention applied (:mod:`slatelib.core.retention`) by
:func:`slatelib.format.native_merge.retained_batches`: one native loop over a heap of the
sources' blocks (the ``Pipe`` of ``slatelib/csrc/pipe.h``), or the pure-Python windowed merge
(:mod:`slatelib.core.window_merge`) when the extension is not built. The surviving rows
come in batches (``windows`` in the metrics) that end at key boundaries and go to output
SSTs of about ``max_sst_size`` (v2 blocks, bloom filter per ``min_filter_keys``, the
configured codec, stats), cut only between keys so a key's versions never straddle two
SSTs. A finished SST uploads in the background while the next one fills (at most one
upload in flight).

With the native pipeline built (:mod:`slatelib.format.native_pipe`, the default), no Python
object is made per row: the fetch threads check each group of blocks (``CheckedBlocks``;
compressed blocks are decompressed first), one native merge applies the retention and adds
the kept rows straight to the output SST's block writer (:meth:`OutputWriter.fill_from`);
``windows`` then counts fill steps. Keys with merge operands and an operator go through
Python rows for those keys only.

Memory is bounded by the blocks in flight (at most :data:`INPUT_BUFFER_BYTES` of stored
input per task however many sources it merges), one batch, and at most two output SSTs (one
filling, one uploading) — not by the size of the range.

Output SSTs get fresh ULIDs from the wall clock (never before ``task.min_ulid_ms``, the
compaction id's time), so 0.17's GC never deletes them while the compaction is listed in
``compactions/``. A failed or retried task leaves its uploaded SSTs unreferenced; GC
removes them.
"""

from __future__ import annotations

import functools
import gc
import logging
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.core.retention import RetentionPolicy, RetentionStats
from slatelib.core.window_merge import DEFAULT_FILL_ROWS
from slatelib.format.native_merge import retained_batches
from slatelib.format.native_pipe import RetainPipe, accepts_fill
from slatelib.format.sst import SstWriter
from slatelib.ids import UlidGenerator
from slatelib.objstore import ObjectStore
from slatelib.ops.engine._input import ReadTimer, open_inputs, source_blocks, source_rows
from slatelib.ops.engine._merge_operator import load_merge_operator
from slatelib.ops.engine._output import OutputWriter
from slatelib.ops.engine._task import CompactionResult, CompactionTask, TaskMetrics

log = logging.getLogger(__name__)


INPUT_BUFFER_BYTES = 128 * 1024 * 1024
"""Stored input bytes a task keeps in flight over all its sources (decoded rows take about
2.5 times as much)."""
MIN_FETCH_BYTES = 64 * 1024


def input_buffers(sources: int, max_fetch_tasks: int, bytes_to_fetch: int) -> tuple[int, int]:
    """``(prefetch, fetch_bytes)`` per source: ``max_fetch_tasks`` ranged gets of
    ``bytes_to_fetch`` each (0.17's worker options), shrunk so that all sources together stay
    within :data:`INPUT_BUFFER_BYTES` (a compaction of many L0s reads each more finely)."""
    n = max(1, sources)
    prefetch = max(1, min(max_fetch_tasks, INPUT_BUFFER_BYTES // (n * max(1, bytes_to_fetch))))
    fetch = max(MIN_FETCH_BYTES, min(bytes_to_fetch, INPUT_BUFFER_BYTES // (n * prefetch)))
    return prefetch, fetch


def peak_rss_bytes() -> int:
    """Peak resident memory of this process (executor Python worker) in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def native_pipeline_for(task: CompactionTask) -> bool:
    """The native pipeline can run ``task``: it is built and enabled, and the task's SSTs
    are written by the native block writer (format version 2)."""
    return accepts_fill(SstWriter(task.sst_options).block_writer)


P = ParamSpec("P")
R = TypeVar("R")

_gc_lock = threading.Lock()
_gc_paused = 0
_gc_was_enabled = False


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while compaction tasks run in this process
    (nested and concurrent tasks count: it resumes, if it was on, when the last one ends).

    A task allocates a Python object or two per block group (tuples, buffers), so the
    collector's generation thresholds trip again and again, and each full collection walks
    every object of the executor's Python worker (pyspark's and slatelib's modules) for
    nothing: a task makes no reference cycles that matter. Reference counting still frees
    everything as usual; only cycles wait until the task ends."""
    global _gc_paused, _gc_was_enabled
    with _gc_lock:
        if _gc_paused == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_paused += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_paused -= 1
            if _gc_paused == 0 and _gc_was_enabled:
                gc.enable()


def _gc_paused_while(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run under :func:`cyclic_gc_paused`."""
    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with cyclic_gc_paused():
            return fn(*args, **kwargs)

    return run


@_gc_paused_while
def execute_compaction_task(
    task: CompactionTask,
    *,
    store: ObjectStore | None = None,
    clock: Clock = SYSTEM_CLOCK,
    fill_rows: int | None = None,
    use_native_pipe: bool = True,
) -> CompactionResult:
    """Compact one key range and upload its output SSTs (see the module docstring), with
    the cyclic garbage collector held off meanwhile (:func:`cyclic_gc_paused`).

    ``store`` defaults to opening ``task.store`` (what executors do). ``use_native_pipe=False``
    (or an unbuilt extension) takes the row path: ``native_merge.retained_batches``.

    Raises:
        CorruptObjectError / ChecksumMismatchError: an input block is damaged (the error
            names the object and the block).
        ObjectMissingError: an input SST is missing.
        UnavailableError / StorageError: storage failures.
        InvalidArgumentError: an unknown merge operator.
    """
    started = time.perf_counter()
    cpu_started = time.process_time()
    obj_store = store if store is not None else task.store.open()
    policy = RetentionPolicy(
        min_seq=task.retention_min_seq, bottom=task.bottom, clock_tick=task.clock_tick,
        merge_operator=load_merge_operator(task.merge_operator),
    )
    stats = RetentionStats()
    timer = ReadTimer()
    prefetch, fetch_bytes = input_buffers(len(task.sources), task.max_fetch_tasks,
                                          task.bytes_to_fetch)
    threads = max(2, min(32, len(task.sources) * prefetch))
    merge_s = 0.0
    windows = 0
    with ThreadPoolExecutor(threads, thread_name_prefix="compact-io") as pool, \
            ThreadPoolExecutor(1, thread_name_prefix="compact-upload") as uploader:
        sources = [views for views in open_inputs(task, obj_store, pool) if views]
        ssts_in = sum(len(views) for views in sources)
        bytes_in = sum(vi.bytes for views in sources for vi in views)
        out = OutputWriter(obj_store, task, UlidGenerator(), clock, uploader)
        checked = use_native_pipe and native_pipeline_for(task)
        try:
            if checked:
                blocks = [source_blocks(obj_store, views, pool, prefetch=prefetch,
                                        fetch_bytes=fetch_bytes, timer=timer)
                          for views in sources]
                pipe = RetainPipe(blocks, policy, stats)
                out.fill_from(pipe)  # merge, retention and block encoding in one native loop
                windows = pipe.calls
                merge_s = out.write_s
                out.write_s = 0.0
            else:
                streams = [source_rows(obj_store, views, pool, prefetch=prefetch,
                                       fetch_bytes=fetch_bytes, timer=timer)
                           for views in sources]
                merged = retained_batches(streams, policy, stats,
                                          fill_rows=fill_rows or DEFAULT_FILL_ROWS)
                while True:
                    t0 = time.perf_counter()
                    kept = next(merged, None)
                    merge_s += time.perf_counter() - t0
                    if kept is None:
                        break
                    windows += 1
                    out.add(kept)
            outputs = out.close()
        except BaseException:
            out.abort()
            raise
    total = time.perf_counter() - started
    read_s = timer.seconds
    metrics = TaskMetrics(
        rows_in=stats.rows_in, rows_out=stats.rows_out, bytes_in=bytes_in,
        bytes_out=out.bytes_out, ssts_in=ssts_in, retention=stats.as_dict(),
        read_s=round(read_s, 4), merge_s=round(max(0.0, merge_s - read_s), 4),
        write_s=round(out.write_s, 4), total_s=round(total, 4),
        cpu_s=round(time.process_time() - cpu_started, 4),
        peak_rss_bytes=peak_rss_bytes(), windows=windows,
    )
    log.info("compaction task done [task=%s, rows_in=%d, rows_out=%d, ssts_out=%d, "
             "seconds=%.3f]", task.label, stats.rows_in, stats.rows_out, len(outputs), total)
    return CompactionResult(task.index, tuple(outputs), metrics)
