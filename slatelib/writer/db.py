"""``Db``: the slatelib writer of a SlateDB 0.17 database.

Every write call returns only once the WAL SST holding it is durable (and every WAL SST
before it): writes from many threads share WAL SSTs (:mod:`slatelib.writer.wal_writer`),
acknowledged rows go to the memtable, full memtables are flushed to L0 by a background
thread (:mod:`slatelib.writer.flusher`), and reads see the writer's own writes. Opening
fences every older writer (:mod:`slatelib.writer.fencing`); once this writer is fenced,
every call raises :class:`~slatelib.errors.FencedError`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from types import TracebackType
from typing import Literal

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import Settings
from slatelib.core.manifest import Manifest
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.errors import InvalidArgumentError, MergeOperatorMissingError, SlateError
from slatelib.objstore import ObjectStore, resolve_store, with_wal_store
from slatelib.paths import normalize_path
from slatelib.writer.batch import (
    Ttl,
    WriteBatch,
    batch_rows,
    check_key,
    check_ttl,
    check_value,
    expire_ts,
)
from slatelib.writer.engine import WriterEngine, check_writer_settings

log = logging.getLogger(__name__)

FlushKind = Literal["wal", "memtable"]


class Db(WriterEngine):
    """A writer. Use :meth:`open`; close with :meth:`close` or ``with``."""

    # ------------------------------------------------------------------ open
    @classmethod
    def open(
        cls,
        path: str,
        store: ObjectStore | str,
        settings: Settings | None = None,
        *,
        merge_operator: object = None,
        clock: Clock | None = None,
        wal_store: ObjectStore | str | None = None,
    ) -> Db:
        """Open (creating when absent) the database at ``path`` for writing.

        ``wal_store``: the object store (or its URL) that keeps the database's WAL, as 0.17's
        ``with_wal_object_store`` (``""``: none; None: ``store``'s own, else
        ``settings.object_store.wal_store``): WAL SSTs and fences are written there.

        Raises:
            WalStoreMissingError: the manifest says WAL SSTs exist after
                ``replay_after_wal_id`` and the WAL store read holds none of them (its WAL
                store was not given, or the wrong one): refused before any write, so that
                ``replay_after_wal_id`` never moves over writes this writer cannot read.
            FencedError: a newer writer claimed the database while this one opened.
            InvalidDbStateError: the database is a clone being created, or was destroyed.
            NotADatabaseRootError: ``path`` is a file, or lies below one (nothing written).
            UnsupportedFeatureError: the database uses segments, or is a V1 database whose
                manifest names a WAL store and no WAL store was given.
            InvalidArgumentError: bad path or settings.
            MergeOperatorMissingError: the WAL holds merge operands and none is configured.
        """
        settings = settings or Settings()
        check_writer_settings(settings)
        routed = with_wal_store(resolve_store(store), wal_store,
                                default=settings.object_store.wal_store)
        db = cls(routed, normalize_path(path, what="database path"), settings,
                 merge_operator, clock or SYSTEM_CLOCK)
        try:
            db._start()
        except BaseException:
            db._executor.shutdown(wait=False, cancel_futures=True)
            raise
        return db

    def _single(self, key: bytes, kind: int, value: bytes, ttl: Ttl, at: int | None) -> int:
        default_ttl = self.settings.writer.default_ttl_millis

        def build(seq: int, now: int) -> list[Row]:
            expire = None if kind == TOMBSTONE else expire_ts(ttl, at, now, default_ttl)
            if kind == MERGE:
                batch = WriteBatch().merge(key, value, ttl, expire_at_ms=at)
                return batch_rows(batch, seq, now, default_ttl_ms=default_ttl,
                                  merge_operator=self._merge_operator)
            return [(key, seq, kind, value, expire, now)]

        return self._commit(build, len(key) + len(value))

    def put(self, key: bytes, value: bytes, ttl: Ttl = None, *, expire_at_ms: int | None = None) -> int:
        """Set ``key`` to ``value``; returns once durable, with the write's sequence number.

        ``ttl``: milliseconds until expiry (None: ``default_ttl_millis``; ``NO_EXPIRY``).

        Raises:
            InvalidArgumentError: empty or oversized key or value, bad TTL.
            FencedError: a newer writer owns the database.
            CommitStateUnknownError: the write may or may not be durable.
            InvalidDbStateError: the writer is closed or stopped after an error.
        """
        k, v = check_key(key), check_value(value, "value")
        check_ttl(ttl, expire_at_ms)
        return self._single(k, VALUE, v, ttl, expire_at_ms)

    def delete(self, key: bytes) -> int:
        """Delete ``key``; returns once durable, with the write's sequence number.

        Raises:
            InvalidArgumentError: an empty or oversized key.
            FencedError / CommitStateUnknownError / InvalidDbStateError: as :meth:`put`.
        """
        return self._single(check_key(key), TOMBSTONE, b"", None, None)

    def merge(self, key: bytes, operand: bytes, ttl: Ttl = None, *, expire_at_ms: int | None = None) -> int:
        """Add a merge operand to ``key``; returns once durable, with its sequence number.

        Raises:
            MergeOperatorMissingError: the writer has no merge operator.
            InvalidArgumentError: an empty or oversized key or operand, a bad TTL.
            FencedError / CommitStateUnknownError / InvalidDbStateError: as :meth:`put`.
        """
        k, v = check_key(key), check_value(operand, "merge operand")
        check_ttl(ttl, expire_at_ms)
        if self._merge_operator is None:
            raise MergeOperatorMissingError(k)
        return self._single(k, MERGE, v, ttl, expire_at_ms)

    def write(self, batch: WriteBatch) -> int:
        """Apply ``batch`` atomically under one sequence number; returns once durable.

        Raises:
            InvalidArgumentError: an empty batch or incompatible merge TTLs.
            MergeOperatorMissingError: the batch merges and no operator is configured.
            FencedError / CommitStateUnknownError / InvalidDbStateError: as :meth:`put`.
        """
        if not isinstance(batch, WriteBatch):
            raise InvalidArgumentError(f"write() takes a WriteBatch, got {type(batch).__name__}")
        default_ttl = self.settings.writer.default_ttl_millis

        def build(seq: int, now: int) -> list[Row]:
            return batch_rows(batch, seq, now, default_ttl_ms=default_ttl,
                              merge_operator=self._merge_operator)

        return self._commit(build, batch.size_bytes)

    # ----------------------------------------------------------------- reads
    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` as this writer sees it (its own writes included).

        Raises:
            FencedError / InvalidDbStateError: fenced, stopped or closed.
            MergeOperatorMissingError: merge operands and no operator.
            UnavailableError: the writer checkpoint that protects the SSTs it reads from GC
                could not be refreshed in time (see ``writer.checkpoint_lifetime``).
        """
        self._check_usable()
        k = check_key(key)
        self._check_readable()
        return self._state.view().get(k)

    def scan(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` for ``start <= key < end`` in key order (streamed).

        Raises:
            InvalidArgumentError: ``start`` after ``end``.
            FencedError / InvalidDbStateError: fenced, stopped or closed.
            UnavailableError: as :meth:`get`.
        """
        self._check_usable()
        if start is not None and end is not None and start > end:
            raise InvalidArgumentError(f"scan start {start!r} is after end {end!r}")
        self._check_readable()
        return self._state.view().scan(start, end)

    @property
    def manifest(self) -> Manifest:
        """The manifest version this writer reads from (its latest known)."""
        return self._state.stored.value

    @property
    def manifest_id(self) -> int:
        return self._state.stored.id

    # --------------------------------------------------------------- control
    def flush(self, kind: FlushKind = "memtable") -> None:
        """``"memtable"``: write the memtable to L0 and commit the manifest (waits);
        ``"wal"``: wait until everything written so far is durable in the WAL.

        Raises:
            InvalidArgumentError: unknown ``kind``.
            FencedError / InvalidDbStateError: fenced, stopped or closed.
        """
        if kind not in ("wal", "memtable"):
            raise InvalidArgumentError(f"flush kind must be 'wal' or 'memtable', got {kind!r}")
        self._check_usable()
        self._wal.wait_durable()
        if kind == "wal":
            return
        with self._lock:
            self._freeze_locked()
            imms = self._state.imms
        if not imms:
            return
        target = imms[0].last_seq
        self._flusher.notify()
        with self._progress:
            while (self._state.stored.value.last_l0_seq < target and self._failure is None
                   and not self._closed):
                self._progress.wait(0.5)
        self._check_usable()

    def refresh(self) -> None:
        """Poll the manifest now (normally done every ``manifest_poll_interval``): adopt a
        compactor's commit, re-establish the writer checkpoint when needed.

        Raises:
            FencedError: a newer writer owns the database.
            UnavailableError / ConflictError / CommitStateUnknownError: this poll failed
                (the writer keeps running; the next poll retries).
        """
        self._check_usable()
        self._flusher.request_poll().result()
        self._check_usable()

    def close(self, flush: FlushKind | None = "memtable") -> None:
        """Flush (``"memtable"`` by default, as 0.17), stop the background threads and
        remove this writer's checkpoint. A fenced or failed writer flushes nothing.

        Raises:
            SlateError: the final flush failed (the writer is stopped anyway).
        """
        if self._closed:
            return
        error: SlateError | None = None
        if self._failure is None and flush is not None:
            try:
                self.flush(flush)
            except SlateError as exc:
                error = exc
        with self._write_lock:
            self._closed = True
        if self._failure is None:
            self._wal.close()
        else:
            self._wal.abort(self._failure)
        self._flusher.stop()
        self._release_checkpoint()
        self._executor.shutdown(wait=False, cancel_futures=True)
        with self._progress:
            self._progress.notify_all()
        if error is not None:
            raise error

    def __enter__(self) -> Db:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(flush="memtable" if exc is None else None)
