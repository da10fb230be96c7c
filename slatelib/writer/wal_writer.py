"""Group commit: writes from many threads share WAL SSTs, acknowledged strictly in order.

Callers append their rows to an open buffer and wait. A committer thread cuts the buffer
into WAL SSTs (the next WAL ids) and hands them to a pool that writes up to
``max_in_flight`` WAL SSTs at once. A buffer is cut (see :func:`should_cut`) when

- no WAL write is in flight (an idle pipeline never delays a write), or
- it holds ``batch_max_bytes`` (the byte threshold), or
- its oldest write has waited ``flush_interval``, or
- a flush was requested (``wait_durable``, close).

``batch_max_bytes`` also caps the size of a WAL SST: a buffer that piled up while WAL SSTs
were in flight (many writers, each with a large batch) is split at write boundaries into
several WAL SSTs of at most ``batch_max_bytes`` each (:func:`writes_that_fit`; a single
write larger than the cap gets a WAL SST of its own). Once a buffer is cut, all of it is
due: its WAL SSTs go out as fast as ``max_in_flight`` allows. Sizes are the estimates the
writer passes to :meth:`WalPipeline.append` (keys, values and a per-row overhead).

A WAL SST is acknowledged (its rows go to the memtable, then its callers return) only when
it and every WAL SST before it are durable: after a gap, readers and the next writer stop
replaying, so a later WAL's rows are not durable until the earlier ones are. When one WAL
write fails, its callers get its error, every later WAL SST fails without being
acknowledged (its rows may have landed but are unreachable behind the gap; the next
writer's fence window neutralizes them), and the pipeline accepts nothing more.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from slatelib.clock import Clock
from slatelib.core.row import Row
from slatelib.errors import CommitStateUnknownError, FencedError, InvalidDbStateError, SlateError

log = logging.getLogger(__name__)


def writes_that_fit(sizes: Sequence[int], cap: int) -> int:
    """How many of the pending writes (``sizes`` in arrival order) the next WAL SST takes:
    the longest prefix of at most ``cap`` bytes, and at least one (a write larger than the
    cap goes into a WAL SST of its own). Pure."""
    total = 0
    for i, n in enumerate(sizes):
        total += n
        if total > cap:
            return max(1, i)
    return len(sizes)


def should_cut(
    *,
    buffered_bytes: int,
    buffered_age_s: float,
    in_flight: int,
    max_in_flight: int,
    batch_max_bytes: int,
    flush_interval_s: float | None,
    flush_requested: bool,
) -> bool:
    """Whether the open buffer becomes a WAL SST now. Pure."""
    if buffered_bytes <= 0 or in_flight >= max_in_flight:
        return False
    return (
        in_flight == 0
        or flush_requested
        or buffered_bytes >= batch_max_bytes
        or (flush_interval_s is not None and buffered_age_s >= flush_interval_s)
    )


def committer_wait_s(
    *, waiting_age_s: float | None, in_flight: int, max_in_flight: int,
    flush_interval_s: float | None,
) -> float | None:
    """How long the committer sleeps when it does not cut (None: until notified). Only the
    ``flush_interval`` timer of the oldest write not yet due (``waiting_age_s``; None when
    none waits) needs a timeout; while every WAL slot is taken nothing can be cut before a
    WAL write finishes, which notifies it (no polling a saturated pipeline). Pure."""
    if waiting_age_s is None or flush_interval_s is None or in_flight >= max_in_flight:
        return None
    return max(0.001, flush_interval_s - waiting_age_s)


@dataclass(eq=False)
class WalJob:
    """One WAL SST: its id, rows in seq order, and the callers waiting for it.
    ``last_write`` counts the writes appended up to and including this job's last one."""

    wal_id: int
    rows: list[Row]
    batches: list[tuple[int, int]]
    waiters: list[Future[None]]
    nbytes: int
    last_write: int = 0
    finished: bool = False
    error: BaseException | None = field(default=None)


def stopped_error(failure: BaseException) -> SlateError:
    """What calls get after the pipeline stopped because of ``failure``."""
    if isinstance(failure, FencedError):
        return FencedError(f"this writer is fenced: {failure}")
    return InvalidDbStateError(
        f"the writer stopped after an error ({type(failure).__name__}: {failure}); "
        "open the database again to continue"
    )


def _unacknowledged(job: WalJob, failure: BaseException) -> SlateError:
    if isinstance(failure, FencedError):
        return FencedError(f"WAL {job.wal_id} not acknowledged: this writer is fenced ({failure})")
    return CommitStateUnknownError(
        f"WAL {job.wal_id} may have been written but is not acknowledged: an earlier WAL "
        f"write failed ({failure})"
    )


class WalPipeline:
    """The WAL group-commit pipeline of one writer.

    Args:
        write: ``write(wal_id, rows)`` encodes and stores one WAL SST; raises on failure
            (``FencedError`` when the id is taken).
        first_wal_id: id of the first WAL SST this pipeline writes.
        on_durable: called for each acknowledged job, in WAL order, before its callers
            return (the writer inserts the rows into its memtable there).
        on_fatal: called once with the error that stopped the pipeline.
    """

    def __init__(
        self,
        *,
        write: Callable[[int, list[Row]], None],
        first_wal_id: int,
        max_in_flight: int,
        flush_interval_s: float | None,
        batch_max_bytes: int,
        clock: Clock,
        on_durable: Callable[[WalJob], None],
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self._write = write
        self._max_in_flight = max(1, max_in_flight)
        self._interval = flush_interval_s
        self._batch_max = max(1, batch_max_bytes)
        self._clock = clock
        self._on_durable = on_durable
        self._on_fatal = on_fatal
        self._cond = threading.Condition()
        self._ack_lock = threading.Lock()
        # The open buffer, one entry per write (arrival order).
        self._rows: list[list[Row]] = []
        self._sizes: list[int] = []
        self._batches: list[tuple[int, int]] = []
        self._waiters: list[Future[None]] = []
        self._bytes = 0
        # Write counters: appended, handed to WAL jobs, due for cutting, acknowledged.
        # Invariant: acked <= cut <= due <= appended; writes after ``due`` are not due yet
        # and the oldest of them arrived at ``since``.
        self._appended = 0
        self._cut = 0
        self._due = 0
        self._acked_writes = 0
        self._since = 0.0
        self._jobs: deque[WalJob] = deque()
        self._in_flight = 0
        self._in_flight_bytes = 0
        self._next_wal_id = first_wal_id
        self._last_acked = first_wal_id - 1
        self._failure: BaseException | None = None
        self._closed = False
        self._pool = ThreadPoolExecutor(self._max_in_flight, thread_name_prefix="slatelib-wal")
        self._thread = threading.Thread(target=self._run, name="slatelib-wal-commit", daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------- callers
    @property
    def last_acked_wal_id(self) -> int:
        return self._last_acked

    @property
    def unflushed_bytes(self) -> int:
        """Bytes buffered or being written (not yet in a memtable)."""
        return self._bytes + self._in_flight_bytes

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    def append(self, rows: list[Row], batch: tuple[int, int], nbytes: int) -> Future[None]:
        """Add one committed batch to the open buffer; the future completes when durable.

        Raises:
            FencedError / InvalidDbStateError: the pipeline stopped or is closed.
        """
        fut: Future[None] = Future()
        with self._cond:
            if self._failure is not None:
                raise stopped_error(self._failure)
            if self._closed:
                raise InvalidDbStateError("the writer is closed")
            if self._appended == self._due:  # the oldest write that is not due yet
                self._since = self._clock.monotonic_s()
            self._rows.append(rows)
            self._sizes.append(nbytes)
            self._batches.append(batch)
            self._waiters.append(fut)
            self._bytes += nbytes
            self._appended += 1
            self._cond.notify_all()
        return fut

    def wait_durable(self) -> None:
        """Cut the open buffer now and wait until everything appended so far is durable.

        Raises:
            FencedError / InvalidDbStateError: the pipeline stopped.
        """
        with self._cond:
            target = self._appended
            self._due = max(self._due, target)
            self._cond.notify_all()
            while self._acked_writes < target and self._failure is None:
                self._cond.wait()
            if self._acked_writes < target and self._failure is not None:
                raise stopped_error(self._failure)

    def close(self) -> None:
        """Stop after writing what is buffered (``wait_durable`` first for a clean close)."""
        with self._cond:
            self._closed = True
            self._due = self._appended
            self._cond.notify_all()
        self._thread.join()
        self._pool.shutdown(wait=True)

    def stop(self, error: BaseException) -> None:
        """Stop accepting and acknowledging writes because of ``error`` (does not block)."""
        with self._cond:
            if self._failure is None:
                self._failure = error
            self._fail_buffer_locked()
            self._cond.notify_all()

    def abort(self, error: BaseException) -> None:
        """Fail everything not yet acknowledged and stop (the writer was fenced or closed)."""
        with self._cond:
            if self._failure is None:
                self._failure = error
            self._closed = True
            self._fail_buffer_locked()
            self._cond.notify_all()
        self._thread.join()
        self._pool.shutdown(wait=True)
        self._drain()

    # -------------------------------------------------------------- committer
    def _run(self) -> None:
        while True:
            with self._cond:
                job = self._next_job_locked()
                if job is None:
                    return
            self._pool.submit(self._write_job, job)

    def _next_job_locked(self) -> WalJob | None:
        while True:
            if self._failure is not None:
                self._fail_buffer_locked()
                return None
            waiting = self._appended > self._due  # writes not due yet
            age = self._clock.monotonic_s() - self._since if waiting else 0.0
            if should_cut(
                buffered_bytes=self._bytes if self._rows else 0,
                buffered_age_s=age,
                in_flight=self._in_flight,
                max_in_flight=self._max_in_flight,
                batch_max_bytes=self._batch_max,
                flush_interval_s=self._interval,
                flush_requested=self._due > self._cut,
            ):
                self._due = self._appended  # the whole buffer goes out, capped SST by SST
                return self._cut_locked()
            if self._closed and not self._rows:
                return None
            self._cond.wait(committer_wait_s(
                waiting_age_s=age if waiting else None, in_flight=self._in_flight,
                max_in_flight=self._max_in_flight, flush_interval_s=self._interval))

    def _cut_locked(self) -> WalJob:
        """The next WAL job: the writes at the head of the buffer that fit the cap."""
        n = writes_that_fit(self._sizes, self._batch_max)
        if n == len(self._sizes):  # the whole buffer (the usual case): no copies
            parts, batches, waiters, nbytes = self._rows, self._batches, self._waiters, self._bytes
            self._rows, self._sizes, self._batches, self._waiters = [], [], [], []
        else:
            parts, batches, waiters = self._rows[:n], self._batches[:n], self._waiters[:n]
            nbytes = sum(self._sizes[:n])
            for buf in (self._rows, self._sizes, self._batches, self._waiters):
                del buf[:n]
        if n == 1:
            rows = parts[0]
        else:
            rows = []
            for part in parts:
                rows.extend(part)
        self._bytes -= nbytes
        self._cut += n
        job = WalJob(wal_id=self._next_wal_id, rows=rows, batches=batches, waiters=waiters,
                     nbytes=nbytes, last_write=self._cut)
        self._next_wal_id += 1
        self._jobs.append(job)
        self._in_flight += 1
        self._in_flight_bytes += job.nbytes
        return job

    def _fail_buffer_locked(self) -> None:
        if self._waiters and self._failure is not None:
            err = stopped_error(self._failure)
            for w in self._waiters:
                if not w.done():
                    w.set_exception(err)
        self._rows, self._sizes, self._batches, self._waiters, self._bytes = [], [], [], [], 0

    # ------------------------------------------------------------------ writes
    def _write_job(self, job: WalJob) -> None:
        error: BaseException | None = None
        try:
            self._write(job.wal_id, job.rows)
        except BaseException as exc:  # noqa: BLE001 - every failure must reach the callers
            error = exc
        with self._cond:
            job.finished = True
            job.error = error
            self._in_flight -= 1
            self._in_flight_bytes -= job.nbytes
            self._cond.notify_all()
        self._drain()

    def _drain(self) -> None:
        """Acknowledge finished jobs at the head of the queue, strictly in WAL order."""
        with self._ack_lock:
            while True:
                newly_failed: BaseException | None = None
                with self._cond:
                    if not self._jobs or not self._jobs[0].finished:
                        return
                    job = self._jobs.popleft()
                    if self._failure is None and job.error is not None:
                        self._failure = newly_failed = job.error
                        self._fail_buffer_locked()
                        self._cond.notify_all()
                    failure = self._failure
                if failure is None:
                    self._acknowledge(job)
                    continue
                if newly_failed is not None:  # before waking the callers: they see it at once
                    log.error("wal write failed; writer stopped [wal_id=%d, error=%s]",
                              job.wal_id, newly_failed)
                    self._on_fatal(newly_failed)
                exc = job.error if job.error is failure else _unacknowledged(job, failure)
                for w in job.waiters:
                    w.set_exception(exc)

    def _acknowledge(self, job: WalJob) -> None:
        try:
            self._on_durable(job)
        except BaseException as exc:  # noqa: BLE001 - a bug; fail loudly to the callers
            with self._cond:
                if self._failure is None:
                    self._failure = exc
                self._cond.notify_all()
            self._on_fatal(exc)
            for w in job.waiters:
                w.set_exception(exc)
            return
        with self._cond:
            self._last_acked = job.wal_id
            self._acked_writes = job.last_write
            self._cond.notify_all()
        for w in job.waiters:
            w.set_result(None)
