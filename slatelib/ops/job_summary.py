"""What a job prints on a terminal instead of its JSON report: the headline, a short table
(one row per database) and where the full report went. Pipes and files keep getting the
JSON report (:func:`report_goes_to_terminal` decides).

The table's columns: ``DATABASE`` (the URL as given), ``STATUS`` (the exit name), ``RESULT``
(the job's outcome in a few words, or the failure's message) and ``TIME``. Pure but for
:func:`report_goes_to_terminal`, which looks at the process's stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from slatelib.core.humanize import fmt_bytes, fmt_count, fmt_seconds

__all__ = ["REPORT_FORMATS", "report_goes_to_terminal", "result_words", "summary_text"]

REPORT_FORMATS = ("json", "table")
"""The jobs' ``--format``: the JSON report, or the terminal summary."""

MAX_ROWS = 20
"""Databases the table shows (then a count of the rest)."""

_RESULT_CHARS = 90


def report_goes_to_terminal(stream: TextIO | None = None) -> bool:
    """True when the report's stream is a terminal: ``stream`` (default stdout) is a tty,
    or, under ``spark-submit`` (whose JVM pipes the driver's stdout to its own), the JVM's
    stdout is (Linux ``/proc``)."""
    out = sys.stdout if stream is None else stream
    try:
        if out.isatty():
            return True
    except (AttributeError, ValueError):
        return False
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return False
    try:
        fd = os.open(f"/proc/{os.getppid()}/fd/1", os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False
    try:
        return os.isatty(fd)
    finally:
        os.close(fd)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS - 1] + "…"


def result_words(entry: Mapping[str, Any]) -> str:
    """One database's outcome in a few words: its error's message when it failed, else
    what the job did (compaction's outcome and sizes, GC's deletions, export's rows)."""
    error = entry.get("error")
    if entry.get("exit_code") and isinstance(error, Mapping) and error.get("message"):
        return _short(str(error["message"]))
    outcome = entry.get("outcome")
    if outcome == "nothing_to_do":
        return _short("nothing to do" + (f": {entry['reason']}" if entry.get("reason") else ""))
    if outcome == "committed":
        outputs = entry.get("outputs") or {}
        return (f"{fmt_bytes(entry.get('bytes_in', 0))} -> {outputs.get('count', 0)} SST(s) "
                f"({fmt_bytes(entry.get('bytes_out', 0))})")
    if outcome is not None:
        return str(outcome).replace("_", " ")
    totals = entry.get("totals")
    if isinstance(totals, Mapping) and ("deleted" in totals or "to_delete" in totals):
        if "to_delete" in totals and not totals.get("deleted"):
            return f"would delete {fmt_count(int(totals.get('to_delete', 0)))} object(s)"
        return f"deleted {fmt_count(int(totals.get('deleted', 0)))} object(s)"
    if "rows" in entry:
        return f"{fmt_count(int(entry['rows']))} rows"
    return ""


def summary_text(report: Mapping[str, Any], *, report_path: str | None) -> str:
    """The terminal summary of ``report``: a table of its databases, then a line that says
    where the full JSON report is (``report_path``, else how to get it). The headline is
    not in it: the job prints that last, on stderr."""
    rows = list(report.get("databases") or [])
    lines: list[str] = []
    if rows:
        cells = [(str(r.get("db", "")), str(r.get("status", "")), result_words(r),
                  fmt_seconds(float(r["seconds"])) if isinstance(r.get("seconds"), int | float)
                  else "") for r in rows[:MAX_ROWS]]
        headers = ("DATABASE", "STATUS", "RESULT", "TIME")
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
        for row in (headers, *cells):
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if len(rows) > MAX_ROWS:
            lines.append(f"... and {len(rows) - MAX_ROWS} more database(s)")
    if report_path:
        lines.append(f"full report: {report_path}")
    else:
        lines.append("full report: run with --report FILE, or pipe the output (JSON)")
    return "\n".join(lines) + "\n"
