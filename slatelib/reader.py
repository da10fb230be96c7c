"""``DbReader``: point reads and streaming scans of a database.

Modes:

- latest (default here): reads the latest manifest and replays the WAL above its
  ``replay_after_wal_id``; writes nothing to the database.
- checkpoint: ``checkpoint=UUID`` reads the manifest that checkpoint pins and the WAL
  range that manifest references; never refreshed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from slatelib.config import Settings
from slatelib.core.manifest import Manifest
from slatelib.core.memtable import MemTable
from slatelib.core.merge import MergeOperator, as_merge_operator
from slatelib.errors import InvalidArgumentError, InvalidDbStateError, SlateError
from slatelib.ids import parse_uuid
from slatelib.objstore import ObjectStore, open_store
from slatelib.paths import normalize_path
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.store.read_view import ReadView
from slatelib.store.sst_reader import BlockCache
from slatelib.store.table_store import TableStore
from slatelib.store.wal_store import WalStore

log = logging.getLogger(__name__)


def resolve_store(store: ObjectStore | str) -> ObjectStore:
    """Accept an ObjectStore or a store URL.

    Raises:
        InvalidArgumentError: neither.
    """
    if isinstance(store, str):
        return open_store(store)
    if store is None:
        raise InvalidArgumentError("store is required (a URL or an object from open_store)")
    return store


def replay_wal(
    wal: WalStore, manifest: Manifest, *, last_wal_id: int | None,
    executor: ThreadPoolExecutor | None = None,
) -> tuple[MemTable, int]:
    """Replay WAL rows newer than ``last_l0_seq`` into a memtable (spec 8.3).

    ``last_wal_id`` None means probe for the newest WAL. Returns the table and the last
    WAL id replayed.
    """
    after = manifest.replay_after_wal_id
    last = wal.last_wal_id(after) if last_wal_id is None else last_wal_id
    table = MemTable()
    floor = manifest.last_l0_seq
    for _, rows in wal.replay(after, last, executor=executor):
        for row in rows:
            if row[1] > floor:
                table.put(row)
    return table, last


class DbReader:
    """Reads one database. Use :meth:`open`; close with :meth:`close` or ``with``."""

    def __init__(
        self,
        store: ObjectStore,
        path: str,
        *,
        settings: Settings,
        merge_operator: MergeOperator | None,
        checkpoint: uuid.UUID | None,
    ) -> None:
        self.store = store
        self.path = path
        self.settings = settings
        self.merge_operator = merge_operator
        self.checkpoint_id = checkpoint
        rs = settings.reader
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, rs.io_threads), thread_name_prefix="slatelib-read"
        )
        self._cache = BlockCache(rs.block_cache_bytes)
        self.manifests = ManifestStore(store, path)
        self.wal = WalStore(store, path)
        self.tables = TableStore(
            store, path, cache=self._cache, executor=self._executor, prefetch=rs.prefetch_blocks
        )
        self._view: ReadView | None = None
        self._manifest_id = 0
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str,
        store: ObjectStore | str,
        *,
        checkpoint: uuid.UUID | str | None = None,
        merge_operator: object = None,
        settings: Settings | None = None,
    ) -> DbReader:
        """Open a reader on the database at ``path`` inside ``store``.

        Raises:
            ManifestMissingError: no database at ``path``.
            InvalidDbStateError: the database is not initialized (a clone being created),
                or the checkpoint does not exist.
            DataError: the manifest does not decode (never falls back to an older one).
        """
        root = normalize_path(path, what="database path")
        ckpt = parse_uuid(checkpoint) if isinstance(checkpoint, str) else checkpoint
        reader = cls(
            resolve_store(store), root, settings=settings or Settings(),
            merge_operator=as_merge_operator(merge_operator), checkpoint=ckpt,
        )
        try:
            reader._load()
        except BaseException:
            reader.close()
            raise
        return reader

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        latest = self.manifests.read_latest()
        if self.checkpoint_id is None:
            self._install(latest, last_wal_id=None)
            return
        cp = latest.value.checkpoint(self.checkpoint_id)
        if cp is None:
            raise InvalidDbStateError(
                f"checkpoint {self.checkpoint_id} not found in manifest {latest.id} of {self.path}"
            )
        pinned = self.manifests.read(cp.manifest_id)
        self._install(pinned, last_wal_id=pinned.value.wal_id_last_seen)

    def _install(self, stored: StoredManifest, *, last_wal_id: int | None) -> None:
        m = stored.value
        if not m.initialized:
            raise InvalidDbStateError(
                f"database {self.path} is not initialized (manifest {stored.id}): "
                "a clone that is still being created"
            )
        last = last_wal_id
        if last is not None and last < m.replay_after_wal_id:
            last = m.replay_after_wal_id
        table, _ = replay_wal(self.wal, m, last_wal_id=last, executor=self._executor)
        self._view = ReadView(self.tables, m, [table], self.merge_operator)
        self._manifest_id = stored.id

    def refresh(self) -> bool:
        """Re-read the latest manifest and WAL (latest mode only). True when it changed."""
        self._check_open()
        if self.checkpoint_id is not None:
            return False
        latest = self.manifests.read_latest()
        self._install(latest, last_wal_id=None)
        return True

    # -------------------------------------------------------------------- reads
    @property
    def manifest(self) -> Manifest:
        return self._current().manifest

    @property
    def manifest_id(self) -> int:
        return self._manifest_id

    def _current(self) -> ReadView:
        self._check_open()
        assert self._view is not None
        return self._view

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidDbStateError("reader is closed")

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or None when absent or deleted.

        Raises:
            InvalidArgumentError: an empty key.
            MergeOperatorMissingError: merge operands without a configured operator.
        """
        if not key:
            raise InvalidArgumentError("keys must not be empty")
        return self._current().get(bytes(key))

    def scan(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Stream ``(key, value)`` for ``start <= key < end`` in key order."""
        if start is not None and end is not None and start > end:
            raise InvalidArgumentError(f"scan start {start!r} is after end {end!r}")
        return self._current().scan(start, end)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> DbReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["DbReader", "SlateError", "resolve_store", "replay_wal"]
