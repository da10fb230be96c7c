"""``DbReader``: point reads and streaming scans of a database, in three modes.

- ``mode="managed"`` (default; design doc 'checkpoints and clones' and 0.17's managed checkpoint):
  the reader establishes its own checkpoint against the version it writes (``V + 1``, expiring after
  ``checkpoint_lifetime``, ``wal_id_last_seen`` raised to the last WAL found), reads the
  manifest that checkpoint pins and replays the WAL into memtables of at most
  ``max_memtable_bytes``. It polls the manifest every ``manifest_poll_interval`` (or on
  :meth:`DbReader.refresh`): when L0 or the sorted runs changed it re-establishes the
  checkpoint (replacing the old one in the same manifest write), drops replayed rows the new
  ``last_l0_seq`` covers and replays from there; otherwise it replays new WAL SSTs and
  refreshes the checkpoint's expiry once half the lifetime has passed. Closing deletes the
  checkpoint.
- ``mode="latest"``: read-only. Reads the latest manifest and the WAL and writes nothing to
  the database (no checkpoint: GC may delete what it reads after ``min_age``).
  :meth:`DbReader.refresh` moves it to the latest state.
- ``checkpoint=UUID``: reads the manifest that checkpoint pins and the WAL range that
  manifest references; never refreshes and writes nothing.

``skip_wal_replay=True`` (0.17's ``ReaderOptions.skip_wal_replay``), in any mode: no WAL
is replayed, so the reader sees what L0 and the sorted runs hold, as an official
``DbReader`` configured so does.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import Settings
from slatelib.core.checkpoints import (
    plan_reader_checkpoint,
    refresh_checkpoint,
    refresh_due,
    tree_changed,
)
from slatelib.core.manifest import Checkpoint, Manifest
from slatelib.core.memtable import MemTable
from slatelib.core.merge import MergeOperator, as_merge_operator
from slatelib.core.rescale_check import RangeStats
from slatelib.db_manifest import DbManifest
from slatelib.errors import InvalidArgumentError, InvalidDbStateError, SlateError
from slatelib.format.native_pipe import ARROW_BATCH_BYTES, ARROW_BATCH_ROWS, ArrowBuffers
from slatelib.ids import parse_uuid
from slatelib.objstore import (  # resolve_store: re-exported
    ObjectStore,
    resolve_store,
    with_wal_store,
)
from slatelib.paths import normalize_path
from slatelib.store.manifest_store import StoredManifest
from slatelib.store.memtables import WalMemTable, purge_tables, replay_tail
from slatelib.store.read_view import ReadView
from slatelib.store.sst_reader import BlockCache
from slatelib.store.table_store import TableStore
from slatelib.store.wal_store import WalStore

log = logging.getLogger(__name__)

READER_MODES = ("managed", "latest")


def replay_wal(
    wal: WalStore, manifest: Manifest, *, last_wal_id: int | None,
    executor: ThreadPoolExecutor | None = None,
) -> tuple[MemTable, int]:
    """Replay WAL rows newer than ``last_l0_seq`` into one memtable; returns it and the last
    WAL id replayed.

    Raises:
        WalStoreMissingError: ``wal`` holds none of the manifest's WAL tail.
    """
    wal.check_tail(manifest)
    tables, last, _ = replay_tail(wal, manifest, [], last_wal_id=last_wal_id,
                                  max_memtable_bytes=1 << 62, executor=executor)
    return (tables[0].table if tables else MemTable()), last


class DbReader:
    """Reads one database. Use :meth:`open`; close with :meth:`close` or ``with``."""

    def __init__(
        self, store: ObjectStore, path: str, *, settings: Settings,
        merge_operator: MergeOperator | None, checkpoint: uuid.UUID | None, mode: str,
        clock: Clock, skip_wal_replay: bool = False,
    ) -> None:
        self.store = store
        self.path = path
        self.settings = settings
        self.merge_operator = merge_operator
        self.mode = "checkpoint" if checkpoint is not None else mode
        self.skip_wal_replay = skip_wal_replay
        self._fixed_checkpoint = checkpoint
        self._clock = clock
        rs = settings.reader
        self._executor = ThreadPoolExecutor(max(1, rs.io_threads), thread_name_prefix="slatelib-read")
        self.manifests = DbManifest(store, path)
        self.wal = WalStore(store, path)
        self.tables = TableStore(store, path, cache=BlockCache(rs.block_cache_bytes),
                                 executor=self._executor, prefetch=rs.prefetch_blocks)
        self._lock = threading.RLock()
        self._view: ReadView | None = None
        self._stored: StoredManifest | None = None
        self._wal_tables: list[WalMemTable] = []
        self._wal_mark = 0
        self._seq_mark = 0
        self._checkpoint: Checkpoint | None = None
        self._closed = False
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    @classmethod
    def open(
        cls,
        path: str,
        store: ObjectStore | str,
        *,
        checkpoint: uuid.UUID | str | None = None,
        mode: str = "managed",
        merge_operator: object = None,
        settings: Settings | None = None,
        clock: Clock | None = None,
        auto_refresh: bool = True,
        wal_store: ObjectStore | str | None = None,
        skip_wal_replay: bool = False,
    ) -> DbReader:
        """Open a reader on the database at ``path`` inside ``store`` (modes: see the module).

        ``auto_refresh`` (managed mode) polls the manifest in a background thread.
        ``wal_store``: the object store (or its URL) that keeps the database's WAL, as
        0.17's ``with_wal_object_store`` (``""``: none; None: ``store``'s own, else
        ``settings.object_store.wal_store``; :mod:`slatelib.objstore.wal_routing`).
        ``skip_wal_replay``: read L0 and the sorted runs only (see the module).

        Raises:
            ManifestMissingError: no database at ``path``.
            WalStoreMissingError: the manifest says WAL SSTs exist after
                ``replay_after_wal_id`` and the store holds none of them (a separate WAL
                store that was not given); nothing was written.
            InvalidDbStateError: the database is not initialized (a clone being created) or,
                in managed mode, destroyed; or the checkpoint does not exist.
            InvalidArgumentError: unknown mode, or a checkpoint lifetime shorter than 1 s or
                than twice the poll interval (managed mode).
            DataError: the manifest does not decode (never falls back to an older one).
        """
        if mode not in READER_MODES:
            raise InvalidArgumentError(f"unknown reader mode {mode!r}; expected one of {READER_MODES}")
        root = normalize_path(path, what="database path")
        ckpt = parse_uuid(checkpoint) if isinstance(checkpoint, str) else checkpoint
        settings = settings or Settings()
        if ckpt is None and mode == "managed":
            rs = settings.reader
            if rs.checkpoint_lifetime < 1 or rs.checkpoint_lifetime < 2 * rs.manifest_poll_interval:
                raise InvalidArgumentError(
                    f"reader.checkpoint_lifetime ({rs.checkpoint_lifetime}s) must be at least 1s "
                    f"and twice reader.manifest_poll_interval ({rs.manifest_poll_interval}s)"
                )
        routed = with_wal_store(resolve_store(store), wal_store,
                                default=settings.object_store.wal_store)
        reader = cls(routed, root, settings=settings,
                     merge_operator=as_merge_operator(merge_operator), checkpoint=ckpt, mode=mode,
                     clock=clock or SYSTEM_CLOCK, skip_wal_replay=skip_wal_replay)
        try:
            reader._load()
        except BaseException:
            reader._executor.shutdown(wait=False, cancel_futures=True)
            raise
        if reader.mode == "managed" and auto_refresh:
            reader._start_poller()
        return reader

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        latest = self.manifests.read_latest()
        if self.mode == "checkpoint":
            cp = latest.value.checkpoint(self._fixed_checkpoint)  # type: ignore[arg-type]
            if cp is None:
                raise InvalidDbStateError(
                    f"checkpoint {self._fixed_checkpoint} not found in manifest {latest.id} of {self.path}"
                )
            pinned = self.manifests.read(cp.manifest_id)
            self._check_initialized(pinned)
            self._install(pinned, last_wal_id=pinned.value.wal_id_last_seen)
            self._checkpoint = cp
        elif self.mode == "managed":
            self._establish(latest, old=None)
        else:
            self._check_initialized(latest)
            self._install(latest, last_wal_id=None)

    def _check_initialized(self, stored: StoredManifest) -> None:
        if not stored.value.initialized:
            raise InvalidDbStateError(
                f"database {self.path} is not initialized (manifest {stored.id}): "
                "a clone that is still being created"
            )

    def _install(self, stored: StoredManifest, *, last_wal_id: int | None) -> None:
        """Read from ``stored``: drop replayed rows its ``last_l0_seq`` covers, replay the
        WAL after what was already replayed, and swap the read view."""
        m = stored.value
        tables: list[WalMemTable] = []
        if self.skip_wal_replay:
            mark, seq_mark = self._wal_mark, self._seq_mark
        else:
            if self._wal_mark <= m.replay_after_wal_id:  # none of its WAL tail read yet
                self.wal.check_tail(m, manifest_id=stored.id)
            kept = purge_tables(self._wal_tables, m.last_l0_seq)
            tables, mark, seq_mark = replay_tail(
                self.wal, m, kept, after_wal_id=self._wal_mark, applied_seq=self._seq_mark,
                last_wal_id=last_wal_id,
                max_memtable_bytes=self.settings.reader.max_memtable_bytes,
                executor=self._executor,
            )
        view = ReadView(self.tables, m, [t.table for t in tables], self.merge_operator)
        with self._lock:
            self._stored, self._wal_tables, self._view = stored, tables, view
            self._wal_mark, self._seq_mark = mark, seq_mark

    def _establish(self, latest: StoredManifest, old: Checkpoint | None) -> None:
        """(Re-)establish our checkpoint on the next version and read what it pins."""
        self._check_initialized(latest)
        if self._wal_mark <= latest.value.replay_after_wal_id:
            self.wal.check_tail(latest.value, manifest_id=latest.id)  # before our first write
        rs = self.settings.reader
        checkpoint_id = uuid.uuid4()
        last_wal = self.wal.last_wal_id(latest.value.replay_after_wal_id)
        stored = self.manifests.update(lambda cur: plan_reader_checkpoint(
            cur.value, cur.id + 1, checkpoint_id, lifetime_s=rs.checkpoint_lifetime,
            now_s=self._clock.now_ms() / 1000, last_wal_id=last_wal,
            old_id=None if old is None else old.id,
        ), clock=self._clock, current=latest)
        cp = stored.value.checkpoint(checkpoint_id)
        assert cp is not None
        # Ours from now on (the old one is gone), even if reading what it pins fails below:
        # the next poll then replaces it instead of leaving it behind until it expires.
        self._checkpoint = cp
        pinned = stored if stored.id == cp.manifest_id else self.manifests.read(cp.manifest_id)
        self._install(pinned, last_wal_id=None)
        log.info("reader checkpoint established [path=%s, checkpoint=%s, manifest_id=%d]",
                 self.path, cp.id, cp.manifest_id)

    # ------------------------------------------------------------------ refresh
    def refresh(self) -> bool:
        """Poll once: follow the latest state (managed: re-establish or refresh the
        checkpoint as needed; latest: move to the latest manifest). True when the read
        state changed. A fixed-checkpoint reader never changes.

        Raises:
            InvalidDbStateError: the reader is closed.
            SlateError: reading the manifest or the WAL failed.
        """
        with self._lock:
            self._check_open()
            if self.mode == "checkpoint":
                return False
            before = (self._current_stored().id, self._wal_mark, self._seq_mark)
            latest = self.manifests.read_latest()
            if self.mode == "latest":
                self._check_initialized(latest)
                self._install(latest, last_wal_id=None)
            else:
                self._refresh_managed(latest)
            return before != (self._current_stored().id, self._wal_mark, self._seq_mark)

    def _refresh_managed(self, latest: StoredManifest) -> None:
        cp = self._checkpoint
        assert cp is not None
        mine = latest.value.checkpoint(cp.id)
        if mine is None or tree_changed(self._current_stored().value, latest.value):
            if latest.value.destroyed_at_s is not None:
                log.warning("database destroyed; the reader keeps its current state [path=%s]",
                            self.path)
                return
            self._establish(latest, old=cp)
            return
        self._install(self._current_stored(), last_wal_id=None)
        rs = self.settings.reader
        now_s = self._clock.now_ms() / 1000
        if refresh_due(mine, rs.checkpoint_lifetime, now_s):
            stored = self.manifests.update(lambda cur: _refresh_or_none(
                cur.value, cp.id, rs.checkpoint_lifetime, now_s, mine.expire_time_s),
                clock=self._clock, current=latest)
            self._checkpoint = stored.value.checkpoint(cp.id) or self._checkpoint

    def _start_poller(self) -> None:
        interval = self.settings.reader.manifest_poll_interval
        self._poller = threading.Thread(target=self._poll_loop, args=(interval,),
                                        name="slatelib-reader-poll", daemon=True)
        self._poller.start()

    def _poll_loop(self, interval: float) -> None:
        """The poller thread: :meth:`refresh` every ``interval`` until closed. A failed poll
        is logged and retried at the next interval (the checkpoint outlives a few failures:
        its lifetime is at least twice the interval); it never ends the thread."""
        while not self._stop.wait(interval):
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - a dead poller lets the checkpoint expire
                if self._closed:
                    return
                log.warning("reader poll failed [path=%s, error=%s: %s]", self.path,
                            type(exc).__name__, exc)

    # -------------------------------------------------------------------- reads
    def _current_stored(self) -> StoredManifest:
        assert self._stored is not None
        return self._stored

    @property
    def manifest(self) -> Manifest:
        return self._current().manifest

    @property
    def manifest_id(self) -> int:
        self._check_open()
        return self._current_stored().id

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The checkpoint this reader reads through (its own in managed mode)."""
        return self._checkpoint

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

    def scan(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Stream ``(key, value)`` for ``start <= key < end`` in key order.

        Raises:
            InvalidArgumentError: ``start`` after ``end``.
        """
        if start is not None and end is not None and start > end:
            raise InvalidArgumentError(f"scan start {start!r} is after end {end!r}")
        return self._current().scan(start, end)

    def scan_stats(self, start: bytes | None = None, end: bytes | None = None) -> RangeStats:
        """The :class:`~slatelib.core.rescale_check.RangeStats` of :meth:`scan` over
        ``[start, end)``: live keys, their key + value bytes and digest, equal to
        ``RangeStats.of(reader.scan(start, end))`` (computed natively when the extension is
        built, without building the pairs).

        Raises:
            InvalidArgumentError: ``start`` after ``end``.
            MergeOperatorMissingError: merge operands without a configured operator.
        """
        if start is not None and end is not None and start > end:
            raise InvalidArgumentError(f"scan start {start!r} is after end {end!r}")
        return self._current().scan_stats(start, end)

    def scan_buffers(self, start: bytes | None = None, end: bytes | None = None, *,
                     max_rows: int = ARROW_BATCH_ROWS, max_bytes: int = ARROW_BATCH_BYTES,
                     ) -> Iterator[ArrowBuffers]:
        """What :meth:`scan` returns for ``[start, end)`` as batches of Arrow buffers (key
        and value offsets and data; :meth:`ReadView.scan_buffers`): copied natively, with no
        Python object per row, when the extension is built.

        Raises:
            InvalidArgumentError: ``start`` after ``end``; ``max_rows`` or ``max_bytes``
                below 1.
            MergeOperatorMissingError: merge operands without a configured operator.
        """
        if start is not None and end is not None and start > end:
            raise InvalidArgumentError(f"scan start {start!r} is after end {end!r}")
        return self._current().scan_buffers(start, end, max_rows=max_rows, max_bytes=max_bytes)

    def close(self) -> None:
        """Stop polling and, in managed mode, delete the reader's checkpoint."""
        self._stop.set()
        if self._poller is not None and self._poller is not threading.current_thread():
            self._poller.join()
        with self._lock:  # waits for a refresh in another thread (it may move the checkpoint)
            if self._closed:
                return
            self._closed = True
            cp = self._checkpoint if self.mode == "managed" else None
        if cp is not None:
            try:
                self.manifests.delete_checkpoints({cp.id}, clock=self._clock)
            except SlateError as exc:
                log.warning("could not delete the reader checkpoint [path=%s, checkpoint=%s, "
                            "error=%s]", self.path, cp.id, exc)
        self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> DbReader:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _refresh_or_none(m: Manifest, checkpoint_id: uuid.UUID, lifetime_s: float, now_s: float,
                     seen_expiry: int | None) -> Manifest | None:
    cp = m.checkpoint(checkpoint_id)
    if cp is None or cp.expire_time_s != seen_expiry:
        return None  # gone (re-established at the next poll) or refreshed already
    return refresh_checkpoint(m, checkpoint_id, now_s=now_s, lifetime_s=lifetime_s)


__all__ = ["READER_MODES", "DbReader", "SlateError", "replay_wal", "resolve_store"]
