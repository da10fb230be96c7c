"""In-memory tables of rows (replayed WAL rows, and a writer's unflushed writes). Pure.

Rows are kept per key, newest first; the sorted key list is rebuilt lazily after inserts,
so bulk loading (WAL replay) costs one sort.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator

from slatelib.core.row import Row


class MemTable:
    """Rows grouped by key (newest version first). Thread-safe for concurrent readers
    and one writer."""

    def __init__(self) -> None:
        self._rows: dict[bytes, list[Row]] = {}
        self._keys: list[bytes] | None = []
        self._bytes = 0
        self._max_seq = 0
        self._min_seq: int | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    @property
    def max_seq(self) -> int:
        return self._max_seq

    @property
    def min_seq(self) -> int | None:
        return self._min_seq

    def is_empty(self) -> bool:
        return not self._rows

    def put(self, row: Row) -> None:
        key = row[0]
        with self._lock:
            versions = self._rows.get(key)
            if versions is None:
                self._rows[key] = [row]
                self._keys = None
            elif row[1] >= versions[0][1]:
                versions.insert(0, row)
            else:
                versions.append(row)
                versions.sort(key=lambda r: -r[1])
            self._bytes += len(key) + len(row[3]) + 32
            if row[1] > self._max_seq:
                self._max_seq = row[1]
            if self._min_seq is None or row[1] < self._min_seq:
                self._min_seq = row[1]

    def put_all(self, rows: Iterable[Row]) -> None:
        for row in rows:
            self.put(row)

    def get_versions(self, key: bytes) -> list[Row]:
        versions = self._rows.get(key)
        return list(versions) if versions else []

    def _sorted_keys(self) -> list[bytes]:
        keys = self._keys
        if keys is None:
            with self._lock:
                keys = self._keys
                if keys is None:
                    keys = sorted(self._rows)
                    self._keys = keys
        return keys

    def iter_range(
        self, start: bytes | None = None, end: bytes | None = None, *, end_inclusive: bool = False
    ) -> Iterator[Row]:
        """Rows in compacted order (key ascending, seq descending) within the range.

        The key set is a snapshot taken when iteration starts.
        """
        keys = self._sorted_keys()
        i = 0 if start is None else bisect_left(keys, start)
        rows = self._rows
        for j in range(i, len(keys)):
            k = keys[j]
            if end is not None and (k > end if end_inclusive else k >= end):
                return
            versions = rows.get(k)
            if versions:
                yield from list(versions)

    def rows(self) -> Iterator[Row]:
        return self.iter_range()
