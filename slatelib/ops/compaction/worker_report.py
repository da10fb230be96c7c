"""Worker mode's accounting: per database counters (:class:`DbStats`), the report, the
status file's content and the exit code of a ``--until-idle`` run. Pure (no I/O).

A scheduled entry the worker will not execute is *declined* and counted here, so that no
entry is ever left unclaimed without a word (docs/rfcs/0009-compaction-worker.md).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slatelib.exit_codes import EXIT_DATA, EXIT_NAMES, EXIT_OK
from slatelib.ids import Ulid
from slatelib.ops.compaction.service import iso_ms

JOBS_KEPT = 200
"""Jobs listed per database in the report (the counters cover all of them)."""
DECLINED_LISTED = 50
"""Declined entries listed per database in the report and status (all are counted)."""
TOTALS = ("claimed", "compacted", "released", "lost", "failed", "declined", "rows_in",
          "rows_out", "bytes_in", "bytes_out")


@dataclass
class DbStats:
    """What the worker did, and left undone, for one database."""

    claimed: int = 0
    compacted: int = 0
    released: int = 0
    lost: int = 0
    failed: int = 0
    rows_in: int = 0
    rows_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    ranges_resumed: int = 0
    last_error: dict[str, str] | None = None
    poll_error_code: int = EXIT_OK
    """The exit code of the last poll's failure (0 once a poll succeeds)."""
    failed_entries: dict[Ulid, int] = field(default_factory=dict)
    """Entries handed back after failing here, with their exit code, until one of our
    later runs of the entry compacts it."""
    jobs: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=JOBS_KEPT))
    """The latest jobs (a standing worker runs for days: older ones are only counted)."""
    declined: dict[Ulid, dict[str, Any]] = field(default_factory=dict)
    """Scheduled entries this worker will not execute, by id (each logged once)."""
    last_poll_ms: int | None = None

    @property
    def exit_code(self) -> int:
        """What this database's work left undone says (0: nothing): a declined entry is
        unsupported data (5), else the code of a job handed back after failing, else of
        the last poll's failure."""
        if self.declined:
            return EXIT_DATA
        for code in self.failed_entries.values():
            return code
        return self.poll_error_code



@dataclass(frozen=True)
class RunningJob:
    """A job the worker runs now, as the status file shows it."""

    id: str
    ranges: int
    ranges_done: int
    heartbeat_age_s: float = 0.0
    """Seconds since the job's last heartbeat (or its claim) landed."""


def db_entry(name: str, s: DbStats) -> dict[str, Any]:
    """A database's entry of the report."""
    code = s.exit_code
    entry: dict[str, Any] = {
        "db": name, "status": EXIT_NAMES.get(code, "error"), "exit_code": code,
        "claimed": s.claimed, "compacted": s.compacted, "released": s.released,
        "lost": s.lost, "failed": s.failed, "declined": len(s.declined),
        "rows_in": s.rows_in, "rows_out": s.rows_out, "bytes_in": s.bytes_in,
        "bytes_out": s.bytes_out, "ranges_resumed": s.ranges_resumed,
        "declined_entries": list(s.declined.values())[-DECLINED_LISTED:],
        "jobs": list(s.jobs)}
    if s.last_error:
        entry["last_error"] = s.last_error
    return entry


def _totals(entries: Iterable[dict[str, Any]]) -> dict[str, int]:
    totals = dict.fromkeys(TOTALS, 0)
    for e in entries:
        for k in TOTALS:
            totals[k] += int(e[k])
    return totals


def worker_report(worker_id: str, polls: int, databases: Sequence[tuple[str, DbStats]],
                  seconds: float) -> dict[str, Any]:
    """The report of a worker run (docs/guides/worker-and-service.md, "Worker mode")."""
    dbs = [db_entry(name, s) for name, s in databases]
    return {"mode": "worker", "worker_id": worker_id, "polls": polls,
            "totals": _totals(dbs), "databases": dbs, "seconds": round(seconds, 3)}


def worker_status(worker_id: str, *, state: str, started_ms: int, now_ms: int, polls: int,
                  databases: Sequence[tuple[str, DbStats, Sequence[RunningJob]]],
                  ) -> dict[str, Any]:
    """The status file's content: the worker's state, and per database its counters,
    running jobs and declined entries (no job history)."""
    dbs = []
    for name, s, running in databases:
        entry = db_entry(name, s)
        entry.pop("jobs")
        entry["running"] = [{"id": j.id, "ranges": j.ranges, "ranges_done": j.ranges_done,
                             "heartbeat_age_s": j.heartbeat_age_s} for j in running]
        entry["last_poll_at"] = None if s.last_poll_ms is None else iso_ms(s.last_poll_ms)
        dbs.append(entry)
    return {"worker": "slatelib compaction worker", "worker_id": worker_id,
            "pid": os.getpid(), "state": state, "started_at": iso_ms(started_ms),
            "updated_at": iso_ms(now_ms), "polls": polls, "totals": _totals(dbs),
            "running": sum(len(r) for _, _, r in databases), "databases": dbs}


def first_problem(stats: Iterable[DbStats]) -> int:
    """The first :attr:`DbStats.exit_code` that is not 0, else 0."""
    for s in stats:
        if s.exit_code != EXIT_OK:
            return s.exit_code
    return EXIT_OK
