"""Reading compacted SSTs with ranged gets, a block cache and bounded prefetch.

The manifest's :class:`SsTableInfo` is authoritative (format §5.5.2): the footer is never read
for compacted SSTs. Blocks are fetched in coalesced ranged gets of up to
``fetch_bytes``; scans keep at most ``prefetch`` fetches in flight. Decoded blocks and each
SST's index and bloom filter live in the shared, bounded :class:`BlockCache` (as 0.17
caches index and filter blocks), never on the reader, so memory is bounded by the cache
and the blocks in flight, not by the size of the database or of the scan.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from operator import itemgetter
from typing import TypeVar

from slatelib.core.manifest import CompressionCodec, SsTableInfo, SstHandle
from slatelib.core.ranges import Bound, BoundKind, BytesRange
from slatelib.core.row import Row
from slatelib.errors import CorruptObjectError, ObjectMissingError, SstMissingError
from slatelib.format import bloom, seam
from slatelib.format.flatbuf import Buffer, corrupt_on_error
from slatelib.format.native_pipe import CheckedBlocks
from slatelib.format.sst import (
    block_range,
    decode_data_block,
    decode_region,
    read_index,
    read_stats,
)
from slatelib.format.sst_index import SstIndex
from slatelib.format.sst_stats import SstStats
from slatelib.objstore import ObjectStore

DEFAULT_FETCH_BYTES = 1 << 20
DEFAULT_PREFETCH = 4


INDEX_SLOT = -1
FILTER_SLOT = -2
"""Cache slots of an SST's index and filter (data blocks use their block number)."""
_UNLOADED = object()
_row_key = itemgetter(0)
_NO_FILTER = object()
_G = TypeVar("_G")


def index_cost(idx: SstIndex) -> int:
    """Estimated memory of a decoded index (two tuples of ints and bytes objects)."""
    return sum(map(len, idx.first_keys)) + 120 * len(idx.offsets) + 128


class BlockCache:
    """LRU cache keyed by ``(object path, slot)``: decoded data blocks (slot = block number)
    and SST indexes and filters (:data:`INDEX_SLOT`, :data:`FILTER_SLOT`), bounded by an
    estimate of the memory they take. An entry larger than the capacity is not cached."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity = capacity_bytes
        self._data: OrderedDict[tuple[str, int], tuple[object, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    @property
    def size_bytes(self) -> int:
        """Estimated memory held now (never above ``capacity``)."""
        return self._size

    def lookup(self, key: tuple[str, int]) -> object | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            self._data.move_to_end(key)
            return hit[0]

    def insert(self, key: tuple[str, int], value: object, cost: int) -> None:
        if cost > self.capacity:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._size -= old[1]
            self._data[key] = (value, cost)
            self._size += cost
            while self._size > self.capacity and self._data:
                _, (_, c) = self._data.popitem(last=False)
                self._size -= c

    def get(self, key: tuple[str, int]) -> list[Row] | None:
        """A cached data block."""
        hit = self.lookup(key)
        return hit if isinstance(hit, list) else None

    def put(self, key: tuple[str, int], rows: list[Row], raw_len: int) -> None:
        """Cache a data block decoded from ``raw_len`` stored bytes."""
        self.insert(key, rows, raw_len * 3 + 64 * len(rows))


class SstReader:
    """One compacted SST, read through ranged gets."""

    def __init__(
        self,
        store: ObjectStore,
        path: str,
        handle: SstHandle,
        *,
        cache: BlockCache | None = None,
        executor: Executor | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        fetch_bytes: int = DEFAULT_FETCH_BYTES,
        missing_hint: str = "",
    ) -> None:
        self.store = store
        self.path = path
        self.handle = handle
        self.info: SsTableInfo = handle.info
        self.version = handle.effective_format_version
        self._cache = cache
        self._executor = executor
        self._prefetch = max(1, prefetch)
        self._fetch_bytes = max(1, fetch_bytes)
        self._missing_hint = missing_hint
        # Without a shared cache (one-off readers: CLI, planning) metadata stays here.
        self._index: SstIndex | None = None
        self._bloom: bloom.BloomFilter | None | object = _UNLOADED

    # ------------------------------------------------------------------ metadata
    def _get_exact(self, start: int, end: int, what: str) -> bytes:
        try:
            data = self.store.get_range(self.path, start, end)
        except SstMissingError:
            raise
        except ObjectMissingError as exc:
            raise SstMissingError(
                f"SST {self.path} referenced by the manifest is missing{self._missing_hint} "
                f"({exc})", path=self.path
            ) from exc
        if len(data) != end - start:
            raise CorruptObjectError(
                f"truncated SST: {what} [{start}, {end}) returned {len(data)} bytes",
                path=self.path,
            )
        return data

    def index(self) -> SstIndex:
        """The decoded index (from the cache, else one ranged get).

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST.
        """
        if self._index is not None:
            return self._index
        cache = self._cache
        if cache is not None:
            hit = cache.lookup((self.path, INDEX_SLOT))
            if isinstance(hit, SstIndex):
                return hit
        info = self.info
        region = self._get_exact(info.index_offset, info.index_offset + info.index_len, "index")
        idx = read_index(region, info.compression, path=self.path)
        if cache is None:
            self._index = idx
        else:
            cache.insert((self.path, INDEX_SLOT), idx, index_cost(idx))
        return idx

    def bloom_filter(self) -> bloom.BloomFilter | None:
        """The whole-key bloom filter, or None when the SST has none.

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST.
        """
        info = self.info
        if not info.filter_len:
            return None
        if self._bloom is not _UNLOADED:
            return self._bloom if isinstance(self._bloom, bloom.BloomFilter) else None
        cache = self._cache
        if cache is not None:
            hit = cache.lookup((self.path, FILTER_SLOT))
            if hit is not None:
                return hit if isinstance(hit, bloom.BloomFilter) else None
        region = self._get_exact(info.filter_offset, info.filter_offset + info.filter_len, "filter")
        payload = decode_region(region, info.compression, path=self.path, what="filter")
        bf = bloom.decode_filter_block(payload, info.filter_format, path=self.path)
        if cache is None:
            self._bloom = bf
        else:  # a filter block without a whole-key filter is cached as _NO_FILTER
            cache.insert((self.path, FILTER_SLOT), _NO_FILTER if bf is None else bf,
                         256 + (0 if bf is None else len(bf.bits)))
        return bf

    def filter_entries(self) -> dict[str, bytes] | None:
        """Every filter of the filter block by name (a legacy block as ``_bf``), or None
        without a filter block; read past the cache (compaction planning reads it once).

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST.
        """
        info = self.info
        if not info.filter_len:
            return None
        region = self._get_exact(info.filter_offset, info.filter_offset + info.filter_len, "filter")
        payload = decode_region(region, info.compression, path=self.path, what="filter")
        if info.filter_format == 0:
            return {bloom.BLOOM_POLICY_NAME: payload}
        return bloom.decode_composite(payload, path=self.path)

    def stats(self) -> SstStats | None:
        """The stats block, or None when the SST has none.

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST.
        """
        region = self._stats_region()
        return None if region is None else read_stats(region, self.info.compression,
                                                      path=self.path)

    def stats_rows(self) -> int | None:
        """``num_puts + num_deletes + num_merges`` of the stats block (None without one):
        :meth:`stats` without decoding the per-block stats (tens of thousands of entries
        in a large SST), for callers that want the totals only.

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST.
        """
        region = self._stats_region()
        if region is None:
            return None
        payload = decode_region(region, self.info.compression, path=self.path, what="stats")
        with corrupt_on_error("SstStats", self.path):
            root = Buffer(payload, path=self.path).root()
            return root.u64(0) + root.u64(1) + root.u64(2)

    def _stats_region(self) -> bytes | None:
        """The stored stats block (checksummed, maybe compressed), None without one."""
        info = self.info
        if not info.stats_len:
            return None
        return self._get_exact(info.stats_offset, info.stats_offset + info.stats_len, "stats")

    def raw_blocks(self, lo: int, hi: int) -> list[bytes]:
        """Data blocks ``lo..hi-1`` checked and decompressed, not decoded (one ranged get).

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST
                and the block.
        """
        idx, info = self.index(), self.info
        start = block_range(idx, info, lo)[0]
        end = block_range(idx, info, hi - 1)[1]
        data = self._get_exact(start, end, f"blocks {lo}..{hi - 1}")
        out = []
        for i in range(lo, hi):
            s, e = block_range(idx, info, i)
            out.append(decode_region(data[s - start:e - start], info.compression,
                                     path=self.path, what="block", block=i))
        return out

    def may_contain(self, key: bytes, key_hash: int | None = None) -> bool:
        info = self.info
        if info.first_entry is not None and key < info.first_entry:
            return False
        if info.last_entry is not None and key > info.last_entry:
            return False
        bf = self.bloom_filter()
        if bf is None:
            return True
        return bf.might_contain_hash(bloom.siphash13(key) if key_hash is None else key_hash)

    @property
    def num_blocks(self) -> int:
        return len(self.index().offsets)

    # -------------------------------------------------------------------- blocks
    def _fetch_group(self, idx: SstIndex, lo: int, hi: int) -> list[list[Row]]:
        """Decode blocks ``lo..hi-1`` (cache first, then one ranged get for the rest)."""
        out: list[list[Row] | None] = [None] * (hi - lo)
        missing: list[int] = []
        cache = self._cache
        for i in range(lo, hi):
            hit = cache.get((self.path, i)) if cache is not None else None
            if hit is None:
                missing.append(i)
            else:
                out[i - lo] = hit
        if missing:
            first, last = missing[0], missing[-1]
            start = block_range(idx, self.info, first)[0]
            end = block_range(idx, self.info, last)[1]
            data = self._get_exact(start, end, f"blocks {first}..{last}")
            for i in missing:
                s, e = block_range(idx, self.info, i)
                region = data[s - start : e - start]
                rows = decode_data_block(
                    region, self.info.compression, self.version, path=self.path, block=i
                )
                if cache is not None:
                    cache.put((self.path, i), rows, len(region))
                out[i - lo] = rows
        return [r for r in out if r is not None]

    def _fetch_group_uncached(self, idx: SstIndex, lo: int, hi: int) -> list[list[Row]]:
        """Decode blocks ``lo..hi-1`` from one ranged get, bypassing the cache (scans).

        Uncompressed blocks are checked and decoded in one native call
        (``seam.decode_plain_blocks``) into one list for the whole group; if it finds damage,
        the per-block path runs instead, so the error names the object and the block exactly
        as it does elsewhere.
        """
        info = self.info
        start = block_range(idx, info, lo)[0]
        end = block_range(idx, info, hi - 1)[1]
        data = self._get_exact(start, end, f"blocks {lo}..{hi - 1}")
        if info.compression == CompressionCodec.NONE:
            bounds = [o - start for o in idx.offsets[lo:hi]]
            bounds.append(end - start)
            # one list for the whole group: the merge then pulls one list per fetch (None:
            # no extension, or damage, which the path below names precisely)
            decoded = seam.decode_plain_blocks(data, bounds, self.version)
            if decoded is not None:
                return [decoded]
        out: list[list[Row]] = []
        for i in range(lo, hi):
            s, e = block_range(idx, info, i)
            out.append(decode_data_block(data[s - start:e - start], info.compression,
                                         self.version, path=self.path, block=i))
        return out

    def _fetch_group_checked(self, idx: SstIndex, lo: int, hi: int,
                             rng: BytesRange) -> list[list[Row] | CheckedBlocks]:
        """Blocks ``lo..hi-1`` from one ranged get, bypassing the cache, checked natively
        (``seam.check_group``, clipped to ``rng``; compressed blocks are decompressed
        first); on damage (or without the extension), decoded block by block so that the error names the object and the
        block."""
        info = self.info
        start = block_range(idx, info, lo)[0]
        end = block_range(idx, info, hi - 1)[1]
        data = self._get_exact(start, end, f"blocks {lo}..{hi - 1}")
        bounds = [o - start for o in idx.offsets[lo:hi]]
        bounds.append(end - start)
        checked = seam.check_group(data, bounds, self.version, info.compression, rng)
        if checked is not None:
            return [checked]
        out: list[list[Row] | CheckedBlocks] = []
        for i in range(lo, hi):
            s, e = block_range(idx, info, i)
            out.append(decode_data_block(data[s - start:e - start], info.compression,
                                         self.version, path=self.path, block=i))
        return out

    def block_rows(self, i: int) -> list[Row]:
        """Rows of data block ``i``.

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST
                and the block.
        """
        return self._fetch_group(self.index(), i, i + 1)[0]

    def _groups(self, idx: SstIndex, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        i = lo
        while i < hi:
            start = block_range(idx, self.info, i)[0]
            j = i + 1
            while j < hi and block_range(idx, self.info, j)[1] - start <= self._fetch_bytes:
                j += 1
            yield i, j
            i = j

    def iter_blocks(self, lo: int, hi: int, idx: SstIndex | None = None, *,
                    cache_blocks: bool = True) -> Iterator[list[Row]]:
        """Decoded blocks ``lo..hi-1`` in order, with up to ``prefetch`` fetches in flight.

        ``cache_blocks=False`` neither reads nor fills the block cache (scans, as 0.17's
        ``ScanOptions::cache_blocks`` defaults to false).
        """
        if lo >= hi:
            return
        idx = self.index() if idx is None else idx
        yield from self._prefetched(idx, lo, hi, self._fetch_group if cache_blocks
                                    else self._fetch_group_uncached)

    def _prefetched(self, idx: SstIndex, lo: int, hi: int,
                    fetch: Callable[[SstIndex, int, int], Sequence[_G]]) -> Iterator[_G]:
        """What ``fetch`` returns for each group of blocks ``lo..hi-1``, in order, with up to
        ``prefetch`` fetches in flight."""
        groups = self._groups(idx, lo, hi)
        if self._executor is None:
            for a, b in groups:
                yield from fetch(idx, a, b)
            return
        pending: deque[Future[Sequence[_G]]] = deque()
        try:
            for a, b in groups:
                pending.append(self._executor.submit(fetch, idx, a, b))
                if len(pending) >= self._prefetch:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()

    @staticmethod
    def _first_block_for(idx: SstIndex, key: bytes) -> int:
        """First block that may hold ``key`` (a key may continue from the previous block)."""
        return max(0, bisect_left(idx.first_keys, key) - 1)

    @staticmethod
    def _end_block_for(idx: SstIndex, end: bytes, *, inclusive: bool) -> int:
        """One past the last block that may hold keys below (or at) ``end``."""
        first_keys = idx.first_keys
        return bisect_right(first_keys, end) if inclusive else bisect_left(first_keys, end)

    def first_block_for(self, key: bytes) -> int:
        """First block that may hold ``key`` (a key may continue from the previous block)."""
        return self._first_block_for(self.index(), key)

    def end_block_for(self, end: bytes, *, inclusive: bool) -> int:
        """One past the last block that may hold keys below (or at) ``end``."""
        return self._end_block_for(self.index(), end, inclusive=inclusive)

    def _block_span(self, start: bytes | None, end: bytes | None,
                    end_inclusive: bool) -> tuple[SstIndex, int, int] | None:
        """The index and the blocks ``[lo, hi)`` that may hold keys of the range, or None
        when the SST's key range misses it (no I/O then). The index is held by the caller
        for the whole scan, whatever the cache evicts meanwhile."""
        info = self.info
        if start is not None and info.last_entry is not None and info.last_entry < start:
            return None
        if end is not None and info.first_entry is not None:
            if info.first_entry > end or (info.first_entry == end and not end_inclusive):
                return None
        idx = self.index()
        n = len(idx.offsets)
        lo = 0 if start is None else self._first_block_for(idx, start)
        hi = n if end is None else max(
            lo + 1, self._end_block_for(idx, end, inclusive=end_inclusive))
        return idx, lo, min(hi, n)

    def iter_range(
        self, start: bytes | None = None, end: bytes | None = None, *, end_inclusive: bool = False
    ) -> Iterator[Row]:
        """Rows with ``start <= key < end`` (``<= end`` when inclusive) in storage order.

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST
                (and the block).
        """
        span = self._block_span(start, end, end_inclusive)
        if span is None:
            return
        idx, lo, hi = span
        for rows in self.iter_blocks(lo, hi, idx):
            for row in rows:
                k = row[0]
                if start is not None and k < start:
                    continue
                if end is not None and (k > end if end_inclusive else k >= end):
                    return
                yield row

    def iter_range_blocks(
        self, start: bytes | None = None, end: bytes | None = None, *, end_inclusive: bool = False
    ) -> Iterator[list[Row]]:
        """The rows of :meth:`iter_range` as non-empty lists (one per data block, or per
        fetched group of blocks; clipped to the range; callers must not mutate the lists). The blocks bypass the block cache, as a
        0.17 scan's do by default (``ScanOptions::cache_blocks``).

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST
                (and the block).
        """
        span = self._block_span(start, end, end_inclusive)
        if span is None:
            return
        idx, lo, hi = span
        find_end = bisect_right if end_inclusive else bisect_left
        for rows in self.iter_blocks(lo, hi, idx, cache_blocks=False):
            if not rows:
                continue
            a, b = 0, len(rows)
            if start is not None and rows[0][0] < start:
                a = bisect_left(rows, start, key=_row_key)
            ended = False
            if end is not None:
                last = rows[-1][0]
                if last > end or (last == end and not end_inclusive):
                    b = find_end(rows, end, key=_row_key)
                    ended = True
            if a < b:
                yield rows if (a == 0 and b == len(rows)) else rows[a:b]
            if ended:
                return

    def iter_range_checked(
        self, start: bytes | None = None, end: bytes | None = None, *,
        start_exclusive: bool = False, end_inclusive: bool = False,
    ) -> Iterator[list[Row] | CheckedBlocks]:
        """The entries of :meth:`iter_range_blocks` (``start`` excluded when
        ``start_exclusive``), as ``CheckedBlocks`` (no Python object per row, see
        :mod:`slatelib.format.native_pipe`) where the native pipeline can read the blocks,
        else as row lists; for the native pipeline only. Bypasses the block cache.

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST
                (and the block).
        """
        span = self._block_span(start, end, end_inclusive)
        if span is None:
            return
        idx, lo, hi = span
        rng = BytesRange(
            Bound.unbounded() if start is None else
            Bound.excluded(start) if start_exclusive else Bound.included(start),
            Bound.unbounded() if end is None else
            Bound.included(end) if end_inclusive else Bound.excluded(end))

        def fetch(i: SstIndex, a: int, b: int) -> list[list[Row] | CheckedBlocks]:
            return self._fetch_group_checked(i, a, b, rng)

        for got in self._prefetched(idx, lo, hi, fetch):
            if not isinstance(got, list):
                if len(got):
                    yield got
                if got.ended:
                    return
                continue
            rows, ended = _clip_rows(got, rng)
            if rows:
                yield rows
            if ended:
                return

    def get_versions(self, key: bytes, key_hash: int | None = None) -> list[Row]:
        """Every version of ``key`` in this SST, newest first.

        Raises:
            SstMissingError / CorruptObjectError / ChecksumMismatchError: naming the SST.
        """
        if not self.may_contain(key, key_hash):
            return []
        idx = self.index()
        out: list[Row] = []
        lo = self._first_block_for(idx, key)
        hi = min(len(idx.offsets), self._end_block_for(idx, key, inclusive=True))
        for i in range(lo, max(hi, lo + 1)):
            rows = self._fetch_group(idx, i, i + 1)[0]
            for row in rows:
                if row[0] == key:
                    out.append(row)
                elif row[0] > key:
                    return out
        return out


def _clip_rows(rows: list[Row], rng: BytesRange) -> tuple[list[Row], bool]:
    """The rows of ``rows`` (sorted) inside ``rng``; the flag says the range ends here."""
    if not rows:
        return rows, False
    a, b, ended = 0, len(rows), False
    if rng.below_start(rows[0][0]):
        key = rng.start.key
        a = (bisect_right if rng.start.kind == BoundKind.EXCLUDED else bisect_left)(
            rows, key, key=_row_key)
    if rng.above_end(rows[-1][0]):
        key = rng.end.key
        b = (bisect_right if rng.end.kind == BoundKind.INCLUDED else bisect_left)(
            rows, key, key=_row_key)
        ended = True
    return (rows if a == 0 and b == len(rows) else rows[a:b]), ended
