"""The writer's manifest thread: memtable flushes to L0 and manifest polling.

One thread does every manifest write of the writer, so flush commits, checkpoint moves and
polls never race each other:

- **Flush** (oldest immutable memtable first): encode its rows as an L0 SST (expired
  values become tombstones, merge operands are folded, older versions dropped; see
  :func:`plan_l0_rows`), upload it under a fresh ULID, then commit the manifest
  with a CAS rebased on the latest version (:func:`plan_flush_commit`). A crash between
  upload and commit leaves an unreferenced SST for GC; the rows are still in the WAL.
- **Back-pressure**: no new L0 is added while ``l0_max_ssts`` L0 views exist; the thread
  polls the manifest until a compactor makes room (writers block meanwhile once
  ``max_unflushed_bytes`` is buffered).
- **Poll** every ``manifest_poll_interval``: a higher writer epoch fences the writer; a
  changed LSM tree (a compactor commit) is adopted for reads and the writer checkpoint is
  re-established on the new version (design doc 'checkpoints and clones'), as it is once half of its
  ``checkpoint_lifetime`` has passed or when someone removed it
  (:func:`~slatelib.writer.manifest_rules.reestablish_reason`). A poll that fails with a
  transient error (store unavailable, CAS conflicts) is logged and retried at the next
  poll; the writer keeps writing, and :attr:`Flusher.read_deadline_s` tells it until when
  it may still read through the manifest its checkpoint pins.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Protocol

from slatelib.clock import Clock
from slatelib.core.checkpoints import lsm_changed
from slatelib.core.invariants import check_writer_epoch
from slatelib.core.manifest import Checkpoint, Manifest, SstHandle
from slatelib.core.merge import MergeOperator
from slatelib.core.retention import RetentionPolicy, RetentionStats, retain_window
from slatelib.core.row import MERGE, Row
from slatelib.db_manifest import DbManifest
from slatelib.errors import (
    CommitStateUnknownError,
    ConflictError,
    FencedError,
    MergeOperatorMissingError,
    StorageError,
    UnavailableError,
)
from slatelib.format.sst import SstWriter, SstWriterOptions
from slatelib.ids import UlidGenerator
from slatelib.objstore import ObjectStore
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import StoredManifest
from slatelib.store.memtables import WalMemTable
from slatelib.writer.manifest_rules import (
    L0Flush,
    plan_checkpoint_move,
    plan_flush_commit,
    read_deadline_s,
    reestablish_reason,
)
from slatelib.writer.uploads import put_new_object

log = logging.getLogger(__name__)

FLUSH_ATTEMPTS = 8
_MAX_BACKOFF_S = 5.0


def plan_l0_rows(
    rows: list[Row], *, merge_operator: MergeOperator | None, clock_tick: int, min_seq: int
) -> list[Row]:
    """The rows a memtable flush writes to L0, from the memtable's rows in storage order
    (key ascending, seq descending). Pure.

    0.17.0 runs a flush through the same ``MergeOperatorIterator`` and ``RetentionIterator``
    as a compaction (:mod:`slatelib.core.retention`), with ``filter_tombstone = false``
    (tombstones are kept: older versions may sit in other L0s and runs), the memtable's last
    clock tick as the compaction clock (expired values become tombstones, expired merge
    operands are dropped) and the durable seq as ``retention_min_seq``: every row of a
    flushed memtable is durable, so ``min_seq`` is the memtable's last seq and only each
    key's newest version survives, merge operands folded onto it. Without a merge operator
    0.17's ``MergeOperatorRequiredIterator`` fails the flush on the first operand.

    Raises:
        MergeOperatorMissingError: a merge operand and no merge operator.
    """
    if merge_operator is None and MERGE in map(_kind, rows):
        raise MergeOperatorMissingError(next(r[0] for r in rows if r[2] == MERGE))
    policy = RetentionPolicy(min_seq=min_seq, bottom=False, clock_tick=clock_tick,
                             merge_operator=merge_operator)
    return retain_window(rows, policy, RetentionStats())


def _kind(row: Row) -> int:
    return row[2]


class FlusherHost(Protocol):
    """What the flusher needs from the writer."""

    def current_manifest(self) -> StoredManifest: ...

    def oldest_imm(self) -> WalMemTable | None: ...

    def last_acked_wal_id(self) -> int: ...

    def on_flushed(self, imm: WalMemTable, stored: StoredManifest) -> None: ...

    def on_manifest(self, stored: StoredManifest) -> None: ...

    def on_fatal(self, exc: BaseException) -> None: ...


class Flusher:
    """Background flush-and-poll thread of one writer (see the module docstring)."""

    def __init__(
        self,
        host: FlusherHost,
        *,
        store: ObjectStore,
        manifests: DbManifest,
        epoch: int,
        checkpoint_id: uuid.UUID,
        checkpoint_lifetime_s: float,
        sst_options: SstWriterOptions,
        merge_operator: MergeOperator | None,
        l0_max_ssts: int,
        poll_interval_s: float,
        clock: Clock,
    ) -> None:
        self._host = host
        self._store = store
        self._manifests = manifests
        self._paths = DbPaths(manifests.root)
        self._epoch = epoch
        self._opts = sst_options
        self._merge_operator = merge_operator
        self._l0_max = max(1, l0_max_ssts)
        self._interval = poll_interval_s
        self._clock = clock
        self._ids = UlidGenerator()
        self._cond = threading.Condition()
        self._wake = False
        self._stop = False
        self._polls: list[Future[None]] = []
        self._next_poll = clock.monotonic_s() + poll_interval_s
        self.blocked_on_l0 = False
        self._checkpoint_ids = {checkpoint_id}
        self._lifetime = checkpoint_lifetime_s
        self._checkpoint: Checkpoint | None = None
        self._read_deadline = 0.0
        self._set_checkpoint(host.current_manifest().value.checkpoint(checkpoint_id))
        self.last_poll_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="slatelib-flusher", daemon=True)
        self._thread.start()

    # --------------------------------------------------------------- control
    def notify(self) -> None:
        """A memtable was frozen (or a flush was requested)."""
        with self._cond:
            self._wake = True
            self._cond.notify_all()

    def request_poll(self) -> Future[None]:
        """Poll the manifest now; the future completes after the poll (errors included)."""
        fut: Future[None] = Future()
        with self._cond:
            if self._stop:
                fut.set_exception(UnavailableError("the writer's flusher has stopped"))
                return fut
            self._polls.append(fut)
            self._cond.notify_all()
        return fut

    @property
    def checkpoint_ids(self) -> frozenset[uuid.UUID]:
        """Ids of the writer checkpoint this writer may have in the manifest: the one of its
        last confirmed manifest write plus any attempted since (outcome unknown)."""
        return frozenset(self._checkpoint_ids)

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The writer checkpoint that pins the manifest the writer reads from (None: it
        was removed and not yet re-established)."""
        return self._checkpoint

    @property
    def read_deadline_s(self) -> float:
        """Unix seconds until which the writer may read through the manifest its checkpoint
        pins (see :func:`~slatelib.writer.manifest_rules.read_deadline_s`)."""
        return self._read_deadline

    def _set_checkpoint(self, cp: Checkpoint | None) -> None:
        self._checkpoint = cp
        self._read_deadline = read_deadline_s(cp, self._lifetime)

    def _commit(self, checkpoint_id: uuid.UUID,
                mutate: Callable[[StoredManifest], Manifest | None],
                current: StoredManifest) -> StoredManifest:
        """One manifest CAS that (re-)places our writer checkpoint as ``checkpoint_id``.

        When it fails after writing a version built on an LSM tree other than the one the
        writer reads (an outcome it cannot know: a lost response, then errors), that version
        may have replaced our checkpoint with one that does not pin what the writer reads:
        reads stop until a poll re-establishes it.
        """
        self._checkpoint_ids.add(checkpoint_id)
        reading = self._host.current_manifest().value
        unpinned = False

        def attempt(cur: StoredManifest) -> Manifest | None:
            nonlocal unpinned
            new = mutate(cur)
            if new is not None and lsm_changed(reading, cur.value):
                unpinned = True
            return new

        try:
            stored = self._manifests.update(attempt, clock=self._clock,
                                      current=current)
        except BaseException:
            if unpinned:
                self._set_checkpoint(None)
            raise
        # Ids absent from a version we wrote (or confirmed) can never appear later.
        mine = [c for c in stored.value.checkpoints if c.id in self._checkpoint_ids]
        self._checkpoint_ids = {c.id for c in mine}
        # Usually ``checkpoint_id``; another of ours when an earlier attempt of the same
        # change landed despite an error (mutate then returned None).
        self._set_checkpoint(max(mine, key=lambda c: c.manifest_id) if mine else None)
        return stored

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    # ------------------------------------------------------------------ loop
    def _run(self) -> None:
        polls: list[Future[None]] = []
        try:
            while True:
                with self._cond:
                    work = self._wait_for_work()
                    if work is None:  # stopped: answer polls requested meanwhile
                        pending, self._polls = self._polls, []
                    else:
                        polls = work
                if work is None:
                    for f in pending:
                        f.set_exception(UnavailableError("the writer's flusher has stopped"))
                    return
                now = self._clock.monotonic_s()
                if polls or now >= self._next_poll:
                    error = self._try_poll()
                    self._next_poll = self._clock.monotonic_s() + self._interval
                    for f in polls:
                        if error is None:
                            f.set_result(None)
                        else:
                            f.set_exception(error)
                polls = []
                self._flush_ready()
        except BaseException as exc:  # noqa: BLE001 - reported to the writer and its callers
            log.error("writer flusher stopped [path=%s, error=%s]", self._manifests.root, exc)
            self._host.on_fatal(exc)
            with self._cond:
                pending, self._polls = self._polls, []
                self._stop = True
            for f in (*polls, *pending):
                if not f.done():
                    f.set_exception(exc)

    def _wait_for_work(self) -> list[Future[None]] | None:
        while True:
            if self._stop:
                return None
            polls, self._polls = self._polls, []
            due = self._clock.monotonic_s() >= self._next_poll
            ready = self._wake and not self.blocked_on_l0
            if polls or due or ready:
                self._wake = False
                return polls
            self._cond.wait(max(0.001, self._next_poll - self._clock.monotonic_s()))

    # ----------------------------------------------------------------- polls
    def _try_poll(self) -> BaseException | None:
        """:meth:`_poll`; a transient failure is logged and returned (the next poll retries),
        anything else (fenced, an undecodable manifest, a bug) raises."""
        try:
            self._poll()
        except FencedError:
            raise
        except (UnavailableError, ConflictError, CommitStateUnknownError) as exc:
            self.last_poll_error = exc
            cp = self._checkpoint
            log.warning("writer manifest poll failed, retrying at the next poll [path=%s, "
                        "checkpoint_expires_s=%s, error=%s: %s]", self._manifests.root,
                        None if cp is None else cp.expire_time_s, type(exc).__name__, exc)
            return exc
        self.last_poll_error = None
        return None

    def _poll(self) -> None:
        latest = self._manifests.read_latest()
        check_writer_epoch(latest.value, self._epoch)
        local = self._host.current_manifest()
        cp = self._checkpoint
        reason = reestablish_reason(local.value, latest.value, None if cp is None else cp.id,
                                    lifetime_s=self._lifetime, now_s=self._clock.now_ms() / 1000)
        if cp is None or latest.value.checkpoint(cp.id) is None:
            self._set_checkpoint(None)  # nothing keeps GC away from what we read any more
        if reason is not None:
            checkpoint_id = uuid.uuid4()

            def mutate(cur: StoredManifest) -> Manifest | None:
                return plan_checkpoint_move(
                    cur.value, cur.id + 1, epoch=self._epoch, checkpoint_id=checkpoint_id,
                    now_s=self._clock.now_ms() / 1000, lifetime_s=self._lifetime,
                )

            latest = self._commit(checkpoint_id, mutate, latest)
            log.info("writer checkpoint re-established [path=%s, reason=%s, manifest_id=%d, "
                     "l0=%d, runs=%d]", self._manifests.root, reason, latest.id,
                     len(latest.value.l0), len(latest.value.compacted))
        if latest.id > local.id:
            self._host.on_manifest(latest)

    # --------------------------------------------------------------- flushes
    def _l0_full(self) -> bool:
        return len(self._host.current_manifest().value.l0) >= self._l0_max

    def _flush_ready(self) -> None:
        while not self._stop:
            imm = self._host.oldest_imm()
            if imm is None:
                self.blocked_on_l0 = False
                return
            if self._l0_full():
                self._try_poll()
                if self._l0_full():
                    if not self.blocked_on_l0:
                        log.warning("l0 full, waiting for compaction [path=%s, l0_max_ssts=%d]",
                                    self._manifests.root, self._l0_max)
                    self.blocked_on_l0 = True
                    return
            self.blocked_on_l0 = False
            self._with_retries(partial(self._flush_one, imm))

    def _with_retries(self, fn: Callable[[], None]) -> None:
        delay = 0.1
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                fn()
                return
            except StorageError:
                raise
            except UnavailableError as exc:
                if attempt >= FLUSH_ATTEMPTS:
                    raise
                log.warning("memtable flush failed, retrying [attempt=%d, error=%s]", attempt, exc)
                self._clock.sleep(delay)
                delay = min(delay * 2, _MAX_BACKOFF_S)

    def _upload(self, imm: WalMemTable) -> SstHandle | None:
        rows = plan_l0_rows(list(imm.table.rows()), merge_operator=self._merge_operator,
                            clock_tick=imm.last_tick, min_seq=imm.last_seq)
        if not rows:
            return None
        writer = SstWriter(self._opts)
        writer.add_rows(rows)
        encoded = writer.finish()
        sst_id = self._ids.new(self._clock.now_ms())
        put_new_object(self._store, self._paths.compacted(sst_id), encoded.to_bytes(),
                       clock=self._clock)
        return SstHandle(sst_id, encoded.info, encoded.format_version)

    def _flush_one(self, imm: WalMemTable) -> None:
        handle = self._upload(imm)
        flush = L0Flush(
            handle=handle,
            last_seq=imm.last_seq,
            replay_after_wal_id=imm.last_wal_id,
            wal_id_last_seen=max(imm.last_wal_id, self._host.last_acked_wal_id()),
            last_tick=imm.last_tick,
            tracker=tuple(imm.tracker),
        )
        checkpoint_id = uuid.uuid4()

        def mutate(cur: StoredManifest) -> Manifest | None:
            return plan_flush_commit(
                cur.value, cur.id + 1, flush, epoch=self._epoch, checkpoint_id=checkpoint_id,
                now_s=self._clock.now_ms() / 1000, lifetime_s=self._lifetime,
            )

        stored = self._commit(checkpoint_id, mutate, self._host.current_manifest())
        log.info("memtable flushed [path=%s, manifest_id=%d, last_seq=%d, replay_after_wal_id=%d]",
                 self._manifests.root, stored.id, flush.last_seq, flush.replay_after_wal_id)
        self._host.on_flushed(imm, stored)
