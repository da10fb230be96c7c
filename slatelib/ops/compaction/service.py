"""Service mode: one long-running scheduler that keeps many databases compacted by 0.17's
size-tiered rules (``jobs/compact.py --service``). The I/O shell around
:func:`~slatelib.ops.compaction.run.run_compaction`.

For databases that have no compactor of their own (official writers opened with
``compactor_options = null``, slatelib writers). The loop, on the caller's thread:

- **polls** each database's latest compactions file and manifest every
  ``[service] poll_interval`` (L0 depth and sorted runs for the status) and plans with the
  size-tiered policy (:mod:`slatelib.core.size_tiered`, the ``[compaction]`` options
  ``min_compaction_sources``, ``max_compaction_sources``, ``include_size_threshold``);
- **runs** the planned compaction through :func:`run_compaction` (plan on the fenced state,
  fence, record, execute through the :class:`TaskRunner` the caller gives, commit) on a
  driver thread of its own: up to ``max_concurrent`` databases at once, never two
  compactions of one database (each run fences the previous one);
- **polls again at once** after a commit (size-tiered may have more to do: the new run can
  complete a series of runs), backs a failed database off for ``error_backoff``, and never
  stops for a database's error;
- **never takes a foreign compactor over**: a database whose compactor epoch a foreign
  compactor may hold (:mod:`slatelib.core.compactor_claim`; judged again only when an epoch
  changes) is skipped, shown as ``refused`` with the refusal in the status, and polled again
  after ``error_backoff``. Turn that compactor off and run one ``--takeover`` compaction to
  hand the database to the service;
- **writes a status file** (JSON, atomically: a temporary file in the same folder, then a
  rename) every ``status_interval``, and, with ``status_history`` (``[service]
  status_history``, ``--status-history``), appends each database's L0 depth and sorted runs
  to a bounded JSON Lines history at most once a minute and when it stops
  (:mod:`slatelib.ops.compaction.status_history`, charted by ``slate health``);
- **stops** on :meth:`CompactionService.request_stop` (what SIGTERM and SIGINT call, see
  :func:`stop_on_signals`), after ``run_for`` seconds, or with ``until_idle`` once every
  database was polled with nothing to do (or failed) since its last compaction and nothing
  runs. A stop starts nothing new and lets running compactions finish and commit. A second
  stop request abandons them: ``on_abandon`` is called (the Spark job cancels its jobs), a
  compaction whose tasks come back afterwards raises instead of committing, so its
  compactions entry is marked Failed and its outputs stay unreferenced for GC; one still
  running after ``abandon_grace_s`` is left to the process exit, and its Running entry is
  resolved by the next run's fence (:func:`slatelib.core.compaction_state.take_over`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import signal
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import Settings
from slatelib.core.compaction_plan import CompactionSpec, check_compactable, plan_compactions
from slatelib.core.compaction_state import abandoned
from slatelib.core.compactor_claim import ClaimVerdict
from slatelib.core.segments import trees
from slatelib.db_manifest import DbManifest
from slatelib.errors import CompactorActiveError, InvalidArgumentError, SlateError
from slatelib.exit_codes import (
    EXIT_COMPACTOR_ACTIVE,
    EXIT_ERROR,
    EXIT_OK,
    exit_code_for,
    exit_name,
)
from slatelib.objstore import ObjectStore, resolve_store
from slatelib.ops.compaction.guard import judge_compactor
from slatelib.ops.compaction.report import CompactionReport
from slatelib.ops.compaction.run import plan_options, run_compaction
from slatelib.ops.compaction.state import DbState, read_state
from slatelib.ops.compaction.status_history import StatusHistory
from slatelib.ops.engine import CompactionTask, TaskOutcome, TaskRunner, ThreadTaskRunner
from slatelib.paths import normalize_path
from slatelib.store.compactions_store import CompactionsStore

__all__ = [
    "POLICY",
    "CompactionService",
    "ServiceDb",
    "status_path",
    "stop_on_signals",
    "write_status",
]

log = logging.getLogger(__name__)

POLICY = "size-tiered"
"""The only policy the service schedules by (``l0`` would add a sorted run per poll)."""
HISTORY_KEPT = 100
"""Compactions listed per database in the final report (the newest ones)."""
POLL_THREADS = 8
"""Databases polled at once (each poll reads the latest compactions file and manifest;
every poll changes only its own database's entry)."""
MAX_WAIT_S = 0.25
"""Longest wait between two looks at the stop flags (signal handlers only set flags)."""
ABANDON_GRACE_S = 10.0
"""After a second stop request: how long abandoned compactions get to mark themselves
Failed before the service returns without them."""


@dataclass(frozen=True)
class ServiceDb:
    """One database of the service: ``name`` (unique, how it is reported: its URL), the
    path inside its store, the store (a URL or an open store) and the URL of its WAL store
    (``""``: its own store; None: the store's own, else ``[object_store] wal_store``)."""

    name: str
    path: str
    store: str | ObjectStore
    wal_store: str | None = None


def iso_ms(ms: int | None) -> str | None:
    """Unix milliseconds as an ISO 8601 UTC time (``2026-01-01T00:00:00.000Z``)."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def status_path(text: str | None) -> str | None:
    """The local file the status goes to (``""``/None: none). ``file://`` URLs are accepted.

    Raises:
        InvalidArgumentError: an object-store URL (the status file is written by a rename,
            which object stores do not have: give a local path, e.g. a mounted volume).
    """
    if not text:
        return None
    if text.startswith("file://"):
        text = text[len("file://"):]
        if not text.startswith("/"):
            raise InvalidArgumentError(f"status file {text!r}: use file:///absolute/path")
    elif "://" in text:
        raise InvalidArgumentError(f"status file {text!r}: only local paths are supported "
                                   "(it is replaced atomically by a rename)")
    return text


def write_status(path: str, status: dict[str, Any]) -> None:
    """Replace ``path`` with ``status`` as JSON atomically (temporary file, fsync, rename):
    a reader sees the previous status or the new one, never a partial file.

    Raises:
        OSError: the folder cannot be written.
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".slatelib-status-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(status, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class _Abandoned(SlateError):
    """A compaction's tasks came back after the service abandoned it: do not commit."""


@dataclass
class _Job:
    """One running compaction (a driver thread)."""

    sources: tuple[str, ...]
    destination: int | None
    started_mono: float
    started_ms: int
    thread: threading.Thread | None = None
    segments: tuple[str, ...] = ()
    """The segments compacted (SlateDB RFC-0024); empty for a database without segments."""


@dataclass(frozen=True)
class _Outcome:
    name: str
    report: CompactionReport | None
    error: BaseException | None
    seconds: float
    abandoned: bool


@dataclass
class _Db:
    """What the scheduler knows of one database. Only the scheduler thread touches it."""

    target: ServiceDb
    order: int
    store: ObjectStore | None = None
    present: bool = True  # in the latest discovery
    next_poll: float = 0.0
    queued_since: float | None = None
    settled: bool = False  # polled with nothing to do (or failed) since its last compaction
    running: _Job | None = None
    planned: list[CompactionSpec] | None = None
    verdict: ClaimVerdict | None = None
    last_state: DbState | None = None  # the last poll's (the next one lists from its versions)
    verdict_key: tuple[int, int | None] | None = None
    l0: int | None = None
    """L0 views of the deepest tree (the top-level one, or the segment with the most)."""
    sorted_runs: int | None = None
    """Sorted runs of the tree with the most."""
    segments: int = 0
    max_l0: int = 0
    max_sorted_runs: int = 0
    last_poll_ms: int | None = None
    last_compaction_ms: int | None = None
    last_error: dict[str, Any] | None = None
    last_code: int = EXIT_OK
    backoff_until: float | None = None
    compactions: int = 0
    errors: int = 0
    refusals: int = 0
    abandoned: int = 0
    rows_in: int = 0
    rows_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0.0
    history: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=HISTORY_KEPT))

    def state(self, now: float) -> str:
        if self.running is not None:
            return "running"
        if self.queued_since is not None:
            return "queued"
        if self.backoff_until is not None and now < self.backoff_until:
            return "refused" if self.last_code == EXIT_COMPACTOR_ACTIVE else "backoff"
        return "idle"


class CompactionService:
    """The service loop (see the module docstring). Build it, then :meth:`run` it.

    ``runner_factory(db)`` gives the task runner of one compaction of ``db`` (Spark executors
    in the job; by default a :class:`ThreadTaskRunner` of ``parallelism`` threads).
    ``discover``, when given, is called every ``[service] discover_interval`` and returns the
    full list of databases (new ones join; ones that are gone leave once idle).
    ``stop``: an event that requests a stop when set (as one :meth:`request_stop`).
    ``clock`` drives every interval and timestamp (tests pass a fake one and call
    :meth:`step`). ``on_status``, when given, is called with :meth:`status` after every
    pass (the ``/metrics`` endpoint's snapshot, :class:`slatelib.metrics.StandingMetrics`).

    Raises:
        InvalidArgumentError: no database, ``max_concurrent`` below 1, non-positive
            intervals, a negative ``run_for``, or a status file that is not a local path.
    """

    def __init__(
        self,
        databases: Sequence[ServiceDb],
        *,
        settings: Settings | None = None,
        max_concurrent: int | None = None,
        run_for: float | None = None,
        until_idle: bool = False,
        status_file: str | None = None,
        status_history: str | None = None,
        parallelism: int | None = None,
        max_sst_size: int | None = None,
        runner_factory: Callable[[ServiceDb], TaskRunner] | None = None,
        task_fn: Callable[[CompactionTask], TaskOutcome] | None = None,
        discover: Callable[[], Sequence[ServiceDb]] | None = None,
        on_abandon: Callable[[], None] | None = None,
        abandon_grace_s: float = ABANDON_GRACE_S,
        stop: threading.Event | None = None,
        clock: Clock = SYSTEM_CLOCK,
        on_status: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        ss = self.settings.service
        self.max_concurrent = (self.settings.compaction.db_concurrency
                               if max_concurrent is None else max_concurrent)
        if self.max_concurrent < 1:
            raise InvalidArgumentError(
                f"--max-concurrent must be at least 1, got {self.max_concurrent}")
        for name in ("poll_interval", "status_interval", "discover_interval"):
            if not getattr(ss, name) > 0:
                raise InvalidArgumentError(f"[service] {name} must be positive")
        if run_for is not None and run_for < 0:
            raise InvalidArgumentError(f"--run-for must not be negative, got {run_for}")
        if run_for is not None and until_idle:
            raise InvalidArgumentError("--run-for and --until-idle exclude each other")
        self.options = plan_options(self.settings, POLICY, None)  # validates the options
        self.run_for = run_for
        self.until_idle = until_idle
        self.status_file = status_path(status_file if status_file is not None
                                       else ss.status_file)
        history = status_path(status_history if status_history is not None
                              else ss.status_history)
        self.status_history = None if history is None else StatusHistory(history)
        self.parallelism = parallelism
        self.max_sst_size = max_sst_size
        self.runner_factory = runner_factory
        self.task_fn = task_fn
        self.discover = discover
        self.on_abandon = on_abandon
        self.abandon_grace_s = abandon_grace_s
        self.stop_event = stop
        self.clock = clock
        self.on_status = on_status
        self._dbs: dict[str, _Db] = {}
        self._add(databases)
        if not self._dbs:
            raise InvalidArgumentError("the service needs at least one database "
                                       "(--db, --dbs-file or --discover)")
        self._stores: dict[str, ObjectStore] = {}
        self._done: queue.SimpleQueue[_Outcome] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._abandon = threading.Event()
        self._stop_requests = 0
        self._stop_reasons: list[str] = []
        self._handled_stops = 0
        self._stop_event_seen = False
        self._stop_reason: str | None = None
        self._abandon_deadline: float | None = None
        self._started_mono: float | None = None
        self._started_ms = clock.now_ms()
        self._next_status = 0.0
        self._next_discover = 0.0
        self._deadline: float | None = None
        self._finished = False
        self._left_running: list[dict[str, Any]] = []
        self._pool: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ control
    def request_stop(self, reason: str = "requested") -> None:
        """Stop starting compactions and return once the running ones finished; a second
        call abandons them. Safe to call from a signal handler (it only sets flags)."""
        self._stop_reasons.append(reason)
        self._stop_requests += 1

    @property
    def stopping(self) -> bool:
        return self._stop_reason is not None

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every running compaction's thread ended (their outcomes are taken in
        by the next :meth:`step`). Returns False when one is still running after
        ``timeout``. For callers that drive :meth:`step` themselves (tests)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for db in self._running():
            thread = db.running.thread if db.running is not None else None
            if thread is not None:
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    return False
        return True

    def run(self) -> tuple[dict[str, Any], int]:
        """Run until stopped. Returns the final report and the exit code: 0 on a stop by
        request, signal or ``run_for``; with ``until_idle``, the code of the first database
        (in the given order) whose last attempt failed, else 0."""
        delay = self.step()
        while delay is not None:
            self._wake.wait(min(delay, MAX_WAIT_S))
            self._wake.clear()
            delay = self.step()
        return self.report()

    def step(self) -> float | None:
        """One pass of the scheduler: collect finished compactions, handle stop requests,
        discover, poll what is due, start compactions, write the status. Returns the seconds
        until something is due, or None once the service has stopped."""
        if self._finished:
            return None
        now = self.clock.monotonic_s()
        if self._started_mono is None:
            self._started_mono = now
            if self.run_for is not None:
                self._deadline = now + self.run_for
            self._next_discover = now + self.settings.service.discover_interval
            log.info("compaction service started [databases=%d, max_concurrent=%d, "
                     "policy=%s, status_file=%s]", len(self._dbs), self.max_concurrent,
                     POLICY, self.status_file)
        self._collect(now)
        self._check_stop(now)
        if not self.stopping:
            if self.discover is not None and now >= self._next_discover:
                self._rediscover()
                self._next_discover = now + self.settings.service.discover_interval
            to_poll = sorted((d for d in self._active() if d.running is None
                              and d.next_poll <= now), key=lambda d: (d.next_poll, d.order))
            if len(to_poll) > 1:  # each poll is a few reads: overlap them on object stores
                list(self._poll_pool().map(lambda d: self._poll(d, now), to_poll))
            elif to_poll:
                self._poll(to_poll[0], now)
            self._start_queued(now)
            if self.until_idle and not self._running() and all(
                    d.settled for d in self._active()):
                self._stop_reason = "until_idle"
                log.info("compaction service idle: every database polled with nothing to do")
        finished = self.stopping and not self._running()
        if (not finished and self._abandon_deadline is not None
                and now >= self._abandon_deadline):
            finished = True
            self._left_running = [self._running_entry(d, now) for d in self._running()]
            log.warning("compaction service left %d abandoned compactions running: their "
                        "compactions entries are resolved by the next run",
                        len(self._left_running))
        if finished or now >= self._next_status:
            self._write_status(now, final=finished)
            self._next_status = now + self.settings.service.status_interval
        if self.on_status is not None:  # the metrics endpoint's snapshot
            self.on_status(self.status(final=finished))
        if finished:
            self._finished = True
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            log.info("compaction service stopped [reason=%s, compactions=%d]",
                     self._stop_reason, sum(d.compactions for d in self._dbs.values()))
            return None
        due = [self._next_status]
        if not self.stopping:
            due += [d.next_poll for d in self._active() if d.running is None]
            if self.discover is not None:
                due.append(self._next_discover)
            if self._deadline is not None:
                due.append(self._deadline)
        if self._abandon_deadline is not None:
            due.append(self._abandon_deadline)
        return max(0.0, min(due) - now)

    # --------------------------------------------------------------- internals
    def _poll_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(POLL_THREADS, thread_name_prefix="slatelib-poll")
        return self._pool

    def _active(self) -> list[_Db]:
        return [d for d in self._dbs.values() if d.present]

    def _running(self) -> list[_Db]:
        return [d for d in self._dbs.values() if d.running is not None]

    def _add(self, databases: Sequence[ServiceDb]) -> None:
        seen = set()
        for t in databases:
            seen.add(t.name)
            db = self._dbs.get(t.name)
            if db is None:
                normalize_path(t.path, what="database path")
                self._dbs[t.name] = _Db(t, len(self._dbs))
                log.info("compaction service: database added [db=%s]", t.name)
            elif not db.present:
                db.present, db.settled, db.next_poll = True, False, 0.0
        for db in self._dbs.values():
            if db.target.name not in seen and db.present:
                db.present = False
                db.queued_since = None
                log.info("compaction service: database no longer discovered [db=%s]",
                         db.target.name)

    def _rediscover(self) -> None:
        assert self.discover is not None
        try:
            found = list(self.discover())
        except Exception as exc:  # keep the current list; try again at the next interval
            log.warning("compaction service: discovery failed, keeping %d databases [error=%s]",
                        len(self._active()), exc)
            return
        if found:
            self._add(found)
        else:
            log.warning("compaction service: discovery found no database, keeping %d",
                        len(self._active()))

    def _check_stop(self, now: float) -> None:
        """Act on new stop requests (the first stops, a later one abandons) and on
        ``run_for``."""
        if (self.stop_event is not None and self.stop_event.is_set()
                and not self._stop_event_seen):
            self._stop_event_seen = True
            self.request_stop("stop_event")
        while self._handled_stops < self._stop_requests:
            reason = self._stop_reasons[self._handled_stops]
            self._handled_stops += 1
            if self._handled_stops == 1:
                if not self.stopping:
                    self._stop_reason = reason
                log.info("compaction service stopping [reason=%s]: no new compactions, %d "
                         "running ones finish (stop again to abandon them)", reason,
                         len(self._running()))
            elif self._abandon_deadline is None and self._running():
                self._begin_abandon(now)
        if self._deadline is not None and now >= self._deadline and not self.stopping:
            self._stop_reason = "run_for"
            log.info("compaction service: --run-for elapsed, finishing %d running compactions",
                     len(self._running()))

    def _begin_abandon(self, now: float) -> None:
        log.warning("compaction service abandoning %d running compactions: their outputs "
                    "stay unreferenced (garbage for GC)", len(self._running()))
        self._abandon.set()
        self._abandon_deadline = now + self.abandon_grace_s
        if self.on_abandon is not None:
            try:
                self.on_abandon()
            except Exception as exc:
                log.warning("compaction service: cancelling running tasks failed [error=%s]",
                            exc)

    def _store(self, db: _Db) -> ObjectStore:
        if db.store is None:
            s = db.target.store
            if isinstance(s, str):
                if s not in self._stores:
                    self._stores[s] = resolve_store(s)
                db.store = self._stores[s]
            else:
                db.store = s
        return db.store

    def _poll(self, db: _Db, now: float) -> None:
        """Read the state, judge the compactor epoch when it changed, plan size-tiered."""
        root = db.target.path
        try:
            store = self._store(db)
            state = read_state(DbManifest(store, root), CompactionsStore(store, root),
                               db.last_state)  # unchanged versions are not read again
            db.last_state = state
            m = state.manifest.value
            # per tree (the top-level one, or each segment): the deepest L0 is what
            # stalls a writer at l0_max_ssts
            ts = trees(m)
            db.l0 = max(len(t.l0) for t in ts)
            db.sorted_runs = max(len(t.compacted) for t in ts)
            db.segments = len(m.segments or ())
            db.max_l0, db.max_sorted_runs = max(db.max_l0, db.l0), max(db.max_sorted_runs,
                                                                       db.sorted_runs)
            db.last_poll_ms = self.clock.now_ms()
            check_compactable(m)
            comp = None if state.compactions is None else state.compactions.value
            key = (m.compactor_epoch, None if comp is None else comp.compactor_epoch)
            if db.verdict is None or db.verdict_key != key:
                db.verdict = judge_compactor(store, root, state, self.clock)
                db.verdict_key = key
            if not db.verdict.may_fence:
                raise CompactorActiveError(db.verdict.refusal(root))
            specs = plan_compactions(m, comp, self.options)
        except Exception as exc:
            self._failed(db, exc, now)
            return
        db.next_poll = now + self.settings.service.poll_interval
        db.backoff_until = None
        if not specs and not abandoned(comp):
            db.settled, db.queued_since, db.planned = True, None, None
            return
        # work: compactions, or entries a killed run left Running (closed by a fence)
        db.settled = False
        db.planned = specs
        if db.queued_since is None:
            db.queued_since = now

    def _start_queued(self, now: float) -> None:
        queued = sorted((d for d in self._active() if d.queued_since is not None
                         and d.running is None), key=lambda d: (d.queued_since or 0.0, d.order))
        for db in queued:
            if len(self._running()) >= self.max_concurrent:
                return
            self._start(db, now)

    def _start(self, db: _Db, now: float) -> None:
        specs = db.planned or []
        job = _Job(tuple(str(s) for spec in specs for s in spec.sources),
                   specs[0].destination if len(specs) == 1 else None, now, self.clock.now_ms(),
                   segments=tuple(spec.segment_label for spec in specs if spec.segment))
        db.running, db.queued_since = job, None
        thread = threading.Thread(target=self._compact, args=(db.target, self._store(db)),
                                  name=f"slatelib-service-{db.order}", daemon=True)
        job.thread = thread
        log.info("compaction service: compacting [db=%s, sources=%s, destination=%s%s]",
                 db.target.name, ",".join(job.sources), job.destination,
                 f", segments={','.join(job.segments)}" if job.segments else "")
        thread.start()

    def _runner(self, target: ServiceDb) -> TaskRunner:
        if self.runner_factory is not None:
            inner = self.runner_factory(target)
        elif self.task_fn is not None:
            inner = ThreadTaskRunner(self.parallelism, task_fn=self.task_fn)
        else:
            inner = ThreadTaskRunner(self.parallelism)
        abandon = self._abandon

        def guarded(tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
            if abandon.is_set():
                raise _Abandoned(f"compaction of {target.name} abandoned before its tasks")
            out = inner(tasks)
            if abandon.is_set():
                raise _Abandoned(f"compaction of {target.name} abandoned: its outputs are "
                                 "not committed (garbage for GC)")
            return out

        return guarded

    def _compact(self, target: ServiceDb, store: ObjectStore) -> None:
        """A driver thread: one compaction, its outcome handed to the scheduler."""
        t0 = time.perf_counter()
        report: CompactionReport | None = None
        error: BaseException | None = None
        try:
            report = run_compaction(
                target.path, store, settings=self.settings, policy=POLICY,
                max_sst_size=self.max_sst_size, parallelism=self.parallelism,
                runner=self._runner(target), clock=self.clock, wal_store=target.wal_store)
        except Exception as exc:
            error = exc
            if not isinstance(exc, SlateError):
                log.error("compaction crashed [db=%s]\n%s", target.name, traceback.format_exc())
        self._done.put(_Outcome(target.name, report, error, time.perf_counter() - t0,
                                self._abandon.is_set()))
        self._wake.set()

    def _collect(self, now: float) -> None:
        while True:
            try:
                out = self._done.get_nowait()
            except queue.Empty:
                return
            db = self._dbs[out.name]
            cleanup = db.running is not None and not db.running.sources
            db.running = None
            if out.error is not None:
                if out.abandoned or isinstance(out.error, _Abandoned):
                    db.abandoned += 1
                    log.warning("compaction abandoned [db=%s, error=%s]", out.name, out.error)
                else:
                    self._failed(db, out.error, now)
                continue
            assert out.report is not None
            self._finished_report(db, out.report, out.seconds, now, cleanup=cleanup)

    def _finished_report(self, db: _Db, r: CompactionReport, seconds: float, now: float,
                         *, cleanup: bool) -> None:
        db.last_code, db.backoff_until = EXIT_OK, None
        if r.status != "committed":
            if cleanup:  # entries of a killed run closed: their sources are free now
                db.next_poll, db.settled = now, False
            else:  # the fenced state had nothing to do after all
                db.next_poll = now + self.settings.service.poll_interval
                db.settled = True
            return
        db.compactions += 1
        db.rows_in += r.rows_in
        db.rows_out += r.rows_out
        db.bytes_in += r.bytes_in
        db.bytes_out += r.bytes_out
        db.seconds += seconds
        db.last_compaction_ms = self.clock.now_ms()
        db.next_poll = now  # size-tiered may have more to do right away
        db.settled = False
        entry: dict[str, Any] = {"compaction_id": r.compaction_id, "sources": list(r.sources),
                 "destination": r.destination, "rows_in": r.rows_in, "rows_out": r.rows_out,
                 "bytes_in": r.bytes_in, "bytes_out": r.bytes_out, "tasks": r.tasks,
                 "seconds": round(seconds, 3), "finished_at": iso_ms(db.last_compaction_ms),
                 "execute_breakdown": dict(r.execute_breakdown)}
        segments = [c for c in r.compactions if c.get("segment") != "(top-level)"]
        if segments:  # one compaction per segment (SlateDB RFC-0024)
            entry["segments"] = [{k: c.get(k) for k in ("segment", "compaction_id",
                                                        "sources", "destination")}
                                 for c in segments]
        db.history.append(entry)
        log.info("compaction committed [db=%s, sources=%s, destination=%s, rows_in=%d, "
                 "rows_out=%d, bytes_in=%d, bytes_out=%d, seconds=%.3f]", db.target.name,
                 ",".join(r.sources), r.destination, r.rows_in, r.rows_out, r.bytes_in,
                 r.bytes_out, seconds)

    def _failed(self, db: _Db, exc: BaseException, now: float) -> None:
        code = exit_code_for(exc) if isinstance(exc, SlateError) else EXIT_ERROR
        refused = isinstance(exc, CompactorActiveError)
        if refused:
            db.refusals += 1
        else:
            db.errors += 1
        db.last_code = code
        db.last_error = {"type": type(exc).__name__, "message": str(exc),
                         "status": exit_name(code), "at": iso_ms(self.clock.now_ms())}
        backoff = self.settings.service.error_backoff
        db.next_poll = db.backoff_until = now + backoff
        db.settled, db.queued_since, db.planned = True, None, None
        log.warning("compaction service: %s [db=%s, backoff_s=%s, error=%s: %s]",
                    "refused" if refused else "failed", db.target.name, backoff,
                    type(exc).__name__, exc)

    # ------------------------------------------------------------------ output
    def _running_entry(self, db: _Db, now: float) -> dict[str, Any]:
        job = db.running
        assert job is not None
        out = {"db": db.target.name, "sources": list(job.sources),
               "destination": job.destination, "started_at": iso_ms(job.started_ms),
               "seconds": round(now - job.started_mono, 3)}
        if job.segments:
            out["segments"] = list(job.segments)
        return out

    def _db_status(self, db: _Db, now: float) -> dict[str, Any]:
        return {
            "db": db.target.name, "path": db.target.path, "state": db.state(now),
            "l0": db.l0, "sorted_runs": db.sorted_runs, "segments": db.segments,
            "compactor": None if db.verdict is None else db.verdict.holder.value,
            "running": None if db.running is None else self._running_entry(db, now),
            "last_poll_at": iso_ms(db.last_poll_ms),
            "last_compaction_at": iso_ms(db.last_compaction_ms),
            "compactions": db.compactions, "errors": db.errors, "refusals": db.refusals,
            "abandoned": db.abandoned, "rows_in": db.rows_in, "rows_out": db.rows_out,
            "bytes_in": db.bytes_in, "bytes_out": db.bytes_out, "last_error": db.last_error,
        }

    def _totals(self) -> dict[str, int]:
        dbs = list(self._dbs.values())
        return {"databases": len(self._active()), "running": len(self._running()),
                "queued": sum(1 for d in dbs if d.queued_since is not None),
                "compactions": sum(d.compactions for d in dbs),
                "errors": sum(d.errors for d in dbs), "refusals": sum(d.refusals for d in dbs),
                "abandoned": sum(d.abandoned for d in dbs),
                "rows_in": sum(d.rows_in for d in dbs), "rows_out": sum(d.rows_out for d in dbs),
                "bytes_in": sum(d.bytes_in for d in dbs),
                "bytes_out": sum(d.bytes_out for d in dbs)}

    def status(self, *, final: bool = False) -> dict[str, Any]:
        """The status file's content (see docs/guides/worker-and-service.md, "Service mode")."""
        now = self.clock.monotonic_s()
        state = "stopped" if final else "abandoning" if self._abandon.is_set() \
            else "stopping" if self.stopping else "running"
        return {
            "service": "slatelib compaction service", "pid": os.getpid(), "state": state,
            "stop_reason": self._stop_reason, "policy": POLICY,
            "max_concurrent": self.max_concurrent, "started_at": iso_ms(self._started_ms),
            "updated_at": iso_ms(self.clock.now_ms()),
            "status_history": None if self.status_history is None else self.status_history.path,
            "databases": [self._db_status(d, now) for d in self._active()],
            "running": [self._running_entry(d, now) for d in self._running()],
            "totals": self._totals(),
        }

    def _write_status(self, now: float, *, final: bool) -> None:
        h = self.status_history
        if h is not None and (final or h.due(now)):  # the state at a stop is always kept
            try:
                h.append(self.clock.now_ms(), now, {d.target.name: (d.l0, d.sorted_runs)
                                                    for d in self._active()})
            except OSError as exc:
                log.warning("compaction service: writing the status history failed "
                            "[path=%s, error=%s]", h.path, exc)
        if self.status_file is None:
            return
        try:
            write_status(self.status_file, self.status(final=final))
        except OSError as exc:  # the service goes on; the next interval tries again
            log.warning("compaction service: writing the status file failed [path=%s, "
                        "error=%s]", self.status_file, exc)

    def report(self) -> tuple[dict[str, Any], int]:
        """The final report (per database: compactions, rows, bytes, errors, the newest
        compactions) and the exit code (see :meth:`run`)."""
        dbs = sorted(self._dbs.values(), key=lambda d: d.order)
        code = EXIT_OK
        if self._stop_reason == "until_idle":
            code = next((d.last_code for d in dbs if d.last_code != EXIT_OK), EXIT_OK)
        started = self._started_mono if self._started_mono is not None \
            else self.clock.monotonic_s()
        databases = [{
            "db": d.target.name, "status": exit_name(d.last_code), "exit_code": d.last_code,
            "compactions": d.compactions, "errors": d.errors, "refusals": d.refusals,
            "abandoned": d.abandoned, "rows_in": d.rows_in, "rows_out": d.rows_out,
            "bytes_in": d.bytes_in, "bytes_out": d.bytes_out, "seconds": round(d.seconds, 3),
            "l0": d.l0, "sorted_runs": d.sorted_runs, "max_l0": d.max_l0,
            "max_sorted_runs": d.max_sorted_runs,
            "compactor": None if d.verdict is None else d.verdict.holder.value,
            "last_compaction_at": iso_ms(d.last_compaction_ms), "last_error": d.last_error,
            "history": list(d.history),
        } for d in dbs]
        report = {"job": "compact", "mode": "service", "status": exit_name(code),
                  "stop_reason": self._stop_reason, "policy": POLICY,
                  "totals": self._totals(), "databases": databases,
                  "abandoned_running": self._left_running,
                  "seconds": round(self.clock.monotonic_s() - started, 3)}
        return report, code


@contextlib.contextmanager
def stop_on_signals(stop: CompactionService | Callable[[str], object],
                    signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """Route ``signals`` to ``stop(signal name)`` while the block runs, then restore the
    previous handlers. A service's :meth:`CompactionService.request_stop` is the default
    (the first signal stops gracefully, the second abandons); the worker passes its own.
    Only in the main thread (elsewhere Python cannot install handlers: nothing is routed)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    on_signal = stop.request_stop if isinstance(stop, CompactionService) else stop

    def handler(signum: int, frame: FrameType | None) -> None:
        on_signal(signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
