"""The report every maintenance run prints, shared by the Spark jobs (``jobs/``) and
``slate compact`` / ``slate gc``, so that their shapes cannot drift.

Every report has the same top level: ``job``, ``status`` (the exit name of
:mod:`slatelib.exit_codes`), ``headline`` (a one-line human summary), ``seconds`` (the wall
time of the run), then what is particular to the job (e.g. ``dry_run``), ``totals`` and
``databases``: one entry per database with ``db``, ``status``, the job's per-database fields
and ``exit_code``. Compaction's own outcome (``committed``, ``dry_run``, ``nothing_to_do``
...) is a database entry's ``outcome``. Pure: building a report does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slatelib.core.humanize import fmt_bytes, fmt_count, fmt_seconds
from slatelib.exit_codes import EXIT_OK, exit_name

__all__ = ["Headline", "compact_db_fields", "compact_headline", "compact_report",
           "db_entry", "failed_suffix", "gc_db_fields",
           "task_share_suffix", "requests_suffix", "gc_headline", "gc_report",
           "job_report"]

Headline = Callable[[dict[str, Any]], str]

COMPACT_TOTALS = ("rows_in", "rows_out", "bytes_in", "bytes_out", "versions_dropped",
                  "tombstones_dropped")


def db_entry(name: str, code: int, fields: dict[str, Any], *,
             seconds: float | None = None) -> dict[str, Any]:
    """One database's entry: ``db``, ``status`` (the exit name of ``code``), ``fields``,
    ``exit_code``, and ``seconds`` unless ``fields`` has its own."""
    entry: dict[str, Any] = {"db": name, "status": exit_name(code), **fields,
                             "exit_code": code}
    if seconds is not None:
        entry.setdefault("seconds", round(seconds, 3))
    return entry


def failed_suffix(report: dict[str, Any]) -> str:
    """``; 1 of 3 databases failed (data_error)``, or nothing when none failed."""
    failed = [r for r in report.get("databases", []) if r.get("exit_code")]
    if not failed:
        return ""
    names = sorted({str(r.get("status")) for r in failed})
    return f"; {len(failed)} of {len(report['databases'])} databases failed ({', '.join(names)})"


def requests_suffix(report: dict[str, Any]) -> str:
    """``; 1,234 store requests`` when the report counts them (``store_requests``,
    docs/request-accounting.md), else nothing."""
    counted = report.get("store_requests")
    if not isinstance(counted, dict) or "total" not in counted:
        return ""
    n = int(counted["total"])
    return f"; {fmt_count(n)} store request{'s' if n != 1 else ''}"


def job_report(job: str, code: int, *, totals: dict[str, Any], databases: list[dict[str, Any]],
               seconds: float, headline: Headline | None = None,
               **extra: Any) -> dict[str, Any]:
    """A job's report in the shape every job shares: ``job``, ``status``, ``headline``,
    ``seconds``, ``extra``, ``totals``, ``databases`` (``headline`` is computed from the
    rest, and left out without one)."""
    report: dict[str, Any] = {"job": job, "status": exit_name(code),
                              "headline": "", "seconds": round(seconds, 3), **extra,
                              "totals": totals, "databases": databases}
    if "store_requests" in report:  # last, as the jobs add it (slatelib/jobs/_common.py)
        report["store_requests"] = report.pop("store_requests")
    if headline is not None:
        report["headline"] = headline(report)
    else:
        del report["headline"]
    return report


def _base_totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"databases": len(results),
            "failed": sum(1 for r in results if r.get("exit_code", EXIT_OK))}


# ------------------------------------------------------------------------- compaction
def compact_db_fields(report: dict[str, Any]) -> dict[str, Any]:
    """A database entry's fields from :meth:`CompactionReport.to_dict`: without ``db``
    (the entry names it), and its ``status`` as ``outcome``."""
    fields = dict(report)
    fields.pop("db", None)
    fields["outcome"] = fields.pop("status")
    return fields


def compact_report(code: int, databases: list[dict[str, Any]], *, seconds: float,
                   dry_run: bool, store_requests: dict[str, Any] | None = None,
                   ) -> dict[str, Any]:
    """The report of a one-shot compaction of ``databases`` (entries of :func:`db_entry`);
    ``store_requests``: the run's object-store requests, when counted."""
    totals = _base_totals(databases)
    for key in COMPACT_TOTALS:
        totals[key] = sum(int(r.get(key, 0)) for r in databases)
    extra = {"store_requests": store_requests} if store_requests is not None else {}
    return job_report("compact", code, totals=totals, databases=databases, seconds=seconds,
                      headline=compact_headline, dry_run=dry_run, **extra)


def _inputs(results: list[dict[str, Any]]) -> str:
    l0 = sum(int((r.get("inputs") or {}).get("l0_views", 0)) for r in results)
    sr = sum(int((r.get("inputs") or {}).get("sorted_runs", 0)) for r in results)
    parts = ([f"{l0} L0"] if l0 else []) + ([f"{sr} SR"] if sr else [])
    return " + ".join(parts) or "0 SSTs"


def compact_headline(report: dict[str, Any]) -> str:
    """``compacted 5 L0 (3.9 MB) -> 1 SST (1.8 MB); 42,772 versions dropped; 1.7 s`` (a
    one-shot run; the standing modes have none)."""
    if report.get("job") != "compact" or "databases" not in report:
        return ""
    dbs = report["databases"]
    t = report.get("totals", {})
    secs = fmt_seconds(float(report.get("seconds", 0)))
    where = f" in {len(dbs)} databases" if len(dbs) > 1 else ""
    done = [r for r in dbs if r.get("outcome") == "committed"]
    planned = [r for r in dbs if r.get("outcome") in ("dry_run", "planned")]
    if done:
        out = sum(int((r.get("outputs") or {}).get("count", 0)) for r in done)
        line = (f"compacted {_inputs(done)} ({fmt_bytes(t.get('bytes_in', 0))}) -> "
                f"{out} SST{'s' if out != 1 else ''} ({fmt_bytes(t.get('bytes_out', 0))}){where}; "
                f"{fmt_count(int(t.get('versions_dropped', 0)))} versions dropped"
                f"{task_share_suffix(done)}")
    elif planned:
        est = sum(int((r.get("inputs") or {}).get("estimated_bytes", 0)) for r in planned)
        size = f" (~{fmt_bytes(est)})" if est else ""
        line = f"dry run: would compact {_inputs(planned)}{size}{where}; nothing written"
    elif idle := [r for r in dbs if r.get("outcome") == "nothing_to_do"]:
        reasons = sorted({str(r["reason"]) for r in idle if r.get("reason")})
        line = "nothing to compact" + where
        if len(reasons) == 1:
            line += f": {reasons[0]}"
        elif reasons:
            line += f" ({len(reasons)} reasons; see the report's databases[].reason)"
    else:
        line = "compacted nothing"
    return f"{line}{failed_suffix(report)}{requests_suffix(report)}; {secs}"


def task_share_suffix(results: list[dict[str, Any]]) -> str:
    """``; tasks 89% of execute`` (the tasks' own time over the execute phase's, summed
    over ``results``' ``execute_breakdown``), or nothing when none says."""
    found = [r["execute_breakdown"] for r in results
             if isinstance(r.get("execute_breakdown"), dict) and r["execute_breakdown"]]
    execute = sum(float(b.get("execute_s", 0)) for b in found)
    if execute <= 0:
        return ""
    tasks = sum(float(b.get("tasks_s", 0)) for b in found)
    return f"; tasks {round(100 * tasks / execute)}% of execute"


# --------------------------------------------------------------------------------- GC
def gc_db_fields(report: dict[str, Any]) -> dict[str, Any]:
    """A database entry's fields from :meth:`GcReport.to_json`, with ``exit_code`` 1 when
    some deletion failed (``error_count``)."""
    return {**report, "exit_code": 1 if report.get("error_count") else EXIT_OK}


def gc_report(code: int, databases: list[dict[str, Any]], *, seconds: float, dry_run: bool,
              min_age_s: float, store_requests: dict[str, Any] | None = None,
              ) -> dict[str, Any]:
    """The report of a GC run over ``databases`` (entries of :func:`db_entry`): ``totals``
    sums their totals, and their counts per kind under ``kinds``; ``store_requests``: the
    run's object-store requests, when counted."""
    totals = _base_totals(databases)
    for r in databases:
        for k, v in (r.get("totals") or {}).items():
            totals[k] = totals.get(k, 0) + v
    kinds: dict[str, dict[str, int]] = {}
    for r in databases:
        for kind, tally in (r.get("kinds") or {}).items():
            mine = kinds.setdefault(kind, {})
            for k, v in tally.items():
                mine[k] = mine.get(k, 0) + v
    totals["kinds"] = dict(sorted(kinds.items()))
    extra = {"store_requests": store_requests} if store_requests is not None else {}
    return job_report("gc", code, totals=totals, databases=databases, seconds=seconds,
                      headline=gc_headline, dry_run=dry_run, min_age_s=min_age_s, **extra)


def gc_headline(report: dict[str, Any]) -> str:
    """``deleted 1,234 objects (56.7 MB): wal 1,000 (1.2 MB), compacted 234 (55.5 MB); 5.4 s``,
    or for a dry run ``dry run: would delete ...; nothing deleted; ...``."""
    t = report.get("totals", {})
    kinds: dict[str, dict[str, int]] = t.get("kinds", {})
    dry = bool(report.get("dry_run"))
    n, b = ("to_delete", "to_delete_bytes") if dry else ("deleted", "deleted_bytes")
    per_kind = [f"{k} {fmt_count(v.get(n, 0))} ({fmt_bytes(v.get(b, 0))})"
                for k, v in kinds.items() if v.get(n, 0)]
    total_n = sum(v.get(n, 0) for v in kinds.values())
    total_b = sum(v.get(b, 0) for v in kinds.values())
    verb = "dry run: would delete" if dry else "deleted"
    line = f"{verb} {fmt_count(total_n)} object{'s' if total_n != 1 else ''} ({fmt_bytes(total_b)})"
    if per_kind:
        line += ": " + ", ".join(per_kind)
    kept = sum(v.get("kept", 0) for v in kinds.values())
    dbs = report.get("databases", [])
    line += f"; {fmt_count(kept)} kept"
    if len(dbs) > 1:
        line += f"; {len(dbs)} databases"
    if dry:
        line += "; nothing deleted"
    return (f"{line}{failed_suffix(report)}{requests_suffix(report)}; "
            f"{fmt_seconds(float(report.get('seconds', 0)))}")
