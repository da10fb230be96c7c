"""Reading a compaction task's inputs: only the blocks of its range, in prefetched groups.

For each input view overlapping the task's range, the blocks that may hold keys of the range
(clipped to the view's ``visible_range``) are fetched in groups of consecutive blocks of up
to ``bytes_to_fetch`` (one ranged get each), with at most ``max_fetch_tasks`` groups in
flight per view. A fetch thread verifies every block's CRC, decompresses it and decodes it
(natively when the accelerator is built) into one list of rows per group; rows outside the
range are clipped once per group. A sorted run's views are read one after another, so a
source yields rows in storage order.

With ``checked=True`` (the native pipeline, :mod:`slatelib.format.native_pipe`), a group of
blocks is not decoded into rows: the fetch thread checks it (``check_stored_blocks``: CRC-32
and full structure, with the GIL released; compressed blocks are decompressed first) and the
source yields a ``CheckedBlocks`` clipped to the range, which the native merge reads in
place. A group that fails the check takes the row path below, which names the damage.

A damaged block raises :class:`ChecksumMismatchError` / :class:`CorruptObjectError` naming
the object and the block; a missing SST raises :class:`SstMissingError`.
"""

from __future__ import annotations

import time
import zlib
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from operator import itemgetter
from typing import cast

from slatelib.core.compaction_source import effective_range
from slatelib.core.manifest import CompressionCodec
from slatelib.core.ranges import BoundKind, BytesRange
from slatelib.core.row import Row
from slatelib.errors import (
    ChecksumMismatchError,
    CorruptObjectError,
    ObjectMissingError,
    SstMissingError,
)
from slatelib.format import seam
from slatelib.format.block import decode_block_v2
from slatelib.format.block_v1 import decode_block_v1
from slatelib.format.compression import decompress
from slatelib.format.native_pipe import CheckedBlocks
from slatelib.format.sst import block_range
from slatelib.format.sst_index import SstIndex
from slatelib.objstore import ObjectStore
from slatelib.objstore.forwarding import read_range_buffer
from slatelib.ops.engine._task import CompactionTask
from slatelib.store.sst_reader import SstReader

_key = itemgetter(0)


def _crc32(data: memoryview) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def block_decoder(format_version: int) -> Callable[[bytes | memoryview], list[Row]]:
    """The block decoder of an SST format version (native when built).

    Raises:
        CorruptObjectError: an unknown version.
    """
    if format_version == 2:
        return decode_block_v2  # type: ignore[return-value]
    if format_version == 1:
        return decode_block_v1  # type: ignore[return-value]
    raise CorruptObjectError(f"unknown SST format version {format_version}")


class ReadTimer:
    """Seconds the merge spent waiting for input rows."""

    def __init__(self) -> None:
        self.seconds = 0.0


@dataclass(frozen=True)
class ViewInput:
    """One view to read: its SST, the part of the task range it covers, its block span."""

    path: str
    index: SstIndex
    reader: SstReader
    range: BytesRange
    lo: int
    hi: int

    @property
    def bytes(self) -> int:
        info = self.reader.info
        return (block_range(self.index, info, self.hi - 1)[1]
                - block_range(self.index, info, self.lo)[0])


def _block_span(reader: SstReader, rng: BytesRange) -> tuple[int, int]:
    """Blocks ``[lo, hi)`` that may hold keys of ``rng``."""
    n = reader.num_blocks
    if n == 0:
        return 0, 0
    lo = 0 if rng.start.key is None else reader.first_block_for(rng.start.key)
    if rng.end.kind == BoundKind.UNBOUNDED or rng.end.key is None:
        hi = n
    else:
        hi = reader.end_block_for(rng.end.key, inclusive=rng.end.kind == BoundKind.INCLUDED)
    return lo, max(lo + 1, min(hi, n))


def open_inputs(task: CompactionTask, store: ObjectStore, pool: ThreadPoolExecutor,
                ) -> list[list[ViewInput]]:
    """Per source (newest first), its views overlapping the task range, indexes loaded.

    Raises:
        SstMissingError: an input SST is missing.
        CorruptObjectError / ChecksumMismatchError: an unreadable SST index.
        UnavailableError / StorageError: storage failures.
    """
    pending: list[list[tuple[SstReader, BytesRange]]] = []
    readers: list[SstReader] = []
    for source in task.sources:
        views = []
        for tv in source.views:
            rng = effective_range(tv.view, tv.handle.info).intersect(task.range)
            if rng.is_empty():
                continue
            reader = SstReader(store, tv.path, tv.handle)
            readers.append(reader)
            views.append((reader, rng))
        pending.append(views)
    indexes = dict(zip(map(id, readers), pool.map(SstReader.index, readers), strict=True))
    out: list[list[ViewInput]] = []
    for views in pending:
        inputs = []
        for reader, rng in views:
            lo, hi = _block_span(reader, rng)
            if hi > lo:
                inputs.append(ViewInput(reader.path, indexes[id(reader)], reader, rng, lo, hi))
        out.append(inputs)
    return out


def _get_group(store: ObjectStore, vi: ViewInput, a: int, b: int,
               ) -> tuple[bytes | memoryview, int, int]:
    """The stored bytes of blocks ``a..b-1`` (one ranged get, as the fetched buffer: no copy
    into ``bytes`` where the store allows, see ``read_range_buffer``) and their
    ``[start, end)``."""
    info = vi.reader.info
    index = vi.index
    start = block_range(index, info, a)[0]
    end = block_range(index, info, b - 1)[1]
    try:
        data = read_range_buffer(store, vi.path, start, end)
    except SstMissingError:
        raise
    except ObjectMissingError as exc:
        raise SstMissingError(f"input SST {vi.path} is missing ({exc})", path=vi.path) from exc
    if len(data) != end - start:
        raise CorruptObjectError(f"truncated SST: blocks {a}..{b - 1} [{start}, {end}) returned "
                                 f"{len(data)} bytes", path=vi.path)
    return data, start, end


Group = list[Row] | CheckedBlocks
"""What a fetch returns: decoded rows, or (``checked``) the checked blocks."""


def _fetch_checked(store: ObjectStore, vi: ViewInput, a: int, b: int) -> Group:
    """Blocks ``a..b-1`` checked natively (decompressed first when compressed) and clipped
    to the view's range (:func:`slatelib.format.seam.check_group`); on damage, or without
    the extension, the row path (:func:`_fetch`), which names a damaged block."""
    data, start, end = _get_group(store, vi, a, b)
    bounds = [o - start for o in vi.index.offsets[a:b]]
    bounds.append(end - start)
    checked = seam.check_group(data, bounds, vi.reader.version, vi.reader.info.compression,
                               vi.range)
    return checked if checked is not None else _fetch(store, vi, a, b, got=(data, start, end))


def _fetch(store: ObjectStore, vi: ViewInput, a: int, b: int, *,
           got: tuple[bytes | memoryview, int, int] | None = None) -> list[Row]:
    """Blocks ``a..b-1`` of one view: one ranged get (unless ``got`` holds it), then
    verify, decompress, decode."""
    info = vi.reader.info
    index = vi.index
    data_bytes, start, end = _get_group(store, vi, a, b) if got is None else got
    if info.compression == CompressionCodec.NONE:
        # one native call checks and decodes every block; on damage (or without the
        # extension) the loop below runs and names the block precisely
        bounds = [o - start for o in index.offsets[a:b]]
        bounds.append(end - start)
        decoded = seam.decode_plain_blocks(data_bytes, bounds, vi.reader.version)
        if decoded is not None:
            return decoded
    view = memoryview(data_bytes)
    codec = info.compression
    plain = codec == CompressionCodec.NONE
    decode = block_decoder(vi.reader.version)
    offsets = index.offsets
    last = len(offsets) - 1
    data_end = block_range(index, info, last)[1]
    rows: list[Row] = []
    extend = rows.extend
    for i in range(a, b):
        s = offsets[i] - start
        e = (offsets[i + 1] if i < last else data_end) - start
        if e - s < 4:
            raise CorruptObjectError(f"block {i} is shorter than its checksum", path=vi.path)
        payload = view[s:e - 4]
        stored = int.from_bytes(view[e - 4:e], "big")
        actual = _crc32(payload)
        if stored != actual:
            raise ChecksumMismatchError(
                f"checksum mismatch in block {i} (stored {stored:08x}, computed {actual:08x})",
                path=vi.path, region="block", block=i)
        try:
            extend(decode(payload if plain else decompress(codec, bytes(payload),
                                                           what=f"block {i}")))
        except CorruptObjectError as exc:
            raise CorruptObjectError(f"block {i}: {exc}", path=vi.path) from exc
    return rows


def _groups(vi: ViewInput, fetch_bytes: int) -> Iterator[tuple[int, int]]:
    info, index = vi.reader.info, vi.index
    i = vi.lo
    while i < vi.hi:
        start = block_range(index, info, i)[0]
        j = i + 1
        while j < vi.hi and block_range(index, info, j)[1] - start <= fetch_bytes:
            j += 1
        yield i, j
        i = j


def _clip(rows: list[Row], rng: BytesRange) -> tuple[list[Row], bool]:
    """Rows inside ``rng``; the flag says the range ends within these rows."""
    start, end = rng.start, rng.end
    lo, hi, ended = 0, len(rows), False
    if start.kind != BoundKind.UNBOUNDED and rng.below_start(rows[0][0]):
        find = bisect_left if start.kind == BoundKind.INCLUDED else bisect_right
        lo = find(rows, start.key, key=_key)
    if end.kind != BoundKind.UNBOUNDED and rng.above_end(rows[-1][0]):
        find = bisect_left if end.kind == BoundKind.EXCLUDED else bisect_right
        hi = find(rows, end.key, key=_key)
        ended = True
    if lo == 0 and hi == len(rows):
        return rows, ended
    return rows[lo:hi], ended


def view_rows(store: ObjectStore, vi: ViewInput, pool: ThreadPoolExecutor, *, prefetch: int,
              fetch_bytes: int, timer: ReadTimer) -> Iterator[list[Row]]:
    """Rows of one view within its range, one list per fetched group, fetching ahead.

    Raises:
        ChecksumMismatchError / CorruptObjectError: a damaged block (object and block named).
        SstMissingError / UnavailableError / StorageError: the SST cannot be read.
    """
    return cast("Iterator[list[Row]]", view_groups(
        store, vi, pool, prefetch=prefetch, fetch_bytes=fetch_bytes, timer=timer, checked=False))


def view_groups(store: ObjectStore, vi: ViewInput, pool: ThreadPoolExecutor, *, prefetch: int,
                fetch_bytes: int, timer: ReadTimer, checked: bool) -> Iterator[Group]:
    """:func:`view_rows`, or with ``checked`` a ``CheckedBlocks`` per group where the native
    pipeline can read it (see the module docstring).

    Raises:
        ChecksumMismatchError / CorruptObjectError: a damaged block (object and block named).
        SstMissingError / UnavailableError / StorageError: the SST cannot be read.
    """
    return iter(_ViewFetch(store, vi, pool, prefetch=prefetch, fetch_bytes=fetch_bytes,
                           timer=timer, checked=checked))


class _ViewFetch:
    """The groups of one view, fetched ahead: the first group's fetch is submitted when this
    is made (so a task's sources all start reading at once, in source order, before the
    merge waits on any of them), the rest of the ``prefetch`` window when it is first
    iterated."""

    def __init__(self, store: ObjectStore, vi: ViewInput, pool: ThreadPoolExecutor, *,
                 prefetch: int, fetch_bytes: int, timer: ReadTimer, checked: bool) -> None:
        self.store, self.vi, self.pool, self.timer = store, vi, pool, timer
        self.prefetch = max(1, prefetch)
        self.fetch: Callable[[ObjectStore, ViewInput, int, int], Group] = (
            _fetch_checked if checked else _fetch)
        self.groups = _groups(vi, max(1, fetch_bytes))
        self.pending: deque[Future[Group]] = deque()
        self._submit_next()

    def _submit_next(self) -> bool:
        nxt = next(self.groups, None)
        if nxt is None:
            return False
        self.pending.append(self.pool.submit(self.fetch, self.store, self.vi, *nxt))
        return True

    def __iter__(self) -> Iterator[Group]:
        pending = self.pending
        try:
            while len(pending) < self.prefetch and self._submit_next():
                pass
            while pending:
                t = time.perf_counter()
                rows = pending.popleft().result()
                self.timer.seconds += time.perf_counter() - t
                self._submit_next()
                if not isinstance(rows, list):  # checked blocks, clipped already
                    if len(rows):
                        yield rows
                    if rows.ended:
                        return
                    continue
                if not rows:
                    continue
                clipped, ended = _clip(rows, self.vi.range)
                if clipped:
                    yield clipped
                if ended:
                    return
        finally:
            for f in pending:
                f.cancel()


def source_rows(store: ObjectStore, views: list[ViewInput], pool: ThreadPoolExecutor, *,
                prefetch: int, fetch_bytes: int, timer: ReadTimer) -> Iterator[list[Row]]:
    """Rows of one source (an L0 view, or a run's views in key order).

    Raises:
        DataError / UnavailableError / StorageError: see :func:`view_rows`.
    """
    for vi in views:
        yield from view_rows(store, vi, pool, prefetch=prefetch, fetch_bytes=fetch_bytes,
                             timer=timer)


def source_blocks(store: ObjectStore, views: list[ViewInput], pool: ThreadPoolExecutor, *,
                  prefetch: int, fetch_bytes: int, timer: ReadTimer) -> Iterator[Group]:
    """:func:`source_rows` for the native pipeline: ``CheckedBlocks`` where it can read the
    blocks, row lists elsewhere (:func:`view_groups`). The first view's first fetch is
    submitted at once (not when the source is first read), so that a task's sources,
    made one after another, fetch their first groups side by side.

    Raises:
        DataError / UnavailableError / StorageError: see :func:`view_rows`.
    """
    if not views:
        return iter(())
    first = _ViewFetch(store, views[0], pool, prefetch=prefetch, fetch_bytes=fetch_bytes,
                       timer=timer, checked=True)

    def groups() -> Iterator[Group]:
        yield from first
        for vi in views[1:]:
            yield from view_groups(store, vi, pool, prefetch=prefetch,
                                   fetch_bytes=fetch_bytes, timer=timer, checked=True)

    return groups()
