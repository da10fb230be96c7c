"""A consistent read view: one manifest snapshot plus in-memory tables (format §10).

Sources, newest first: memtables, L0 views, sorted runs (descending id), then segment trees.
Point reads walk them in that order and stop at the first value or tombstone; scans merge
every source by key and sequence number. Views are clipped to their ``visible_range``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from slatelib.core.external_dbs import external_roots
from slatelib.core.manifest import Manifest, SortedRun, SstView
from slatelib.core.memtable import MemTable
from slatelib.core.merge import MergeOperator, merge_sources, resolve_rows, resolve_versions
from slatelib.core.ranges import BoundKind, BytesRange
from slatelib.core.row import MERGE, Row
from slatelib.format import bloom
from slatelib.ids import Ulid
from slatelib.store.sst_reader import SstReader
from slatelib.store.table_store import TableStore


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

    def start_key(self) -> bytes:
        first = self.reader.info.first_entry or b""
        r = self.visible_range
        if r is not None and r.start.key is not None and r.start.key > first:
            return r.start.key
        return first


class RunSource:
    """A sorted run: non-overlapping views in key order."""

    def __init__(self, views: Sequence[ViewSource]) -> None:
        self.views = list(views)
        self._starts = [v.start_key() for v in self.views]

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


class MemSource:
    def __init__(self, table: MemTable) -> None:
        self.table = table

    def get_versions(self, key: bytes, key_hash: int) -> list[Row]:
        return self.table.get_versions(key)

    def iter_range(self, start: bytes | None, end: bytes | None) -> Iterator[Row]:
        return self.table.iter_range(start, end)


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
        out.extend(RunSource([self._view(v) for v in run.views]) for run in runs)
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
        """Every version in ``[start, end)`` merged in key-ascending, seq-descending order."""
        return merge_sources([s.iter_range(start, end) for s in self.all_sources()])

    def scan(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Visible ``(key, value)`` pairs with ``start <= key < end``, in key order."""
        return resolve_rows(self.iter_rows(start, end), self.merge_operator)
