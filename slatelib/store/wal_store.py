"""WAL SSTs of one database (format §8): ``<root>/wal/<20-digit id>.sst``.

A zero-byte WAL object is a writer's fence and replays as empty. WAL ids above
``replay_after_wal_id`` are contiguous; the last one is found by probing
``after + 1, 2, 4, 8, ...`` and then a binary search, never by listing (as 0.17 does).

The store may keep the WAL in a separate object store
(:mod:`slatelib.objstore.wal_routing`); :meth:`WalStore.check_tail` refuses a store that
holds none of the WAL tail a manifest promises (:mod:`slatelib.core.wal_tail`).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor

from slatelib.core.manifest import Manifest
from slatelib.core.row import Row
from slatelib.core.wal_tail import missing_tail_message, wal_tail
from slatelib.errors import ObjectMissingError, UnsupportedFeatureError, WalStoreMissingError
from slatelib.format.sst import parse_sst
from slatelib.objstore import ObjectStore, wal_store_of
from slatelib.paths import DbPaths, file_name, parse_wal_name

_MAX_EXP = 48


class WalStore:
    def __init__(self, store: ObjectStore, root: str) -> None:
        self.store = store
        self.paths = DbPaths.of(root)

    def path(self, wal_id: int) -> str:
        return self.paths.wal(wal_id)

    @property
    def where(self) -> str:
        """The WAL directory as a URL, for messages (in the WAL store when there is one)."""
        wal = wal_store_of(self.store)
        base = (self.store if wal is None else wal).url
        return base + self.paths.wal_dir if base.endswith("/") else f"{base}/{self.paths.wal_dir}"

    def holds_any(self, first: int, last: int) -> bool:
        """Whether any WAL object with an id in ``[first, last]`` exists (one listing)."""
        for meta in self.store.list(self.paths.wal_dir, start_after=self.path(first - 1),
                                    end_before=self.path(last + 1)):
            wid = parse_wal_name(file_name(meta.path))
            if wid is not None and first <= wid <= last:
                return True
        return False

    def check_tail(self, m: Manifest, *, manifest_id: int | None = None) -> None:
        """Refuse to read or write through ``m`` when this store holds none of the WAL SSTs
        ``m`` says exist after ``replay_after_wal_id`` (:mod:`slatelib.core.wal_tail`).

        Raises:
            WalStoreMissingError: naming the WAL ids, where they were looked for, and
                ``--wal-store``.
        """
        tail = wal_tail(m)
        if tail is None or self.holds_any(*tail):
            return
        wal = wal_store_of(self.store)
        raise WalStoreMissingError(
            missing_tail_message(self.paths.root, m, manifest_id=manifest_id, where=self.where,
                                 wal_store_url=None if wal is None else wal.url),
            first=tail[0], last=tail[1], where=self.where)

    def exists(self, wal_id: int) -> bool:
        try:
            self.store.head(self.path(wal_id))
        except ObjectMissingError:
            return False
        return True

    def try_read_rows(self, wal_id: int) -> list[Row] | None:
        """Rows of one WAL SST in commit order; ``[]`` for a fence; None when missing.

        Raises:
            CorruptObjectError / ChecksumMismatchError: naming the object and block.
        """
        path = self.path(wal_id)
        try:
            data = self.store.get(path)
        except ObjectMissingError:
            return None
        if not data:
            return []
        return parse_sst(data, path=path).rows()

    def read_rows(self, wal_id: int) -> list[Row]:
        rows = self.try_read_rows(wal_id)
        if rows is None:
            raise ObjectMissingError(f"WAL {wal_id} not found", path=self.path(wal_id))
        return rows

    def last_wal_id(self, after: int) -> int:
        """The highest contiguous WAL id above ``after`` (``after`` itself when none).

        Raises:
            UnsupportedFeatureError: more than 2**48 WALs (a corrupt layout).
        """
        lo = 0
        hi = None
        exp = 0
        while hi is None:
            if exp >= _MAX_EXP:
                raise UnsupportedFeatureError("WAL probe exceeded 2**48 ids")
            offset = 1 << exp
            if self.exists(after + offset):
                lo = offset
            else:
                hi = offset
            exp += 1
        if lo == 0:
            return after
        left, right = lo + 1, hi
        while left < right:
            mid = (left + right) // 2
            if self.exists(after + mid):
                left = mid + 1
            else:
                right = mid
        return after + left - 1

    def list_ids(self) -> list[int]:
        ids = []
        for meta in self.store.list(self.paths.wal_dir):
            wid = parse_wal_name(file_name(meta.path))
            if wid is not None:
                ids.append(wid)
        ids.sort()
        return ids

    def replay(
        self, after: int, last: int, *, executor: Executor | None = None, window: int = 8
    ) -> Iterator[tuple[int, list[Row]]]:
        """``(wal_id, rows)`` for ids ``after+1 .. last`` in order, fetching ahead.

        Raises:
            ObjectMissingError: a WAL in the range disappeared (a gap).
        """
        ids = list(range(after + 1, last + 1))
        if executor is None:
            for wid in ids:
                yield wid, self.read_rows(wid)
            return
        futures = {}
        nxt = 0
        for pos, wid in enumerate(ids):
            while nxt < len(ids) and nxt < pos + window:
                futures[ids[nxt]] = executor.submit(self.read_rows, ids[nxt])
                nxt += 1
            yield wid, futures.pop(wid).result()
