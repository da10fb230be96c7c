"""Metric families from what slatelib already produces: a job's report, the worker's or
the service's status, a database's stats. Pure: data in, ``prometheus_client`` metric
families out (plain objects; nothing is registered, served or written here).

Each builder tolerates missing keys (an older report, a job without phases, a report
without ``store_requests``): a value that is not there gives no sample, never a zero that
would look measured.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from slatelib.exit_codes import EXIT_NAMES, exit_name
from slatelib.metrics.catalog import metric

__all__ = ["REQUEST_KINDS", "FamilySet", "L0LimitClock", "db_stats_families",
           "process_request_families", "run_families", "standing_families"]

OUTCOMES = tuple(EXIT_NAMES[c] for c in sorted(EXIT_NAMES))
SERVICE_STATES = ("idle", "queued", "running", "backoff", "refused")
REQUEST_KINDS = ("get", "ranged_get", "head", "put", "conditional_put", "list", "delete",
                 "multi_delete")
"""The store request kinds (as S3 bills them; the report's ``store_requests`` shape)."""


class FamilySet:
    """Families by name, created from the catalog on first use, in first-use order."""

    def __init__(self) -> None:
        self._by_name: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}

    def add(self, name: str, value: float | int | None, **labels: str) -> None:
        """One sample of ``name`` (``value`` None: none). ``labels`` must be exactly the
        catalog's label names.

        Raises:
            KeyError: an unknown metric.
            ValueError: labels other than the catalog's.
        """
        if value is None:
            return
        m = metric(name)
        if tuple(labels) != m.labels:
            raise ValueError(f"{m.name}: labels {tuple(labels)} != {m.labels}")
        fam = self._by_name.get(m.name)
        if fam is None:
            cls = CounterMetricFamily if m.kind == "counter" else GaugeMetricFamily
            fam = self._by_name[m.name] = cls(m.name, m.help, labels=list(m.labels))
        fam.add_metric([labels[k] for k in m.labels], float(value))

    def families(self) -> list[Metric]:
        return list(self._by_name.values())


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


# ----------------------------------------------------------------------------- batch runs
def _store_requests(out: FamilySet, prefix: str, sr: Any, **labels: str) -> None:
    """``store_requests`` (the shared request-report shape), when present."""
    if not isinstance(sr, Mapping):
        return
    for kind, n in sorted((sr.get("requests") or {}).items()):
        out.add(f"{prefix}_store_requests", _num(n), **labels, kind=str(kind))
    out.add(f"{prefix}_store_bytes_read", _num(sr.get("bytes_read")), **labels)
    out.add(f"{prefix}_store_bytes_written", _num(sr.get("bytes_written")), **labels)
    out.add(f"{prefix}_retries", _num(sr.get("retries")), **labels)


def _phases(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """Seconds per phase: ``phases_s`` (compact, gc, rescale) or a ``seconds`` mapping
    (export); without ``total``, which is the run's seconds."""
    for key in ("phases_s", "seconds"):
        v = entry.get(key)
        if isinstance(v, Mapping):
            return {k: s for k, s in v.items() if k != "total"}
    return {}


def _db_seconds(entry: Mapping[str, Any]) -> float | None:
    s = _num(entry.get("seconds"))
    if s is not None:
        return s
    for key in ("phases_s", "seconds"):
        v = entry.get(key)
        if isinstance(v, Mapping):
            return _num(v.get("total")) if "total" in v else \
                sum(x for x in (_num(y) for y in v.values()) if x is not None)
    return None


def _io(job: str, entry: Mapping[str, Any]) -> dict[str, float | None]:
    """Rows and bytes in and out of one database entry, by job."""
    if job == "export":  # rows and bytes written to the lake
        return {"rows_out": _num(entry.get("rows")), "bytes_out": _num(entry.get("bytes"))}
    if job == "rescale":  # a target's keys and bytes
        return {"rows_out": _num(entry.get("keys")), "bytes_out": _num(entry.get("bytes"))}
    return {k: _num(entry.get(k)) for k in ("rows_in", "rows_out", "bytes_in", "bytes_out")}


def _outcome(out: FamilySet, name: str, code: int, **labels: str) -> None:
    mine = exit_name(code)
    for o in OUTCOMES:
        out.add(name, 1 if o == mine else 0, **labels, outcome=o)


def run_families(report: Mapping[str, Any], *, now_s: float,
                 databases: Iterable[str] | None = None,
                 whole_run: bool = True) -> list[Metric]:
    """The families of one batch run from its report (the shape every job shares,
    :mod:`slatelib.ops.job_report`): per database (labels ``job``, ``db``) and for the
    whole run (label ``job``). ``now_s``: the finish time (Unix seconds). ``databases``:
    only these entries (None: all); ``whole_run``: with the whole-run families (the
    Pushgateway groups take them apart)."""
    job = str(report.get("job", "unknown"))
    out = FamilySet()
    only = None if databases is None else set(databases)
    for entry in report.get("databases") or []:
        if not isinstance(entry, Mapping) or entry.get("db") is None:
            continue
        db = str(entry["db"])
        if only is not None and db not in only:
            continue
        jd = {"job": job, "db": db}
        for k, v in _io(job, entry).items():
            out.add(f"run_{k}", v, **jd)
        if job == "gc":
            totals = entry.get("totals") or {}
            dry = bool(report.get("dry_run", entry.get("dry_run")))
            n, b = ("to_delete", "to_delete_bytes") if dry else ("deleted", "deleted_bytes")
            out.add("run_deleted_objects", _num(totals.get(n)), **jd)
            out.add("run_deleted_bytes", _num(totals.get(b)), **jd)
        out.add("run_seconds", _db_seconds(entry), **jd)
        for phase, s in sorted(_phases(entry).items()):
            out.add("run_phase_seconds", _num(s), **jd, phase=str(phase))
        code = entry.get("exit_code")
        if not isinstance(code, int):
            code = report.get("exit_code") if isinstance(report.get("exit_code"), int) else None
        if code is not None:
            out.add("run_exit_code", code, **jd)
            _outcome(out, "run_outcome", code, **jd)
        _store_requests(out, "run", entry.get("store_requests"), **jd)
        out.add("run_finished_timestamp_seconds", now_s, **jd)
    if whole_run:
        _job_families(out, job, report, now_s)
    return out.families()


def _job_families(out: FamilySet, job: str, report: Mapping[str, Any], now_s: float) -> None:
    j = {"job": job}
    out.add("job_seconds", _num(report.get("seconds")), **j)
    phases = report.get("phases_s")
    if isinstance(phases, Mapping):
        for phase, s in sorted(phases.items()):
            if phase != "total":
                out.add("job_phase_seconds", _num(s), **j, phase=str(phase))
    code = report.get("exit_code")
    if not isinstance(code, int):
        code = next((c for c, n in EXIT_NAMES.items() if n == report.get("status")), None)
    if code is not None:
        out.add("job_exit_code", code, **j)
        _outcome(out, "job_outcome", code, **j)
    totals = report.get("totals") or {}
    out.add("job_databases", _num(totals.get("databases")), **j)
    out.add("job_failed_databases", _num(totals.get("failed")), **j)
    _store_requests(out, "job", report.get("store_requests"), **j)
    out.add("job_finished_timestamp_seconds", now_s, **j)


# ------------------------------------------------------------------ worker and service
class L0LimitClock:
    """Seconds each database's L0 spent at or above ``limit``: each observation of an L0
    depth at time ``t`` charges the time since the previous observation to the previous
    depth (the depth holds until the next poll shows another)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._last: dict[str, tuple[int, float]] = {}
        self._seconds: dict[str, float] = {}

    def observe(self, db: str, l0: int | None, t: float) -> None:
        prev = self._last.get(db)
        if prev is not None and prev[0] >= self.limit and t > prev[1]:
            self._seconds[db] = self._seconds.get(db, 0.0) + (t - prev[1])
        else:
            self._seconds.setdefault(db, 0.0)
        if l0 is None:
            self._last.pop(db, None)
        else:
            self._last[db] = (l0, t)

    def seconds(self, db: str) -> float | None:
        """Seconds at the limit so far (None: ``db`` never observed)."""
        return self._seconds.get(db)


def _iso_s(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def standing_families(status: Mapping[str, Any], *, l0: L0LimitClock | None = None,
                      ) -> list[Metric]:
    """The families of the worker's or the service's status (the content of its status
    file: ``worker_status`` or ``CompactionService.status``), labelled by ``db``.
    ``l0``: the clock of time at the L0 limit (fed by the caller: the service's polls, or
    the worker's per-database stats)."""
    out = FamilySet()
    dbs = [d for d in status.get("databases") or [] if isinstance(d, Mapping)]
    out.add("compaction_databases", len(dbs))
    worker = "worker" in status
    if worker:
        out.add("compaction_polls", _num(status.get("polls")))
    if l0 is not None:
        out.add("compaction_l0_limit", l0.limit)
    for d in dbs:
        db = {"db": str(d.get("db"))}
        for k in ("rows_in", "rows_out", "bytes_in", "bytes_out"):
            out.add(f"compaction_{k}", _num(d.get(k)), **db)
        out.add("compaction_last_poll_timestamp_seconds", _iso_s(d.get("last_poll_at")), **db)
        if worker:
            _worker_db(out, d, db)
        else:
            _service_db(out, d, db)
        if l0 is not None:
            out.add("compaction_l0_at_limit_seconds", l0.seconds(db["db"]), **db)
    return out.families()


def _worker_db(out: FamilySet, d: Mapping[str, Any], db: dict[str, str]) -> None:
    running = [r for r in d.get("running") or [] if isinstance(r, Mapping)]
    out.add("compaction_jobs_running", len(running), **db)
    out.add("compaction_jobs_claimed", _num(d.get("claimed")), **db)
    for outcome in ("compacted", "failed", "released", "lost"):
        out.add("compaction_jobs_finished", _num(d.get(outcome)), **db, outcome=outcome)
    out.add("compaction_jobs_lost", _num(d.get("lost")), **db)
    out.add("compaction_jobs_declined", _num(d.get("declined")), **db)
    ages = [a for a in (_num(r.get("heartbeat_age_s")) for r in running) if a is not None]
    out.add("compaction_heartbeat_lag_seconds", max(ages, default=0.0), **db)


def _service_db(out: FamilySet, d: Mapping[str, Any], db: dict[str, str]) -> None:
    state = d.get("state")
    out.add("compaction_jobs_running", 1 if d.get("running") else 0, **db)
    for outcome, key in (("committed", "compactions"), ("failed", "errors"),
                         ("refused", "refusals"), ("abandoned", "abandoned")):
        out.add("compaction_jobs_finished", _num(d.get(key)), **db, outcome=outcome)
    for s in SERVICE_STATES:
        out.add("compaction_db_state", 1 if s == state else 0, **db, state=s)
    out.add("compaction_l0_ssts", _num(d.get("l0")), **db)
    out.add("compaction_sorted_runs", _num(d.get("sorted_runs")), **db)


def process_request_families(counts: Mapping[str, Any]) -> list[Metric]:
    """The process's store requests so far (counters; every kind, zeros included) from
    flat counts: ``{kind: n, "bytes_read": n, "bytes_written": n, "retries": n}``."""
    out = FamilySet()
    for kind in REQUEST_KINDS:
        out.add("compaction_store_requests", _num(counts.get(kind, 0)), kind=kind)
    out.add("compaction_store_bytes_read", _num(counts.get("bytes_read", 0)))
    out.add("compaction_store_bytes_written", _num(counts.get("bytes_written", 0)))
    out.add("compaction_store_retries", _num(counts.get("retries", 0)))
    return out.families()


# ----------------------------------------------------------------------------- databases
DB_GAUGES = (("db_l0_ssts_max_tree", "l0_ssts_max_tree"), ("db_sorted_runs", "sorted_runs"),
             ("db_sst_views", "sst_views"), ("db_external_dbs", "external_dbs"),
             ("db_checkpoints", "checkpoints"),
             ("db_oldest_checkpoint_age_seconds", "oldest_checkpoint_age_s"),
             ("db_manifest_versions", "manifest_versions"),
             ("db_wal_ssts_to_replay", "wal_ssts_to_replay"),
             ("db_wal_ssts_replayed", "wal_ssts_replayed"),
             ("db_live_bytes", "live_sst_bytes"),
             ("db_gc_reclaimable_bytes", "gc_reclaimable_bytes"),
             ("db_gc_reclaimable_objects", "gc_reclaimable_objects"))
"""Per-database gauges and the :class:`slatelib.core.db_stats.DbStats` field each shows."""


def db_stats_families(db: str, stats: Mapping[str, Any] | None, *,
                      errors: int = 0) -> list[Metric]:
    """The per-database families of one database (label ``db``) from its stats
    (:meth:`DbStats.to_dict`; None: not collected yet, or the last collection failed:
    only ``db_stats_errors``). ``errors``: consecutive failed collections."""
    out = FamilySet()
    d = {"db": db}
    if stats is not None:
        by_segment = stats.get("l0_ssts_by_segment") or {}
        if isinstance(by_segment, Mapping) and by_segment:
            for seg, n in sorted(by_segment.items()):
                out.add("db_l0_ssts", _num(n), **d, segment=str(seg))
        else:
            out.add("db_l0_ssts", _num(stats.get("l0_ssts")), **d, segment="")
        for name, key in DB_GAUGES:
            out.add(name, _num(stats.get(key)), **d)
        last = _num(stats.get("last_compaction_ms"))
        out.add("db_last_compaction_timestamp_seconds", None if last is None else last / 1000,
                **d)
        holder = stats.get("compactor_holder")
        if isinstance(holder, str) and holder != "unknown":
            out.add("db_foreign_compactor", 1 if holder == "foreign" else 0, **d)
        now = _num(stats.get("now_ms"))
        out.add("db_stats_timestamp_seconds", None if now is None else now / 1000, **d)
    out.add("db_stats_errors", errors, **d)
    return out.families()
