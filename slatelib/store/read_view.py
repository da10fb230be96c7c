"""A consistent read view: one manifest snapshot plus in-memory tables (format §10).

Sources, newest first: memtables, L0 views, sorted runs (descending id), then segment trees.
Point reads walk them in that order and stop at the first value or tombstone; scans merge
every source by key and sequence number. Views are clipped to their ``visible_range``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from typing import overload

from slatelib.core.external_dbs import external_roots
from slatelib.core.manifest import Manifest, SortedRun, SstView
from slatelib.core.memtable import MemTable
from slatelib.core.merge import MergeOperator, resolve_versions
from slatelib.core.ranges import BoundKind, BytesRange
from slatelib.core.rescale_check import RangeStats
from slatelib.core.row import MERGE, Row
from slatelib.errors import InvalidArgumentError
from slatelib.format import bloom, seam
from slatelib.format.native_merge import merged_rows
from slatelib.format.native_pipe import ARROW_BATCH_BYTES, ARROW_BATCH_ROWS, ArrowBuffers, Block
from slatelib.ids import Ulid
from slatelib.store.sst_reader import SstReader
from slatelib.store.table_store import TableStore

_row_key = itemgetter(0)


def _range_args(
    rng: BytesRange | None, start: bytes | None, end: bytes | None
) -> tuple[bytes | None, bool, bytes | None, bool] | None:
    """Intersect ``[start, end)`` with a view range: ``(lo, lo_excl, hi, hi_incl)`` or None
    when empty."""
    r = BytesRange.half_open(start, end)
    if rng is not None:
        r = r.intersect(rng)
    if r.is_empty():
        return None
    lo = r.start.key
    lo_excl = r.start.kind == BoundKind.EXCLUDED
    hi = r.end.key
    hi_incl = r.end.kind == BoundKind.INCLUDED
    return lo, lo_excl, hi, hi_incl


@dataclass(frozen=True)
class ViewSource:
    reader: SstReader
    visible_range: BytesRange | None

    def contains(self, key: bytes) -> bool:
        return self.visible_range is None or self.visible_range.contains(key)

    def get_versions(self, key: bytes, key_hash: int) -> list[Row]:
        if not self.contains(key):
            return []
        return self.reader.get_versions(key, key_hash)

    def iter_range(self, start: bytes | None, end: bytes | None) -> Iterator[Row]:
        args = _range_args(self.visible_range, start, end)
        if args is None:
            return iter(())
        lo, lo_excl, hi, hi_incl = args
        rows = self.reader.iter_range(lo, hi, end_inclusive=hi_incl)
        if lo_excl:
            return (r for r in rows if r[0] != lo)
        return rows

    def iter_blocks(self, start: bytes | None, end: bytes | None) -> Iterator[list[Row]]:
        """The rows of :meth:`iter_range` as lists (per block or fetched group; never
        mutated)."""
        args = _range_args(self.visible_range, start, end)
        if args is None:
            return iter(())
        lo, lo_excl, hi, hi_incl = args
        blocks = self.reader.iter_range_blocks(lo, hi, end_inclusive=hi_incl)
        if lo_excl:
            assert lo is not None
            return _skip_key(blocks, lo)
        return blocks

    def iter_checked(self, start: bytes | None, end: bytes | None) -> Iterator[Block]:
        """The entries of :meth:`iter_blocks` as the native pipeline reads them
        (``CheckedBlocks`` where it can, see :meth:`SstReader.iter_range_checked`)."""
        args = _range_args(self.visible_range, start, end)
        if args is None:
            return iter(())
        lo, lo_excl, hi, hi_incl = args
        return self.reader.iter_range_checked(lo, hi, start_exclusive=lo_excl,
                                              end_inclusive=hi_incl)

    def start_key(self) -> bytes:
        return view_start_key(self.reader.info.first_entry, self.visible_range)


def view_start_key(first_entry: bytes | None, visible_range: BytesRange | None) -> bytes:
    """The first key a view can hold: its SST's first key, or its range's start if later."""
    first = first_entry or b""
    r = visible_range
    if r is not None and r.start.key is not None and r.start.key > first:
        return r.start.key
    return first


class LazyViewSources(Sequence[ViewSource]):
    """The sources of a run's views, each built on first use: opening a reader on a
    database of 100k SSTs creates no SST reader until a read reaches that SST."""

    __slots__ = ("_views", "_make", "_built")

    def __init__(self, views: Sequence[SstView], make: Callable[[SstView], ViewSource]) -> None:
        self._views = views
        self._make = make
        self._built: list[ViewSource | None] = [None] * len(views)

    def __len__(self) -> int:
        return len(self._views)

    @overload
    def __getitem__(self, i: int) -> ViewSource: ...
    @overload
    def __getitem__(self, i: slice) -> list[ViewSource]: ...

    def __getitem__(self, i: int | slice) -> ViewSource | list[ViewSource]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self._views)))]
        v = self._built[i]
        if v is None:
            v = self._built[i] = self._make(self._views[i])
        return v


class RunSource:
    """A sorted run: non-overlapping views in key order.

    ``starts`` (each view's :func:`view_start_key`) lets ``views`` be a
    :class:`LazyViewSources`, which then stays lazy.
    """

    def __init__(self, views: Sequence[ViewSource], starts: list[bytes] | None = None) -> None:
        self.views: Sequence[ViewSource] = (
            views if isinstance(views, LazyViewSources) and starts is not None else list(views))
        self._starts = starts if starts is not None else [v.start_key() for v in self.views]

    def _view_for(self, key: bytes) -> ViewSource | None:
        i = bisect_right(self._starts, key) - 1
        return self.views[i] if i >= 0 else None

    def get_versions(self, key: bytes, key_hash: int) -> list[Row]:
        v = self._view_for(key)
        return [] if v is None else v.get_versions(key, key_hash)

    def iter_range(self, start: bytes | None, end: bytes | None) -> Iterator[Row]:
        i = 0 if start is None else max(0, bisect_right(self._starts, start) - 1)
        for v in self.views[i:]:
            if end is not None and v.start_key() >= end:
                return
            yield from v.iter_range(start, end)

    def iter_blocks(self, start: bytes | None, end: bytes | None) -> Iterator[list[Row]]:
        i = 0 if start is None else max(0, bisect_right(self._starts, start) - 1)
        for j in range(i, len(self.views)):  # by index: lazy views are built as reached
            if end is not None and self._starts[j] >= end:
                return
            yield from self.views[j].iter_blocks(start, end)

    def iter_checked(self, start: bytes | None, end: bytes | None) -> Iterator[Block]:
        i = 0 if start is None else max(0, bisect_right(self._starts, start) - 1)
        for j in range(i, len(self.views)):
            if end is not None and self._starts[j] >= end:
                return
            yield from self.views[j].iter_checked(start, end)


def _skip_key(blocks: Iterator[list[Row]], key: bytes) -> Iterator[list[Row]]:
    """``blocks`` without the leading rows of ``key`` (an excluded range start)."""
    for rows in blocks:
        if rows[0][0] == key:
            rows = rows[bisect_right(rows, key, key=_row_key):]
            if not rows:
                continue
        yield rows
        yield from blocks
        return


MEM_BLOCK_ROWS = 1024
"""Rows per list when a memtable feeds a merge."""


class MemSource:
    def __init__(self, table: MemTable) -> None:
        self.table = table

    def get_versions(self, key: bytes, key_hash: int) -> list[Row]:
        return self.table.get_versions(key)

    def iter_range(self, start: bytes | None, end: bytes | None) -> Iterator[Row]:
        return self.table.iter_range(start, end)

    def iter_blocks(self, start: bytes | None, end: bytes | None) -> Iterator[list[Row]]:
        rows = self.table.iter_range(start, end)
        while batch := list(islice(rows, MEM_BLOCK_ROWS)):
            yield batch

    def iter_checked(self, start: bytes | None, end: bytes | None) -> Iterator[Block]:
        """Memtable rows stay Python rows in the native pipeline."""
        return self.iter_blocks(start, end)


Source = ViewSource | RunSource | MemSource


class ReadView:
    """Point reads and scans over one manifest snapshot and a stack of memtables."""

    def __init__(
        self,
        tables: TableStore,
        manifest: Manifest,
        memtables: Sequence[MemTable] = (),
        merge_operator: MergeOperator | None = None,
    ) -> None:
        self.tables = tables
        self.manifest = manifest
        self.merge_operator = merge_operator
        # Reads only resolve SST paths: the path's shape is checked, not where it lies.
        self._external: dict[Ulid, str] = external_roots(tables.paths.root, manifest,
                                                         shape_only=True)
        self._mem = [MemSource(t) for t in memtables]
        self._tree = self._tree_sources(manifest.l0, manifest.compacted)
        self._segments = [
            (seg.prefix, self._tree_sources(seg.l0, seg.compacted))
            for seg in (manifest.segments or ())
        ]

    def _view(self, view: SstView) -> ViewSource:
        handle = self.manifest.sst(view.sst_id)
        return ViewSource(self.tables.reader(handle, self._external), view.visible_range)

    def _tree_sources(
        self, l0: Sequence[SstView], runs: Sequence[SortedRun]
    ) -> list[Source]:
        out: list[Source] = [self._view(v) for v in l0]
        sst = self.manifest.sst  # raises for a view of an unknown SST, as _view does
        for run in runs:
            starts = [view_start_key(sst(v.sst_id).info.first_entry, v.visible_range)
                      for v in run.views]
            out.append(RunSource(LazyViewSources(run.views, self._view), starts))
        return out

    def sources_for_key(self, key: bytes) -> list[Source]:
        out: list[Source] = [*self._mem, *self._tree]
        for prefix, srcs in self._segments:
            if key.startswith(prefix):
                out.extend(srcs)
        return out

    def all_sources(self) -> list[Source]:
        out: list[Source] = [*self._mem, *self._tree]
        for _, srcs in self._segments:
            out.extend(srcs)
        return out

    def get_versions(self, key: bytes) -> list[Row]:
        """Versions of ``key`` newest first, stopping after the first value or tombstone."""
        key_hash = bloom.siphash13(key)
        collected: list[Row] = []
        for src in self.sources_for_key(key):
            versions = src.get_versions(key, key_hash)
            if not versions:
                continue
            collected.extend(versions)
            if any(r[2] != MERGE for r in versions):
                break
        collected.sort(key=lambda r: -r[1])
        return collected

    def get(self, key: bytes) -> bytes | None:
        """The visible value of ``key``, or None.

        Raises:
            MergeOperatorMissingError: the key has merge operands and no operator is set.
        """
        return resolve_versions(key, self.get_versions(key), self.merge_operator)

    def iter_rows(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[Row]:
        """Every version in ``[start, end)`` merged in key-ascending, seq-descending order
        (the native merge of ``slatelib/csrc/pipe.h`` when it is built)."""
        return merged_rows([s.iter_blocks(start, end) for s in self.all_sources()])

    def scan(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Visible ``(key, value)`` pairs with ``start <= key < end``, in key order.

        Streaming: it holds one block per source (plus the readers' prefetch) and one batch
        of pairs. With the native pipeline (:func:`slatelib.format.native_pipe.scan_pairs`)
        the SST blocks are checked, merged and resolved without a Python object per row
        but the pairs returned; else the decoded rows are merged and resolved natively
        (:func:`slatelib.format.native_merge.resolved_pairs`) or in Python.
        """
        return seam.scan_pairs(self.all_sources(), start, end, self.merge_operator)

    def scan_stats(self, start: bytes | None = None, end: bytes | None = None) -> RangeStats:
        """The :class:`RangeStats` (keys, key + value bytes, digest) of what :meth:`scan`
        returns for ``[start, end)``. With the native pipeline
        (:func:`slatelib.format.native_pipe.scan_stats`) the SST blocks are checked, merged,
        resolved and hashed natively, with no Python object per row (memtable rows enter as
        rows); else ``RangeStats.of`` the scan's pairs."""
        return seam.scan_stats(self.all_sources(), start, end, self.merge_operator)

    def scan_buffers(self, start: bytes | None = None, end: bytes | None = None, *,
                     max_rows: int = ARROW_BATCH_ROWS, max_bytes: int = ARROW_BATCH_BYTES,
                     ) -> Iterator[ArrowBuffers]:
        """What :meth:`scan` returns for ``[start, end)``, in key order, as batches of Arrow
        buffers (``key`` and ``value`` offsets and data only; at most ``max_rows`` rows,
        ending once keys + values reach ``max_bytes``; no empty batch). With the native
        pipeline (:func:`slatelib.format.native_pipe.visible_buffers`) the SST blocks are
        checked, merged, resolved and copied into the buffers with no Python object per
        row; else the scan's pairs are packed (:func:`pack_pairs`).

        Raises:
            InvalidArgumentError: ``max_rows`` or ``max_bytes`` below 1.
            MergeOperatorMissingError / CorruptObjectError: as :meth:`scan`.
        """
        if max_rows < 1 or max_bytes < 1:
            raise InvalidArgumentError(
                f"scan batches need max_rows and max_bytes of at least 1, not {max_rows} "
                f"and {max_bytes}")
        return seam.scan_buffers(self.all_sources(), start, end, self.merge_operator,
                                 max_rows=max_rows, max_bytes=max_bytes)


