"""Reading compacted SSTs with ranged gets, a block cache and bounded prefetch.

The manifest's :class:`SsTableInfo` is authoritative (spec 5.5.2): the footer is never read
for compacted SSTs. Blocks are fetched in coalesced ranged gets of up to
``fetch_bytes``; scans keep at most ``prefetch`` fetches in flight, so memory is bounded by
blocks in flight, not by the size of the SST or the scan.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict, deque
from collections.abc import Iterator
from concurrent.futures import Executor, Future

from slatelib.core.manifest import SsTableInfo, SstHandle
from slatelib.core.row import Row
from slatelib.errors import CorruptObjectError, ObjectMissingError, SstMissingError
from slatelib.format import bloom
from slatelib.format.sst import block_range, decode_data_block, decode_region, read_index
from slatelib.format.sst_index import SstIndex
from slatelib.objstore import ObjectStore

DEFAULT_FETCH_BYTES = 1 << 20
DEFAULT_PREFETCH = 4


class BlockCache:
    """LRU cache of decoded blocks keyed by ``(object path, block number)``, bounded by an
    estimate of the memory the decoded rows take."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity = capacity_bytes
        self._data: OrderedDict[tuple[str, int], tuple[list[Row], int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> list[Row] | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            self._data.move_to_end(key)
            return hit[0]

    def put(self, key: tuple[str, int], rows: list[Row], raw_len: int) -> None:
        cost = raw_len * 3 + 64 * len(rows)
        if cost > self.capacity:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._size -= old[1]
            self._data[key] = (rows, cost)
            self._size += cost
            while self._size > self.capacity and self._data:
                _, (_, c) = self._data.popitem(last=False)
                self._size -= c


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
        self._index: SstIndex | None = None
        self._bloom: bloom.BloomFilter | None | bool = False  # False = not loaded yet
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ metadata
    def _get_exact(self, start: int, end: int, what: str) -> bytes:
        try:
            data = self.store.get_range(self.path, start, end)
        except SstMissingError:
            raise
        except ObjectMissingError as exc:
            raise SstMissingError(
                f"SST {self.path} referenced by the manifest is missing ({exc})", path=self.path
            ) from exc
        if len(data) != end - start:
            raise CorruptObjectError(
                f"truncated SST: {what} [{start}, {end}) returned {len(data)} bytes",
                path=self.path,
            )
        return data

    def index(self) -> SstIndex:
        if self._index is None:
            info = self.info
            region = self._get_exact(
                info.index_offset, info.index_offset + info.index_len, "index"
            )
            idx = read_index(region, info.compression, path=self.path)
            with self._lock:
                if self._index is None:
                    self._index = idx
        assert self._index is not None
        return self._index

    def bloom_filter(self) -> bloom.BloomFilter | None:
        if self._bloom is False:
            info = self.info
            bf: bloom.BloomFilter | None = None
            if info.filter_len:
                region = self._get_exact(
                    info.filter_offset, info.filter_offset + info.filter_len, "filter"
                )
                payload = decode_region(region, info.compression, path=self.path, what="filter")
                bf = bloom.decode_filter_block(payload, info.filter_format, path=self.path)
            self._bloom = bf
        return self._bloom if isinstance(self._bloom, bloom.BloomFilter) else None

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
    def _fetch_group(self, lo: int, hi: int) -> list[list[Row]]:
        """Decode blocks ``lo..hi-1`` (cache first, then one ranged get for the rest)."""
        idx = self.index()
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

    def block_rows(self, i: int) -> list[Row]:
        return self._fetch_group(i, i + 1)[0]

    def _groups(self, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        idx = self.index()
        i = lo
        while i < hi:
            start = block_range(idx, self.info, i)[0]
            j = i + 1
            while j < hi and block_range(idx, self.info, j)[1] - start <= self._fetch_bytes:
                j += 1
            yield i, j
            i = j

    def iter_blocks(self, lo: int, hi: int) -> Iterator[list[Row]]:
        """Decoded blocks ``lo..hi-1`` in order, with up to ``prefetch`` fetches in flight."""
        if lo >= hi:
            return
        groups = self._groups(lo, hi)
        if self._executor is None:
            for a, b in groups:
                yield from self._fetch_group(a, b)
            return
        pending: deque[Future[list[list[Row]]]] = deque()
        try:
            for a, b in groups:
                pending.append(self._executor.submit(self._fetch_group, a, b))
                if len(pending) >= self._prefetch:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()

    def first_block_for(self, key: bytes) -> int:
        """First block that may hold ``key`` (a key may continue from the previous block)."""
        first_keys = self.index().first_keys
        return max(0, bisect_left(first_keys, key) - 1)

    def end_block_for(self, end: bytes, *, inclusive: bool) -> int:
        """One past the last block that may hold keys below (or at) ``end``."""
        first_keys = self.index().first_keys
        return bisect_right(first_keys, end) if inclusive else bisect_left(first_keys, end)

    def iter_range(
        self, start: bytes | None = None, end: bytes | None = None, *, end_inclusive: bool = False
    ) -> Iterator[Row]:
        """Rows with ``start <= key < end`` (``<= end`` when inclusive) in storage order."""
        info = self.info
        if start is not None and info.last_entry is not None and info.last_entry < start:
            return
        if end is not None and info.first_entry is not None:
            if info.first_entry > end or (info.first_entry == end and not end_inclusive):
                return
        lo = 0 if start is None else self.first_block_for(start)
        hi = self.num_blocks if end is None else max(
            lo + 1, self.end_block_for(end, inclusive=end_inclusive))
        hi = min(hi, self.num_blocks)
        for rows in self.iter_blocks(lo, hi):
            for row in rows:
                k = row[0]
                if start is not None and k < start:
                    continue
                if end is not None and (k > end if end_inclusive else k >= end):
                    return
                yield row

    def get_versions(self, key: bytes, key_hash: int | None = None) -> list[Row]:
        """Every version of ``key`` in this SST, newest first."""
        if not self.may_contain(key, key_hash):
            return []
        out: list[Row] = []
        lo = self.first_block_for(key)
        hi = min(self.num_blocks, self.end_block_for(key, inclusive=True))
        for i in range(lo, max(hi, lo + 1)):
            rows = self.block_rows(i)
            for row in rows:
                if row[0] == key:
                    out.append(row)
                elif row[0] > key:
                    return out
        return out
