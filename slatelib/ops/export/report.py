"""The export job's report (the shape every job shares, :mod:`slatelib.ops.job_report`).

A database entry has ``checkpoint`` (``id``, ``manifest_id``, ``created``: made by this run),
``target``, ``format``, ``mode``, ``writer`` (which path wrote it: ``spark-parquet``,
``arrow-parquet``, ``delta-spark`` or ``delta-rs``), ``rows``, ``bytes``, ``files``, ``delta_version``, for an
incremental export ``since`` (the previous checkpoint) and ``changes`` (``upserts``,
``deletes``), and ``seconds`` per phase (``plan``, ``write``, ``commit``). Pure.
"""

from __future__ import annotations

from typing import Any

from slatelib.core.humanize import fmt_bytes, fmt_count, fmt_seconds
from slatelib.ops.job_report import db_entry, failed_suffix, job_report

__all__ = ["db_entry", "export_headline", "export_report", "failure_reason"]


def export_report(code: int, databases: list[dict[str, Any]], *,
                  seconds: float) -> dict[str, Any]:
    """The report of an export run over ``databases`` (entries of :func:`db_entry`)."""
    totals: dict[str, Any] = {
        "databases": len(databases),
        "failed": sum(1 for r in databases if r.get("exit_code")),
        "rows": sum(int(r.get("rows", 0)) for r in databases),
        "bytes": sum(int(r.get("bytes", 0)) for r in databases),
        "files": sum(int(r.get("files", 0)) for r in databases),
    }
    return job_report("export", code, totals=totals, databases=databases, seconds=seconds,
                      headline=export_headline)


def export_headline(report: dict[str, Any]) -> str:
    """``exported 2,300,000 rows (250.1 MB, 4 files) of checkpoint 0f3c... (manifest 12) to
    delta file:///lake/t (delta-rs); 14.2 s``, or for an incremental export ``applied 120
    upserts and 7 deletes ...``."""
    if report.get("job") != "export":
        return ""
    secs = fmt_seconds(float(report.get("seconds", 0)))
    done = [r for r in report.get("databases", []) if not r.get("exit_code")]
    if not done:
        return f"exported nothing{failed_suffix(report)}{failure_reason(report)}; {secs}"
    r = done[0]
    cp = r.get("checkpoint") or {}
    where = f"{r.get('format')} {r.get('target')} ({r.get('writer')})"
    of = f"checkpoint {cp.get('id')} (manifest {cp.get('manifest_id')})"
    if r.get("mode") == "incremental":
        ch = r.get("changes") or {}
        line = (f"applied {fmt_count(int(ch.get('upserts', 0)))} upserts and "
                f"{fmt_count(int(ch.get('deletes', 0)))} deletes since checkpoint "
                f"{r.get('since')} to {where}, now at {of}")
    else:
        line = (f"exported {fmt_count(int(r.get('rows', 0)))} rows "
                f"({fmt_bytes(int(r.get('bytes', 0)))}, {r.get('files', 0)} files) of {of} "
                f"to {where}")
    return f"{line}{failed_suffix(report)}{failure_reason(report)}; {secs}"


REASON_CHARS = 200
"""How much of a failure's message a headline keeps."""


def failure_reason(report: dict[str, Any]) -> str:
    """``: <the first failed database's error message>`` (shortened to
    :data:`REASON_CHARS`), or nothing when none failed or it has no message."""
    for r in report.get("databases", []):
        message = str(((r.get("error") or {}).get("message")) or "") if r.get("exit_code") \
            else ""
        if message:
            text = " ".join(message.split())
            if len(text) > REASON_CHARS:
                text = text[:REASON_CHARS - 1] + "…"
            return f": {text}"
    return ""
