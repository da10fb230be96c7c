"""The ``slate health --html FILE`` page: one self-contained HTML file (inline CSS, inline SVG
charts, a few lines of inline JavaScript; nothing fetched from the network). Pure.

The page holds the health table (one row per database, as ``slate health`` prints it) and,
per database, two charts: the size of each sorted run (bars, newest run first), and L0 depth
over time from the compaction service's status history
(:mod:`slatelib.ops.compaction.status_history`) with the ``--max-l0`` limit as a dashed
line. The charts are drawn here as SVG, so the page needs no script to show them; the script
only sorts the table when a header is clicked and records what it saw on ``<html>``:
``data-rows`` (table rows), ``data-charts`` (SVG charts) and ``data-errors`` (script errors
caught by ``window.onerror``), which the headless-browser test reads.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from slatelib.core.gc_text import fmt_age, fmt_time
from slatelib.core.humanize import fmt_bytes

__all__ = ["render_health_page"]

Point = tuple[int, int | None]
"""``(Unix ms, L0 depth)`` of one history sample."""

_W, _H = 520, 180
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 64, 16, 14, 30

_CSS = """
:root { --ok: #1b7f3b; --bad: #c62828; --err: #8e24aa; --ink: #1d2430; --muted: #5f6b7a;
        --line: #d5dbe3; --bar: #3f6fd8; --l0: #e07b00; }
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       margin: 24px; background: #f6f8fb; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 0 0 8px; word-break: break-all; }
.meta { color: var(--muted); margin-bottom: 16px; }
table { border-collapse: collapse; background: #fff; width: 100%; margin-bottom: 24px; }
th, td { border-bottom: 1px solid var(--line); padding: 6px 8px; text-align: left;
         vertical-align: top; }
th { background: #e9eef5; cursor: pointer; user-select: none; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.status-ok td.status { color: var(--ok); font-weight: 600; }
tr.status-breach td.status { color: var(--bad); font-weight: 600; }
tr.status-error td.status { color: var(--err); font-weight: 600; }
tr.status-breach { background: #fff4f4; }
tr.status-error { background: #fbf2fd; }
td.db { word-break: break-all; min-width: 220px; max-width: 420px; }
td.status { max-width: 420px; }
.problems { color: var(--bad); font-size: 12px; overflow-wrap: anywhere; }
.card .error { overflow-wrap: anywhere; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 16px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px; }
.card .error { color: var(--err); }
.chart-title { font-weight: 600; margin: 8px 0 2px; }
svg { display: block; }
svg text { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg .bar { fill: var(--bar); }
svg .l0 { fill: none; stroke: var(--l0); stroke-width: 2; }
svg .dot { fill: var(--l0); }
svg .limit { stroke: var(--bad); stroke-dasharray: 5 4; stroke-width: 1.5; }
svg .axis { stroke: var(--muted); stroke-width: 1; }
svg .grid { stroke: var(--line); stroke-width: 1; }
.empty { color: var(--muted); font-style: italic; margin: 4px 0 8px; }
"""

_JS = """
(function () {
  var root = document.documentElement;
  var errors = 0;
  window.onerror = function (msg) {
    errors += 1;
    root.setAttribute("data-errors", String(errors));
    root.setAttribute("data-last-error", String(msg));
  };
  function cell(row, i) {
    var c = row.children[i];
    var v = c.getAttribute("data-sort");
    return v === null ? c.textContent : v;
  }
  function sortBy(table, i) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var asc = table.getAttribute("data-sorted") !== String(i);
    rows.sort(function (a, b) {
      var x = cell(a, i), y = cell(b, i);
      var nx = parseFloat(x), ny = parseFloat(y);
      var r = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? r : -r;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    table.setAttribute("data-sorted", asc ? String(i) : "");
  }
  document.addEventListener("DOMContentLoaded", function () {
    var table = document.getElementById("health");
    var heads = table.tHead.rows[0].cells;
    for (var i = 0; i < heads.length; i++) {
      heads[i].addEventListener("click", sortBy.bind(null, table, i));
    }
    root.setAttribute("data-rows", String(table.tBodies[0].rows.length));
    root.setAttribute("data-charts", String(document.querySelectorAll("svg.chart").length));
    root.setAttribute("data-errors", String(errors));
    root.setAttribute("data-rendered", "1");
  });
})();
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else fmt_age(seconds * 1000)


def _scale(top: int) -> tuple[int, list[int]]:
    """The axis maximum (a multiple of a whole step, at least ``top``) and its ticks."""
    step = max(1, math.ceil(top / 4))
    high = max(step, step * math.ceil(top / step))
    return high, list(range(0, high + 1, step))


def sorted_run_chart(runs: Sequence[Mapping[str, Any]]) -> str:
    """Horizontal bars, one per sorted run (as the manifest lists them: newest first)."""
    if not runs:
        return '<p class="empty">no sorted runs</p>'
    bar_h, gap = 18, 6
    height = _PAD_T + len(runs) * (bar_h + gap) + 4
    label_w = 120
    top = max(int(r["bytes"]) for r in runs) or 1
    span = _W - label_w - 90
    parts = [f'<svg class="chart runs" width="{_W}" height="{height}" '
             f'viewBox="0 0 {_W} {height}" role="img" aria-label="sorted run sizes">']
    for i, r in enumerate(runs):
        y = _PAD_T + i * (bar_h + gap)
        w = max(1.0, span * int(r["bytes"]) / top)
        seg = "" if r.get("segment") in (None, "(top-level)") else f' {r["segment"]}'
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end">run {_e(r["id"])}'
            f'{_e(seg)}</text>'
            f'<rect class="bar" x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}">'
            f'<title>sorted run {_e(r["id"])}: {_e(fmt_bytes(int(r["bytes"])))}, '
            f'{_e(r["ssts"])} SSTs</title></rect>'
            f'<text x="{label_w + w + 6:.1f}" y="{y + 13}">{_e(fmt_bytes(int(r["bytes"])))}'
            f' · {_e(r["ssts"])} SST{"s" if r["ssts"] != 1 else ""}</text>')
    parts.append("</svg>")
    return "".join(parts)


def l0_chart(points: Sequence[Point], limit: int | None) -> str:
    """L0 depth over time (a line through the samples) with ``limit`` as a dashed line."""
    known = [(t, v) for t, v in points if v is not None]
    if not known:
        return ('<p class="empty">no status history for this database (run the service with '
                "--status-history FILE and pass --status-history FILE here)</p>")
    t0, t1 = known[0][0], known[-1][0]
    dt = max(1, t1 - t0)
    top, ticks = _scale(max([v for _, v in known] + ([limit] if limit is not None else [])))
    pw, ph = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B

    def x(t: int) -> float:
        return _PAD_L + pw * (t - t0) / dt if t1 > t0 else _PAD_L + pw / 2

    def y(v: float) -> float:
        return _PAD_T + ph * (1 - v / top)

    parts = [f'<svg class="chart l0" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
             'role="img" aria-label="L0 depth over time">']
    for v in ticks:
        parts.append(f'<line class="grid" x1="{_PAD_L}" x2="{_W - _PAD_R}" y1="{y(v):.1f}" '
                     f'y2="{y(v):.1f}"/><text x="{_PAD_L - 6}" y="{y(v) + 4:.1f}" '
                     f'text-anchor="end">{v}</text>')
    parts.append(f'<line class="axis" x1="{_PAD_L}" x2="{_W - _PAD_R}" y1="{_H - _PAD_B}" '
                 f'y2="{_H - _PAD_B}"/>')
    parts.append(f'<text x="{_PAD_L}" y="{_H - 8}">{_e(fmt_time(t0))}</text>')
    if t1 > t0:
        parts.append(f'<text x="{_W - _PAD_R}" y="{_H - 8}" text-anchor="end">'
                     f'{_e(fmt_time(t1))}</text>')
    if limit is not None:
        parts.append(f'<line class="limit" x1="{_PAD_L}" x2="{_W - _PAD_R}" '
                     f'y1="{y(limit):.1f}" y2="{y(limit):.1f}"><title>--max-l0 {limit}</title>'
                     f'</line>')
    path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in known)
    parts.append(f'<polyline class="l0" points="{path}"/>')
    if len(known) <= 60:
        parts += [f'<circle class="dot" cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5">'
                  f'<title>{_e(fmt_time(t))}: L0 {v}</title></circle>' for t, v in known]
    parts.append("</svg>")
    return "".join(parts)


def _row(entry: Mapping[str, Any]) -> str:
    s = entry.get("stats")
    status = entry["health"]
    cls = f"status-{status}"
    if s is None:
        err = entry.get("error", {})
        return (f'<tr class="{cls}"><td class="db">{_e(entry["db"])}</td>'
                + '<td class="num">-</td>' * 7
                + f'<td>-</td><td class="status" data-sort="2">{_e(entry["status"])}'
                f'<div class="problems">{_e(err.get("message", ""))}</div></td></tr>')
    problems = "".join(f"<div>{_e(b['message'])}</div>" for b in entry.get("breaches", []))
    ckpt_age = s.get("oldest_checkpoint_age_s")
    expiry = s.get("oldest_checkpoint_expire")
    comp_age = s.get("last_compaction_age_s")
    compactor = s["compactor_holder"]
    cells = [
        f'<td class="db">{_e(entry["db"])}</td>',
        f'<td class="num">{s["l0_ssts"]}</td>',
        f'<td class="num">{s["sorted_runs"]}</td>',
        f'<td class="num">{s["manifest_versions"]}</td>',
        f'<td class="num" data-sort="{ckpt_age if ckpt_age is not None else -1}">'
        f'{s["checkpoints"]}{"" if ckpt_age is None else " · oldest " + _e(_age(ckpt_age))}'
        f'</td>',
        f'<td class="num">{_e(expiry or ("never" if s["checkpoints"] else "-"))}</td>',
        f'<td class="num" data-sort="{s["gc_reclaimable_bytes"]}">'
        f'{_e(fmt_bytes(s["gc_reclaimable_bytes"]))} · {s["gc_reclaimable_objects"]}</td>',
        f'<td class="num" data-sort="{comp_age if comp_age is not None else -1}">'
        f'{_e("never" if comp_age is None else _age(comp_age) + " ago")}</td>',
        f'<td>{_e(compactor.upper() if compactor == "foreign" else compactor)}</td>',
        f'<td class="status" data-sort="{0 if status == "ok" else 1}">{_e(status)}'
        f'<div class="problems">{problems}</div></td>',
    ]
    return f'<tr class="{cls}">{"".join(cells)}</tr>'


_HEADERS = ("database", "L0", "sorted runs", "manifests", "checkpoints", "oldest expires",
            "GC backlog", "last compaction", "compactor", "health")


def _card(entry: Mapping[str, Any], points: Sequence[Point], limit: int | None) -> str:
    s = entry.get("stats")
    head = f'<div class="card"><h2>{_e(entry["db"])}</h2>'
    if s is None:
        err = entry.get("error", {})
        return head + f'<p class="error">{_e(entry["status"])}: {_e(err.get("message", ""))}</p></div>'
    return (head
            + f'<div class="chart-title">sorted runs ({s["sorted_runs"]})</div>'
            + sorted_run_chart(s["sorted_run_sizes"])
            + f'<div class="chart-title">L0 depth over time (now {s["l0_ssts"]})</div>'
            + l0_chart(points, limit) + "</div>")


def render_health_page(report: Mapping[str, Any],
                       history: Mapping[str, Sequence[Point]] | None = None) -> str:
    """The page for a ``slate health`` report (its JSON form: ``databases`` with ``db``,
    ``health``, ``status``, ``stats`` or ``error``, ``breaches``; ``thresholds``);
    ``history``: database name -> its L0 samples from the service's status history."""
    history = history or {}
    limit = report.get("thresholds", {}).get("--max-l0")
    dbs = report["databases"]
    rows = "\n".join(_row(e) for e in dbs)
    cards = "\n".join(_card(e, history.get(e["db"], ()), limit) for e in dbs)
    summary = (f'{len(dbs)} database{"s" if len(dbs) != 1 else ""} · '
               f'{report["totals"]["breaches"]} over a threshold · '
               f'{report["totals"]["errors"]} unreadable · checked {_e(report["checked_at"])}')
    limits = ", ".join(f"{k} {v}" for k, v in report.get("thresholds", {}).items()) or "none"
    data = json.dumps({"status": report["status"], "databases": len(dbs)})
    head_cells = "".join(f"<th>{_e(h)}</th>" for h in _HEADERS)
    return f"""<!DOCTYPE html>
<html lang="en" data-errors="0" data-rendered="0">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>slate health: {_e(report["status"])}</title>
<style>{_CSS}</style>
<script>{_JS}</script>
</head>
<body data-report='{_e(data)}'>
<h1>SlateDB fleet health</h1>
<div class="meta">{summary}<br>thresholds: {_e(limits)}</div>
<table id="health">
<thead><tr>{head_cells}</tr></thead>
<tbody>
{rows}
</tbody>
</table>
<div class="cards">
{cards}
</div>
</body>
</html>
"""
