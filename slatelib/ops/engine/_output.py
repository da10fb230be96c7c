"""Output SSTs of one compaction task: filled window by window, uploaded in the background.

An SST is closed once it reaches the task's ``max_sst_size`` (measured before compression,
checked after each window, so a key's versions never straddle two SSTs). With the native
pipeline (:meth:`OutputWriter.fill_from`) the pipeline adds rows to the SST's block writer
itself, in steps that end at key boundaries, and the size is checked after each step. Its bytes are
uploaded with create-if-absent under a fresh ULID while the next SST fills; at most one
upload is in flight, and it completes before the next SST is joined for upload, which bounds
memory to about two SSTs.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor

from slatelib.clock import Clock
from slatelib.core.manifest import SstHandle
from slatelib.core.row import Row
from slatelib.format.native_pipe import RetainPipe
from slatelib.format.sst import SstWriter
from slatelib.ids import UlidGenerator, ulid_to_str
from slatelib.objstore import ObjectStore
from slatelib.ops.engine._task import CompactionTask
from slatelib.paths import DbPaths

log = logging.getLogger(__name__)

_MIN_CHUNK = 16
_MAX_CHUNK = 4096
MAX_RESERVE_BYTES = 1 << 30
"""The most an output SST's buffer is sized for up front (see :func:`sst_size_hint`)."""
FILL_STEP_BYTES = 4 * 1024 * 1024
"""Encoded bytes per native fill step: the blocks a step finishes are framed (compressed,
checksummed) before the next step, so raw blocks never pile up beyond this."""


def sst_size_hint(max_sst_size: int) -> int:
    """Bytes an output SST's buffer is allocated with: ``max_sst_size`` and room for the
    overshoot of one fill step and the filter and index (an estimate: beyond it the buffer
    grows). Its pages are only touched as blocks are written, so a smaller last SST costs
    address space, not memory."""
    return min(MAX_RESERVE_BYTES, max_sst_size + max_sst_size // 8 + FILL_STEP_BYTES)


class OutputWriter:
    """Writes the rows of one task into SSTs under the task's database root."""

    def __init__(self, store: ObjectStore, task: CompactionTask, ulids: UlidGenerator,
                 clock: Clock, uploader: ThreadPoolExecutor) -> None:
        self._store = store
        self._task = task
        self._paths = DbPaths.of(task.db_path)
        self._ulids = ulids
        self._clock = clock
        self._uploader = uploader
        self._writer: SstWriter | None = None
        self._pending: Future[None] | None = None
        self.handles: list[SstHandle] = []
        self.uploaded: list[str] = []
        self.bytes_out = 0
        self.write_s = 0.0
        self._avg_row = 64.0

    def add(self, rows: list[Row]) -> None:
        """Append one window of rows (storage order), cutting an SST whenever it is full.

        Rows go in chunks sized from the average encoded row so far, so an SST overshoots
        ``max_sst_size`` by at most a few rows; a chunk always ends at a key boundary.

        Raises:
            InvalidArgumentError: rows out of order (a bug upstream).
        """
        t = time.perf_counter()
        limit = self._task.max_sst_size
        n = len(rows)
        i = 0
        while i < n:
            w = self._writer
            if w is None:
                w = self._writer = self._new_writer()
            if i == 0 and w.estimated_size + n * self._avg_row < limit:
                j = n  # the whole window fits: one call, no slicing
            else:
                room = limit - w.estimated_size
                j = min(n, i + max(_MIN_CHUNK, min(_MAX_CHUNK, int(room / self._avg_row))))
                while j < n and rows[j][0] == rows[j - 1][0]:
                    j += 1
            w.add_rows(rows if (i == 0 and j == n) else rows[i:j])
            if w.num_rows:
                self._avg_row = max(1.0, w.estimated_size / w.num_rows)
            if w.estimated_size >= limit:
                self._finish_sst()
            i = j
        self.write_s += time.perf_counter() - t

    def fill_from(self, pipe: RetainPipe) -> None:
        """Write everything ``pipe`` (the native pipeline) keeps: each SST is filled in steps
        of at most :data:`FILL_STEP_BYTES` (each step ends at a key boundary) until it
        reaches ``max_sst_size``.

        Raises:
            CorruptObjectError / InvalidArgumentError: see :meth:`RetainPipe.fill`.
        """
        t = time.perf_counter()
        limit = self._task.max_sst_size
        done = False
        while not done:
            w = self._writer
            if w is None:
                w = self._writer = self._new_writer()
            room = limit - w.estimated_size
            done = w.fill(pipe.fill, max(1, min(FILL_STEP_BYTES, room)))
            if w.estimated_size >= limit:
                self._finish_sst()
        self.write_s += time.perf_counter() - t

    def _new_writer(self) -> SstWriter:
        return SstWriter(self._task.sst_options,
                         size_hint=sst_size_hint(self._task.max_sst_size))

    def _finish_sst(self) -> None:
        w = self._writer
        self._writer = None
        if w is None or w.num_rows == 0:
            return
        encoded = w.finish()
        self._wait_upload()  # the previous SST leaves memory before this one is joined
        data = encoded.to_bytes()
        encoded.chunks.clear()
        now = max(self._clock.now_ms(), self._task.min_ulid_ms)
        sst_id = self._ulids.new(now)
        path = self._paths.compacted(sst_id)
        self._pending = self._uploader.submit(self._store.put_if_absent, path, data)
        self.handles.append(SstHandle(sst_id, encoded.info, encoded.format_version))
        self.bytes_out += len(data)
        log.debug("compaction output sst [task=%s, id=%s, rows=%d, bytes=%d]",
                  self._task.label, ulid_to_str(sst_id), encoded.num_rows, len(data))
        self.uploaded.append(path)

    def _wait_upload(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> list[SstHandle]:
        """Write the last SST and wait for every upload.

        Raises:
            UnavailableError / StorageError / AlreadyExistsError: an upload failed.
        """
        t = time.perf_counter()
        self._finish_sst()
        self._wait_upload()
        self.write_s += time.perf_counter() - t
        return list(self.handles)

    def abort(self) -> None:
        """After a failure: let an upload in flight finish (or fail) quietly."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.cancel()
            try:
                pending.result()
            except BaseException:  # the task is failing anyway; GC removes the object
                pass
