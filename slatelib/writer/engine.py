"""The writer's engine: state, group commit, memtables and the flusher host (no public API)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from slatelib.clock import Clock
from slatelib.config import Settings
from slatelib.core.merge import as_merge_operator
from slatelib.core.row import Row
from slatelib.db_manifest import DbManifest
from slatelib.errors import (
    AlreadyExistsError,
    FencedError,
    InvalidArgumentError,
    InvalidDbStateError,
    SlateError,
    UnavailableError,
)
from slatelib.format.sst import SstWriter, SstWriterOptions
from slatelib.objstore import ObjectStore
from slatelib.store.manifest_store import StoredManifest
from slatelib.store.memtables import WalMemTable
from slatelib.store.sst_options import sst_writer_options
from slatelib.store.sst_reader import BlockCache
from slatelib.store.table_store import TableStore
from slatelib.store.wal_store import WalStore
from slatelib.writer.fencing import WAL_FENCE_WINDOW, open_for_write
from slatelib.writer.flusher import Flusher
from slatelib.writer.manifest_rules import plan_close
from slatelib.writer.replay import replay_into_memtables
from slatelib.writer.state import DbState
from slatelib.writer.uploads import put_new_object
from slatelib.writer.wal_writer import WalJob, WalPipeline, stopped_error

log = logging.getLogger(__name__)

_ROW_OVERHEAD = 32
MIN_CHECKPOINT_LIFETIME_S = 10.0


def check_writer_settings(settings: Settings) -> None:
    """Validate the writer section of ``settings``.

    Raises:
        InvalidArgumentError: a writer setting out of range.
    """
    w = settings.writer
    if not 1 <= w.wal_max_in_flight <= WAL_FENCE_WINDOW:
        raise InvalidArgumentError(
            f"writer.wal_max_in_flight must be between 1 and {WAL_FENCE_WINDOW}, "
            f"got {w.wal_max_in_flight}"
        )
    if w.l0_max_ssts < 1 or w.l0_sst_size_bytes < 1 or w.max_unflushed_bytes < 1:
        raise InvalidArgumentError("writer.l0_max_ssts, l0_sst_size_bytes and "
                                   "max_unflushed_bytes must be positive")
    if w.manifest_poll_interval <= 0:
        raise InvalidArgumentError("writer.manifest_poll_interval must be positive")
    if (w.checkpoint_lifetime < MIN_CHECKPOINT_LIFETIME_S
            or w.checkpoint_lifetime < 4 * w.manifest_poll_interval):
        raise InvalidArgumentError(
            f"writer.checkpoint_lifetime ({w.checkpoint_lifetime:g}s) must be at least "
            f"{MIN_CHECKPOINT_LIFETIME_S:g}s and 4 x writer.manifest_poll_interval "
            f"({w.manifest_poll_interval:g}s): the writer refreshes it after half the lifetime "
            "and stops reading through it a quarter before it expires"
        )
    if w.default_ttl_millis is not None and w.default_ttl_millis < 0:
        raise InvalidArgumentError("writer.default_ttl_millis must not be negative")


class WriterEngine:
    """Internals of :class:`slatelib.writer.Db`: everything but the public API."""

    def __init__(self, store: ObjectStore, root: str, settings: Settings, merge_operator: object,
                 clock: Clock) -> None:
        self._store = store
        self.path = root
        self.settings = settings
        self._merge_operator = as_merge_operator(merge_operator)
        self._clock = clock
        self._manifests = DbManifest(store, root)
        self._wal_store = WalStore(store, root)
        rs = settings.reader
        self._executor = ThreadPoolExecutor(max(1, rs.io_threads), thread_name_prefix="slatelib-db")
        self._tables = TableStore(store, root, cache=BlockCache(rs.block_cache_bytes),
                                  executor=self._executor, prefetch=rs.prefetch_blocks)
        self._wal_opts = SstWriterOptions.wal(sst_writer_options(settings).codec)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._progress = threading.Condition()
        self._failure: BaseException | None = None
        self._closed = False
        self.epoch = 0
        self._next_seq = 1
        self._last_tick = 0
        self._state: DbState
        self._wal: WalPipeline
        self._flusher: Flusher

    def _start(self) -> None:
        w = self.settings.writer
        claim = open_for_write(self._store, self._manifests, self._wal_store, self._clock,
                               checkpoint_lifetime_s=w.checkpoint_lifetime)
        self.epoch = claim.epoch
        replayed = replay_into_memtables(
            self._wal_store, self._manifests, claim.manifest.value, claim.last_fence_wal_id,
            epoch=claim.epoch, max_memtable_bytes=w.l0_sst_size_bytes,
            merge_operator=self._merge_operator, executor=self._executor,
        )
        self._next_seq = replayed.last_seq + 1
        self._last_tick = replayed.last_tick
        tables = replayed.memtables
        self._state = DbState(claim.manifest, tables[-1], tuple(reversed(tables[:-1])),
                              self._tables, self._merge_operator)
        self._wal = WalPipeline(
            write=self._write_wal, first_wal_id=claim.last_fence_wal_id + 1,
            max_in_flight=w.wal_max_in_flight, flush_interval_s=w.flush_interval,
            batch_max_bytes=w.wal_batch_max_bytes, clock=self._clock,
            on_durable=self._on_durable, on_fatal=self.on_fatal,
        )
        self._flusher = Flusher(
            self, store=self._store, manifests=self._manifests, epoch=claim.epoch,
            checkpoint_id=claim.checkpoint_id, checkpoint_lifetime_s=w.checkpoint_lifetime,
            sst_options=sst_writer_options(self.settings),
            merge_operator=self._merge_operator, l0_max_ssts=w.l0_max_ssts,
            poll_interval_s=w.manifest_poll_interval, clock=self._clock,
        )
        self._flusher.notify()

    def _write_wal(self, wal_id: int, rows: list[Row]) -> None:
        writer = SstWriter(self._wal_opts)
        writer.add_rows(rows)
        path = self._wal_store.path(wal_id)
        try:
            put_new_object(self._store, path, writer.finish().to_bytes(), clock=self._clock)
        except AlreadyExistsError as exc:
            raise FencedError(
                f"WAL id {wal_id} is taken ({path}): a newer writer fenced this one"
            ) from exc

    # --------------------------------------------------------- flusher host
    def current_manifest(self) -> StoredManifest:
        return self._state.stored

    def oldest_imm(self) -> WalMemTable | None:
        imms = self._state.imms
        return imms[-1] if imms else None

    def last_acked_wal_id(self) -> int:
        return self._wal.last_acked_wal_id

    def on_flushed(self, imm: WalMemTable, stored: StoredManifest) -> None:
        with self._lock:
            s = self._state
            self._state = s.replace(stored=stored, imms=tuple(i for i in s.imms if i is not imm))
        with self._progress:
            self._progress.notify_all()

    def on_manifest(self, stored: StoredManifest) -> None:
        with self._lock:
            self._state = self._state.replace(stored=stored)

    def on_fatal(self, exc: BaseException) -> None:
        with self._progress:
            if self._failure is None:
                self._failure = exc
            self._progress.notify_all()
        self._wal.stop(exc)

    # ---------------------------------------------------------------- writes
    def _on_durable(self, job: WalJob) -> None:
        with self._lock:
            active = self._state.active
            active.add_rows(job.rows, job.wal_id)
            active.record_batches(job.batches)
            if active.size_bytes >= self.settings.writer.l0_sst_size_bytes:
                self._freeze_locked()

    def _freeze_locked(self) -> bool:
        s = self._state
        if s.active.is_empty():
            return False
        self._state = s.replace(active=WalMemTable(s.active.last_wal_id),
                                imms=(s.active, *s.imms))
        self._flusher.notify()
        return True

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise stopped_error(self._failure)
        if self._closed:
            raise InvalidDbStateError(f"the writer of {self.path!r} is closed")

    def _check_readable(self) -> None:
        """Reads go through the manifest the writer checkpoint pins. Once that checkpoint is
        close to its expiry (its refreshes kept failing) or gone, GC may delete what those
        reads need: re-establish it now (one manifest poll), or refuse the read.

        Raises:
            UnavailableError: the checkpoint could not be re-established.
            FencedError / InvalidDbStateError: fenced, stopped or closed meanwhile.
        """
        if self._clock.now_ms() / 1000 < self._flusher.read_deadline_s:
            return
        error: SlateError | None = None
        try:
            self._flusher.request_poll().result()
        except SlateError as exc:
            error = exc
        self._check_usable()
        if self._clock.now_ms() / 1000 < self._flusher.read_deadline_s:
            return
        cp = self._flusher.checkpoint
        what = ("was removed, or replaced by a manifest write whose outcome is unknown,"
                if cp is None else
                f"{cp.id} (manifest {cp.manifest_id}) expires at {cp.expire_time_s}")
        raise UnavailableError(
            f"reads of {self.path!r} refused: the writer checkpoint that keeps GC away from the "
            f"SSTs they read {what} and could not be re-established "
            f"({type(error).__name__ if error else 'no error'}: {error}); writes continue and "
            "reads resume once the manifest can be updated"
        )

    def _unflushed_bytes(self) -> int:
        s = self._state
        return self._wal.unflushed_bytes + s.active.size_bytes + sum(i.size_bytes for i in s.imms)

    def _wait_for_space(self) -> None:
        limit = self.settings.writer.max_unflushed_bytes
        if self._unflushed_bytes() < limit:
            return
        with self._progress:
            while self._unflushed_bytes() >= limit and self._failure is None and not self._closed:
                with self._lock:
                    if not self._state.imms:
                        self._freeze_locked()
                self._flusher.notify()
                self._progress.wait(0.5)
        self._check_usable()

    def _tick(self) -> int:
        now = self._clock.now_ms()
        if now < self._last_tick:  # wall clock went back: keep create times monotonic
            now = self._last_tick
        self._last_tick = now
        return now

    def _commit(self, build: Callable[[int, int], list[Row]], nbytes: int) -> int:
        self._check_usable()
        self._wait_for_space()
        with self._write_lock:
            self._check_usable()
            now = self._tick()
            seq = self._next_seq
            rows = build(seq, now)
            fut = self._wal.append(rows, (seq, now), nbytes + _ROW_OVERHEAD * len(rows))
            self._next_seq = seq + 1
        fut.result()
        return seq

    def _release_checkpoint(self) -> None:
        """Remove this writer's checkpoint (it has no expiry). Also when fenced: a newer
        slatelib writer replaced it already, but an official 0.17 writer never would. Only
        our own checkpoint ids are removed, never a newer writer's."""
        ids = set(self._flusher.checkpoint_ids)
        last_wal = self._wal.last_acked_wal_id
        try:
            self._manifests.update(lambda cur: plan_close(
                cur.value, ids, epoch=self.epoch, last_wal_id=last_wal), clock=self._clock)
        except SlateError as exc:
            log.warning("could not remove the writer checkpoint [path=%s, error=%s]", self.path, exc)
