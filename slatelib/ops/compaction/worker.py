"""Worker mode: execute the compactions that official 0.17 coordinators schedule.

A coordinator running with ``compactor_options.worker = null`` plans compactions, marks them
Scheduled in ``compactions/`` and waits for a worker. :class:`CompactionWorker` is that
worker, for any number of databases at once (the protocol is in
:mod:`slatelib.core.compaction_worker` and ``docs/rfcs/0009-compaction-worker.md``):

- **poll** each database's latest compactions file every ``compactions_poll_interval``
  (with 0.17's +-50% jitter) and **claim** Scheduled entries, up to
  ``max_concurrent_compactions`` jobs for the whole application, by writing the next
  version (create-if-absent);
- read the manifest *after* the claim and check that the entry's sources are there
  (else hand the claim back), read every input SST's index and filter, and split the
  work into key ranges (or take the ranges of the job's context when another worker
  started it, and resume each after its last output SST);
- run one task per range through a :class:`~slatelib.ops.engine.TaskRunner`
  (threads here, Spark executors in ``jobs/compact.py --worker``), recording each
  finished range's SSTs in the job's context;
- **heartbeat** from a driver thread every ``heartbeat_interval`` with the latest
  context, for every job still ours; a job found reclaimed or claimed by another
  worker is *lost*: it stops and never writes again, and its SSTs are left to GC;
- **report** Compacted with the new run's SSTs in key order. The coordinator commits.

The worker never writes the manifest and never touches ``compactor_epoch``. A job that
fails is handed back (Scheduled) and not claimed again by this worker for a while
(``retry_after``), so a damaged input does not spin. On :meth:`CompactionWorker.stop`
with ``release=True`` (SIGTERM) running jobs are handed back at once; otherwise (end of
``--run-for``, ``--until-idle``) they are finished first.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import Settings
from slatelib.core.compaction_worker import (
    RangeWork,
    claim,
    claimable,
    compacted,
    declined_reason,
    heartbeat,
    outputs_in_order,
    progress_context,
    release,
    remaining_work,
    reported,
    scheduled,
    spec_of,
)
from slatelib.core.compactions import Compaction, Compactions, TieredCompactionContext
from slatelib.core.manifest import SstHandle
from slatelib.core.segments import segment_label
from slatelib.db_manifest import DbManifest
from slatelib.errors import (
    ConflictError,
    FencedError,
    InvalidArgumentError,
    SlateError,
)
from slatelib.exit_codes import EXIT_OK, exit_code_for
from slatelib.ids import Ulid, UlidGenerator, ulid_time_ms, ulid_to_str
from slatelib.objstore import ObjectStore
from slatelib.ops.compaction.breakdown import execute_breakdown
from slatelib.ops.compaction.guard import check_sources
from slatelib.ops.compaction.service import status_path, write_status
from slatelib.ops.compaction.worker_report import (
    DbStats,
    RunningJob,
    first_problem,
    worker_report,
    worker_status,
)
from slatelib.ops.engine import (
    CompactionResult,
    CompactionTask,
    TaskFailure,
    TaskOptions,
    TaskOutcome,
    TaskRunner,
    ThreadTaskRunner,
    build_tasks,
    execute_tasks,
    input_views,
    load_merge_operator,
    plan_output_options,
    split_ranges,
)
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.sequenced import Versioned
from slatelib.store.sst_reader import BlockCache
from slatelib.store.table_store import TableStore
from slatelib.txn import transact, update_versioned

__all__ = ["CompactionWorker", "WorkerDb", "WorkerOptions", "new_worker_id"]

log = logging.getLogger(__name__)

RETRY_AFTER_S = 300.0
"""A job that failed here is not claimed again by this worker before this many seconds."""


def new_worker_id(clock: Clock = SYSTEM_CLOCK) -> str:
    """A worker id as 0.17 makes them: a ULID string."""
    return ulid_to_str(UlidGenerator().new(clock.now_ms()))


@dataclass(frozen=True)
class WorkerDb:
    """A database the worker serves."""

    name: str
    path: str
    store: ObjectStore


@dataclass(frozen=True)
class WorkerOptions:
    max_concurrent: int = 4
    poll_interval_s: float = 1.0
    heartbeat_interval_s: float = 5.0
    heartbeat_timeout_s: float = 30.0
    run_for_s: float | None = None
    until_idle: bool = False
    discover_interval_s: float = 60.0
    retry_after_s: float = RETRY_AFTER_S
    worker_id: str | None = None
    status_file: str | None = None
    """A local file the worker's status is written to (JSON, atomically) every
    ``status_interval_s`` and at the end; None: none."""
    status_interval_s: float = 10.0

    def check(self) -> None:
        """Raises:
            InvalidArgumentError: a value out of range, or heartbeats that would not come
                well within the coordinators' ``worker_heartbeat_timeout``."""
        if self.max_concurrent < 1:
            raise InvalidArgumentError(
                f"--max-concurrent must be at least 1, got {self.max_concurrent}")
        if self.poll_interval_s <= 0 or self.heartbeat_interval_s <= 0:
            raise InvalidArgumentError("[worker] compactions_poll_interval and "
                                       "heartbeat_interval must be positive")
        if self.heartbeat_interval_s * 2 > self.heartbeat_timeout_s:
            raise InvalidArgumentError(
                f"[worker] heartbeat_interval ({self.heartbeat_interval_s:g}s) must be at most "
                f"half of worker_heartbeat_timeout ({self.heartbeat_timeout_s:g}s), the "
                "coordinators' setting: a slower heartbeat lets them reclaim running jobs")
        if self.run_for_s is not None and self.run_for_s <= 0:
            raise InvalidArgumentError(f"--run-for must be positive, got {self.run_for_s}")
        if self.status_interval_s <= 0:
            raise InvalidArgumentError("[worker] status_interval must be positive")

    @staticmethod
    def from_settings(settings: Settings, **overrides: Any) -> WorkerOptions:
        w = settings.worker
        base = WorkerOptions(
            max_concurrent=w.max_concurrent_compactions,
            poll_interval_s=w.compactions_poll_interval,
            heartbeat_interval_s=w.heartbeat_interval,
            heartbeat_timeout_s=w.worker_heartbeat_timeout,
            discover_interval_s=w.discover_interval,
            status_file=status_path(w.status_file),
            status_interval_s=w.status_interval,
        )
        given = {k: v for k, v in overrides.items() if v is not None}
        if "status_file" in given:
            given["status_file"] = status_path(given["status_file"])
        return WorkerOptions(**{**base.__dict__, **given})


@dataclass
class _Job:
    db: WorkerDb
    compaction_id: Ulid
    entry: Compaction
    claimed_at: float
    beat_at: float = 0.0
    """When the job's last heartbeat (or its claim) landed (monotonic seconds)."""
    lost: threading.Event = field(default_factory=threading.Event)
    work: list[RangeWork] = field(default_factory=list)
    written: dict[int, tuple[SstHandle, ...]] = field(default_factory=dict)
    retention_min_seq: int = 0
    ctx: TieredCompactionContext | None = None
    ctx_dirty: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    rows_in: int = 0
    rows_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    breakdown: dict[str, Any] = field(default_factory=dict)
    """Its execute phase (:mod:`slatelib.ops.compaction.breakdown`), once run."""

    @property
    def label(self) -> str:
        return f"{self.db.name} {ulid_to_str(self.compaction_id)}"

    def record(self, index: int, outputs: tuple[SstHandle, ...]) -> None:
        with self.lock:
            self.written[index] = outputs
            self.ctx = progress_context(self.work, self.written, self.retention_min_seq)
            self.ctx_dirty = True

    def take_ctx(self) -> TieredCompactionContext | None:
        with self.lock:
            if not self.ctx_dirty:
                return None
            self.ctx_dirty = False
            return self.ctx


class _ProgressRunner:
    """Runs a compaction's tasks through ``inner`` and records every finished range as soon
    as it is done: all of them in one call (one Spark job) when ``inner`` can say when
    each ends (:class:`~slatelib.ops.engine.StreamingTaskRunner`), else each on its own
    (one call per range), ``slots`` at a time."""

    def __init__(self, inner: TaskRunner, slots: int, job: _Job,
                 index_of: Sequence[int]) -> None:
        self.inner = inner
        self.slots = max(1, slots)
        self.job = job
        self.index_of = index_of

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        if self.job.lost.is_set():
            return [self._lost(t) for t in tasks]
        streaming = getattr(self.inner, "run_streaming", None)
        if streaming is not None:
            outcomes: list[TaskOutcome] = streaming(tasks, self._record)
            return outcomes
        if len(tasks) <= 1:
            return [self._one(t) for t in tasks]
        with ThreadPoolExecutor(min(self.slots, len(tasks)),
                                thread_name_prefix="worker-range") as pool:
            return list(pool.map(self._one, tasks))

    def _lost(self, task: CompactionTask) -> TaskFailure:
        return TaskFailure.of(task.index, FencedError(
            f"compaction {self.job.label} is no longer ours"))

    def _record(self, outcome: TaskOutcome) -> None:
        if isinstance(outcome, CompactionResult) and not self.job.lost.is_set():
            self.job.record(self.index_of[outcome.index], outcome.outputs)

    def _one(self, task: CompactionTask) -> TaskOutcome:
        if self.job.lost.is_set():
            return self._lost(task)
        outcome = self.inner([task])[0]
        self._record(outcome)
        return outcome


class CompactionWorker:
    """Claims and executes Scheduled compactions of many databases (see the module doc).
    ``on_status``, when given, is called with :meth:`status` after every poll (the
    ``/metrics`` endpoint's snapshot, :class:`slatelib.metrics.StandingMetrics`)."""

    def __init__(
        self,
        databases: Callable[[], Sequence[WorkerDb]],
        *,
        settings: Settings | None = None,
        options: WorkerOptions | None = None,
        runner: TaskRunner | None = None,
        slots: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        on_status: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.options = options or WorkerOptions.from_settings(self.settings)
        self.options.check()
        load_merge_operator(self.settings.compaction.merge_operator)
        self.worker_id = self.options.worker_id or new_worker_id(clock)
        self._databases = databases
        self.runner = runner
        self.slots = slots or self.settings.compaction.parallelism or 2
        self.clock = clock
        self.rng = rng or random.Random()
        self.on_status = on_status
        self._jobs: dict[tuple[str, Ulid], _Job] = {}
        self._jobs_lock = threading.Lock()
        self._stop = threading.Event()
        self._beat_stop = threading.Event()
        self._release_on_stop = False
        self._stats: dict[str, DbStats] = {}
        self._skip_until: dict[tuple[str, Ulid], float] = {}
        self._dbs: list[WorkerDb] = []
        self._errors: list[dict[str, str]] = []
        self._started_ms = clock.now_ms()
        self.polls = 0

    # ------------------------------------------------------------------ control
    def stop(self, *, release: bool = False) -> None:
        """Stop claiming. ``release``: hand running jobs back now (SIGTERM); else finish
        them first."""
        self._release_on_stop = self._release_on_stop or release
        self._stop.set()
        if release:
            for job in self._running():
                job.lost.set()

    def _running(self) -> list[_Job]:
        with self._jobs_lock:
            return list(self._jobs.values())

    def _stats_for(self, db: WorkerDb) -> DbStats:
        return self._stats.setdefault(db.name, DbStats())

    # --------------------------------------------------------------------- loop
    def run(self) -> dict[str, Any]:
        """Poll, claim and execute until stopped (:meth:`stop`, ``run_for_s`` or
        ``until_idle``). Returns the report."""
        opts = self.options
        started = self.clock.monotonic_s()
        log.info("compaction worker started [worker_id=%s, max_concurrent=%d]",
                 self.worker_id, opts.max_concurrent)
        beat = threading.Thread(target=self._heartbeat_loop, name="worker-heartbeat",
                                daemon=True)
        beat.start()
        pool = ThreadPoolExecutor(opts.max_concurrent, thread_name_prefix="worker-job")
        next_discover = 0.0
        next_status = 0.0
        self._started_ms = self.clock.now_ms()
        try:
            while not self._stop.is_set():
                now = self.clock.monotonic_s()
                if now >= next_status and self.polls:
                    self.write_status()
                    next_status = now + opts.status_interval_s
                if opts.run_for_s is not None and now - started >= opts.run_for_s:
                    log.info("worker: --run-for elapsed; finishing running jobs")
                    break
                if now >= next_discover:
                    self._refresh_databases()
                    next_discover = now + opts.discover_interval_s
                found = self._poll(pool)
                self.polls += 1
                if self.on_status is not None:  # the metrics endpoint's snapshot
                    self.on_status(self.status())
                if opts.until_idle and not found and not self._running():
                    log.info("worker: nothing scheduled and nothing running; stopping")
                    break
                wait = opts.poll_interval_s * self.rng.uniform(0.5, 1.5)
                self._stop.wait(wait)
        finally:
            self._stop.set()
            if self._release_on_stop:
                for job in self._running():
                    job.lost.set()
                    self._release(job, reason="worker stopping")
            pool.shutdown(wait=True)
            self._beat_stop.set()
            beat.join()
            self.write_status(final=True)
            if self.on_status is not None:
                self.on_status(self.status(final=True))
        return self.report(self.clock.monotonic_s() - started)

    def _refresh_databases(self) -> None:
        try:
            self._dbs = list(self._databases())
        except SlateError as exc:
            if not self._dbs:
                raise
            log.warning("worker: refreshing the databases failed; keeping %d [error=%s]",
                        len(self._dbs), exc)

    def _poll(self, pool: ThreadPoolExecutor) -> bool:
        """One pass over the databases; True when anything was claimable."""
        found = False
        for db in self._dbs:
            if self._stop.is_set():
                break
            free = self.options.max_concurrent - len(self._running())
            try:
                found |= self._claim_from(db, free, pool)
            except SlateError as exc:
                self._note_error(db, exc, "poll")
                self._stats_for(db).poll_error_code = exit_code_for(exc)
        return found

    def _note_error(self, db: WorkerDb, exc: BaseException, where: str) -> None:
        err = {"type": type(exc).__name__, "message": str(exc), "where": where,
               "at_ms": str(self.clock.now_ms())}
        self._stats_for(db).last_error = err
        log.warning("worker: %s of %s failed [error=%s: %s]", where, db.name,
                    type(exc).__name__, exc)

    def _decline(self, db: WorkerDb, state: Compactions) -> None:
        """Note every Scheduled entry this worker will not execute (logged once each)."""
        stats = self._stats_for(db)
        for c in scheduled(state):
            why = declined_reason(c)
            if why is None or c.id in stats.declined:
                continue
            segment = getattr(c.spec, "segment", None)
            stats.declined[c.id] = {
                "id": ulid_to_str(c.id), "spec": type(c.spec).__name__,
                "segment": None if segment is None else segment_label(segment),
                "reason": why, "at_ms": self.clock.now_ms()}
            log.warning("worker: NOT executing scheduled compaction [db=%s, id=%s, spec=%s, "
                        "segment=%s]: %s", db.name, ulid_to_str(c.id), type(c.spec).__name__,
                        stats.declined[c.id]["segment"], why)

    def _claim_from(self, db: WorkerDb, free: int, pool: ThreadPoolExecutor) -> bool:
        store = CompactionsStore(db.store, db.path)
        current = store.try_read_latest()
        stats = self._stats_for(db)
        stats.poll_error_code = EXIT_OK
        stats.last_poll_ms = self.clock.now_ms()
        if current is None:
            return False
        self._decline(db, current.value)
        now = self.clock.monotonic_s()
        candidates = []
        for c in claimable(current.value):
            with self._jobs_lock:
                stale = self._jobs.pop((db.name, c.id), None)
            if stale is not None:
                # Handed back while we still run it (the coordinator missed our heartbeats):
                # stop that run; a later poll claims the job afresh.
                stale.lost.set()
                log.warning("worker: compaction %s was reclaimed while it ran here; stopping "
                            "that run", stale.label)
            elif self._skip_until.get((db.name, c.id), 0.0) <= now:
                candidates.append(c)
        if not candidates:
            return False
        if free <= 0:
            return True
        wanted = [c.id for c in candidates[:free]]
        got: list[Ulid] = []

        def take(cur: Versioned[Compactions]) -> Compactions | None:
            new, ids = claim(cur.value, wanted, self.worker_id, self.clock.now_ms())
            got[:] = ids
            return new

        after = update_versioned(store, take, clock=self.clock, current=current)
        for cid in got:
            entry = after.value.compaction(cid)
            assert entry is not None
            claimed_at = self.clock.monotonic_s()
            job = _Job(db, cid, entry, claimed_at, beat_at=claimed_at)
            with self._jobs_lock:
                if (db.name, cid) in self._jobs:
                    continue
                self._jobs[(db.name, cid)] = job
            self._stats_for(db).claimed += 1
            log.info("worker: claimed compaction [db=%s, id=%s, worker_id=%s]", db.name,
                     ulid_to_str(cid), self.worker_id)
            pool.submit(self._execute, job)
        return True

    # ---------------------------------------------------------------- execution
    def _execute(self, job: _Job) -> None:
        db = job.db
        stats = self._stats_for(db)
        t0 = time.perf_counter()
        try:
            outputs, resumed = self._compact(job)
            if job.lost.is_set():
                raise FencedError(f"compaction {job.label} was reclaimed while it ran")
            self._report_compacted(job, outputs)
            stats.failed_entries.pop(job.compaction_id, None)
            stats.compacted += 1
            stats.rows_in += job.rows_in
            stats.rows_out += job.rows_out
            stats.bytes_in += job.bytes_in
            stats.bytes_out += job.bytes_out
            stats.ranges_resumed += resumed
            seconds = time.perf_counter() - t0
            stats.jobs.append({"id": ulid_to_str(job.compaction_id), "status": "compacted",
                               "outputs": len(outputs), "rows_in": job.rows_in,
                               "rows_out": job.rows_out, "bytes_out": job.bytes_out,
                               "ranges": len(job.work), "ranges_resumed": resumed,
                               "seconds": round(seconds, 3),
                               "execute_breakdown": job.breakdown})
            log.info("worker: compacted [db=%s, id=%s, outputs=%d, rows_in=%d, rows_out=%d, "
                     "bytes_out=%d, seconds=%.2f]", db.name, ulid_to_str(job.compaction_id),
                     len(outputs), job.rows_in, job.rows_out, job.bytes_out, seconds)
        except FencedError as exc:
            stats.lost += 1
            stats.jobs.append({"id": ulid_to_str(job.compaction_id), "status": "lost",
                               "reason": str(exc)})
            log.warning("worker: lost compaction [db=%s, id=%s]: %s", db.name,
                        ulid_to_str(job.compaction_id), exc)
        except Exception as exc:  # every failure hands the job back; the loop goes on
            stats.failed += 1
            stats.failed_entries[job.compaction_id] = exit_code_for(exc)
            self._note_error(db, exc, f"compaction {ulid_to_str(job.compaction_id)}")
            stats.jobs.append({"id": ulid_to_str(job.compaction_id), "status": "failed",
                               "error": {"type": type(exc).__name__, "message": str(exc)}})
            pause = (self.options.poll_interval_s * 10 if isinstance(exc, ConflictError)
                     else self.options.retry_after_s)
            self._skip_until[(db.name, job.compaction_id)] = self.clock.monotonic_s() + pause
            if not job.lost.is_set():
                self._release(job, reason=f"{type(exc).__name__}: {exc}")
        finally:
            self._forget(job)

    def _compact(self, job: _Job) -> tuple[list[SstHandle], int]:
        """Plan and run the job's ranges; returns the outputs and how many ranges were
        resumed from an earlier worker's context."""
        db = job.db
        cs = self.settings.compaction
        manifest = DbManifest(db.store, db.path).read_latest().value
        spec = spec_of(job.entry, manifest)
        cache = BlockCache(64 << 20)
        check_sources(db.store, db.path, manifest, [spec], cache=cache)
        sst_options, _ = plan_output_options(db.store, db.path, manifest, spec, self.settings,
                                             cache=cache)
        views = input_views(spec, manifest, TableStore(db.store, db.path))
        ctx = job.entry.ctx
        if ctx is not None and ctx.subcompactions:
            work = remaining_work(ctx, ())
        else:
            work = remaining_work(None, split_ranges(
                db.store, views, parallelism=self.slots, cache=cache,
                max_sst_size=cs.max_sst_size, min_range_bytes=cs.min_range_bytes,
                tasks_per_slot=cs.tasks_per_slot))
        resumed = sum(1 for w in work if w.done or w.todo is None)
        job.work = work
        job.retention_min_seq = spec.retention_min_seq
        with job.lock:
            job.ctx = progress_context(work, {}, spec.retention_min_seq)
            job.ctx_dirty = True
        index_of = [i for i, w in enumerate(work) if w.todo is not None]
        tasks = build_tasks(spec, views, [work[i].todo for i in index_of],  # type: ignore[misc]
                            TaskOptions(
            store=db.store.spec, db_path=db.path, compaction_id=job.compaction_id,
            sst_options=sst_options, max_sst_size=cs.max_sst_size,
            merge_operator=cs.merge_operator, max_fetch_tasks=cs.max_fetch_tasks,
            bytes_to_fetch=cs.bytes_to_fetch, min_ulid_ms=ulid_time_ms(job.compaction_id)))
        log.info("worker: executing [db=%s, id=%s, sources=%d, destination=%d, ranges=%d, "
                 "resumed=%d]", db.name, ulid_to_str(job.compaction_id), len(spec.sources),
                 spec.destination, len(work), resumed)
        runner = _ProgressRunner(self.runner or ThreadTaskRunner(self.slots), self.slots, job,
                                 index_of)
        t, wall = time.perf_counter(), time.time()
        results, _runs = execute_tasks(runner, tasks, cs.task_attempts)
        job.breakdown = execute_breakdown(wall, time.perf_counter() - t,
                                          [r.times for r in results])
        for r in results:
            m = r.metrics
            job.rows_in += m.rows_in
            job.rows_out += m.rows_out
            job.bytes_in += m.bytes_in
            job.bytes_out += m.bytes_out
        written = {index_of[r.index]: r.outputs for r in results}
        return outputs_in_order(work, written), resumed

    def _report_compacted(self, job: _Job, outputs: Sequence[SstHandle]) -> None:
        store = CompactionsStore(job.db.store, job.db.path)

        def still_ours(_state: Compactions) -> None:
            if job.lost.is_set():
                raise FencedError(f"compaction {job.label} was reclaimed: not reported")

        def done(cur: Versioned[Compactions]) -> Compactions | None:
            new = compacted(cur.value, job.compaction_id, self.worker_id,
                            self.clock.now_ms(), outputs)
            if new is None:
                raise FencedError(f"compaction {job.label} is no longer ours: not reported")
            return new

        self._forget(job)  # no heartbeat of this job may land after the report
        transact(store, done, clock=self.clock, fence=still_ours,
                 landed=lambda s: reported(s, job.compaction_id, self.worker_id, outputs),
                 what=f"report of compaction {job.label}")

    def _forget(self, job: _Job) -> None:
        """Drop ``job`` from the running jobs (not a newer claim of the same entry)."""
        key = (job.db.name, job.compaction_id)
        with self._jobs_lock:
            if self._jobs.get(key) is job:
                del self._jobs[key]

    def _release(self, job: _Job, *, reason: str) -> None:
        store = CompactionsStore(job.db.store, job.db.path)
        try:
            update_versioned(store, lambda cur: release(cur.value, job.compaction_id,
                                                        self.worker_id), clock=self.clock)
            self._stats_for(job.db).released += 1
            log.info("worker: handed back compaction [db=%s, id=%s, reason=%s]", job.db.name,
                     ulid_to_str(job.compaction_id), reason)
        except SlateError as exc:  # the coordinator reclaims it after the timeout
            self._note_error(job.db, exc, f"release {ulid_to_str(job.compaction_id)}")

    # ---------------------------------------------------------------- heartbeat
    def _heartbeat_loop(self) -> None:
        while not self._beat_stop.wait(self.options.heartbeat_interval_s):
            self.heartbeat_once()

    def heartbeat_once(self) -> None:
        """One heartbeat per database with running jobs (with their new contexts)."""
        by_db: dict[str, list[_Job]] = {}
        for job in self._running():
            if not job.lost.is_set():
                by_db.setdefault(job.db.name, []).append(job)
        for jobs in by_db.values():
            self._beat(jobs[0].db, jobs)

    def _beat(self, db: WorkerDb, jobs: Sequence[_Job]) -> None:
        progress = {j.compaction_id: j.take_ctx() for j in jobs}
        lost: set[Ulid] = set()

        def beat(cur: Versioned[Compactions]) -> Compactions | None:
            with self._jobs_lock:  # reported or released meanwhile: not ours to beat
                live = {cid: ctx for cid, ctx in progress.items()
                        if (db.name, cid) in self._jobs}
            new, gone = heartbeat(cur.value, self.worker_id, self.clock.now_ms(), live)
            lost.clear()
            lost.update(gone)
            return new

        try:
            update_versioned(CompactionsStore(db.store, db.path), beat, clock=self.clock)
        except SlateError as exc:
            for j in jobs:  # publish the context again with the next beat
                if progress.get(j.compaction_id) is not None:
                    with j.lock:
                        j.ctx_dirty = True
            self._note_error(db, exc, "heartbeat")
            return
        landed = self.clock.monotonic_s()
        for j in jobs:
            if j.compaction_id not in lost:
                j.beat_at = landed
            if j.compaction_id in lost:
                j.lost.set()
                log.warning("worker: compaction %s is no longer ours (reclaimed or claimed "
                            "by another worker); stopping it", j.label)

    # ------------------------------------------------------------------- report
    def report(self, seconds: float) -> dict[str, Any]:
        return worker_report(self.worker_id, self.polls,
                             [(db.name, self._stats_for(db)) for db in self._dbs], seconds)

    def exit_code(self) -> int:
        """The process exit code of a run that stopped by ``until_idle``: the first
        database's :attr:`DbStats.exit_code` that is not 0 (a declined entry, a job left
        handed back after failing, a failing poll), else 0. Other stops exit 0 (their
        report and status file still count every declined entry)."""
        if not self.options.until_idle:
            return EXIT_OK
        return first_problem(self._stats_for(db) for db in self._dbs)

    def status(self, *, final: bool = False) -> dict[str, Any]:
        """The status file's content (:func:`worker_status`)."""
        state = "stopped" if final else "stopping" if self._stop.is_set() else "running"
        running = self._running()
        now = self.clock.monotonic_s()
        return worker_status(
            self.worker_id, state=state, started_ms=self._started_ms,
            now_ms=self.clock.now_ms(), polls=self.polls,
            databases=[(db.name, self._stats_for(db), [
                RunningJob(ulid_to_str(j.compaction_id), len(j.work), len(j.written),
                           round(max(0.0, now - j.beat_at), 3))
                for j in running if j.db.name == db.name]) for db in self._dbs])

    def write_status(self, *, final: bool = False) -> None:
        """Write the status file (when configured); a failure is logged, not raised."""
        if self.options.status_file is None:
            return
        try:
            write_status(self.options.status_file, self.status(final=final))
        except OSError as exc:
            log.warning("worker: could not write the status file [path=%s, error=%s]",
                        self.options.status_file, exc)
