"""``slate health``: one row of health numbers per database, with thresholds that make it a
cron or Airflow check (docs/health.md).

    slate health --db URL [--db URL ...] [--dbs-file FILE] [--discover PREFIX_URL]
        [--max-l0 N] [--max-sorted-runs N] [--max-manifests N] [--max-gc-backlog-bytes SIZE]
        [--max-gc-backlog-objects N] [--max-checkpoint-age DURATION] [--max-wal-to-replay N]
        [--max-compaction-age DURATION] [--no-foreign-compactor]
        [--html FILE] [--status-history FILE | --status-file FILE] [--parallelism N]

Each database is read by :func:`slatelib.ops.db_stats.collect_db_stats` (one listing, a few
GETs, nothing written), on ``--parallelism`` threads. The output is a table on a terminal
and one JSON object otherwise (``--format``); ``--html FILE`` also writes the page of
:mod:`slatelib.cli.health_html`.

Exit codes: 0 when every database was read and none crossed a threshold; when a database
cannot be read (not a database, a damaged manifest, the store failing) it is reported with
its error and the others are still checked, and the exit code is that error's code
(:mod:`slatelib.exit_codes`; the first such database in order); otherwise 1 when any
database crossed a threshold (each breach names the database and the threshold).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slatelib.cli import output
from slatelib.config import parse_duration
from slatelib.core.health import Thresholds, check_thresholds
from slatelib.errors import InvalidArgumentError
from slatelib.exit_codes import EXIT_ERROR, EXIT_OK, exit_code_for, exit_name
from slatelib.flags import size, whole_number
from slatelib.objstore import ObjectStore, open_store, split_db_url, with_wal_store
from slatelib.objstore.url import join_store_url
from slatelib.ops.db_stats import collect_db_stats
from slatelib.ops.discover import discover_databases

if TYPE_CHECKING:
    from slatelib.cli.app import Context

log = logging.getLogger(__name__)

EXIT_BREACH = 1
"""A threshold was crossed (the code of a check that fails)."""


@dataclass(frozen=True)
class _Target:
    """One database: how it is named, its store and its path in the store; ``alias``: the
    name the compaction service gives it when it discovers it (its status history's key)."""

    name: str
    store_url: str
    path: str

    @property
    def alias(self) -> str:
        return f"{self.store_url.rstrip('/')}/{self.path}"


def _duration(text: str) -> float:
    try:
        return parse_duration(text, what="duration")
    except InvalidArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def targets(ctx: Context) -> list[_Target]:
    """The databases to check: ``--db`` (also the global one), ``--dbs-file`` lines and
    every database below each ``--discover`` prefix, de-duplicated, in that order.

    Raises:
        InvalidArgumentError: none given, a malformed URL, an unreadable ``--dbs-file``.
    """
    args = ctx.args
    urls: list[str] = []
    if isinstance(getattr(args, "db", None), str) and args.db:
        urls.append(args.db)
    elif ctx.path is not None and ctx.store_url:
        urls.append(ctx.db_name)
    urls += args.health_dbs
    if args.dbs_file:
        try:
            with open(args.dbs_file, encoding="utf-8") as f:
                urls += [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
        except OSError as exc:
            raise InvalidArgumentError(f"--dbs-file {args.dbs_file}: {exc}") from exc
    out = []
    for url in urls:
        store_url, path = split_db_url(url)
        out.append(_Target(url, store_url, path))
    for prefix_url in args.discover:
        store_url, prefix = split_db_url(prefix_url)
        for root in discover_databases(open_store(store_url), prefix):
            out.append(_Target(join_store_url(store_url, root), store_url, root))
    if not out:
        raise InvalidArgumentError("no database given: use --db URL, --dbs-file or --discover")
    seen: set[tuple[str, str]] = set()
    unique = []
    for t in out:
        if (t.store_url, t.path) not in seen:
            seen.add((t.store_url, t.path))
            unique.append(t)
    return unique


def thresholds(args: argparse.Namespace) -> Thresholds:
    return Thresholds(
        max_l0=args.max_l0, max_sorted_runs=args.max_sorted_runs,
        max_manifests=args.max_manifests, max_gc_backlog_bytes=args.max_gc_backlog_bytes,
        max_gc_backlog_objects=args.max_gc_backlog_objects,
        max_checkpoint_age_s=args.max_checkpoint_age, max_wal_to_replay=args.max_wal_to_replay,
        max_compaction_age_s=args.max_compaction_age,
        no_foreign_compactor=args.no_foreign_compactor)


def check_database(store: ObjectStore, target: _Target, limits: Thresholds,
                   now_ms: int | None = None) -> dict[str, Any]:
    """One database's entry of the report: its stats and breaches, or its error (never
    raises: an unreadable database is an entry with ``error`` and its exit code)."""
    try:
        stats = collect_db_stats(store, target.path, now_ms=now_ms)
    except Exception as exc:  # noqa: BLE001 - one database's failure is its entry's
        code = exit_code_for(exc)
        if code == EXIT_ERROR:
            log.debug("health: unexpected error [db=%s]", target.name, exc_info=True)
        return {"db": target.name, "health": "error", "status": exit_name(code),
                "exit_code": code, "breaches": [],
                "error": {"type": type(exc).__name__, "message": str(exc)}}
    breaches = check_thresholds(stats, limits)
    code = EXIT_BREACH if breaches else EXIT_OK
    return {"db": target.name, "health": "breach" if breaches else "ok",
            "status": "breach" if breaches else "ok", "exit_code": code,
            "breaches": [b.to_dict() for b in breaches], "stats": stats.to_dict()}


def overall_code(entries: Sequence[dict[str, Any]]) -> int:
    """The first unreadable database's code, else 1 when any crossed a threshold, else 0."""
    errors = [e["exit_code"] for e in entries if e["health"] == "error"]
    if errors:
        return int(errors[0])
    return EXIT_BREACH if any(e["breaches"] for e in entries) else EXIT_OK


def build_report(entries: list[dict[str, Any]], limits: Thresholds, checked_at: str,
                 ) -> dict[str, Any]:
    code = overall_code(entries)
    breaches = [{"db": e["db"], **b} for e in entries for b in e["breaches"]]
    errors = any(e["health"] == "error" for e in entries)
    status = ("ok" if code == EXIT_OK else "breach" if code == EXIT_BREACH and not errors
              else exit_name(code))
    return {
        "command": "health", "status": status, "exit_code": code, "checked_at": checked_at, "thresholds": limits.given(),
        "totals": {"databases": len(entries),
                   "ok": sum(1 for e in entries if e["health"] == "ok"),
                   "breaches": sum(1 for e in entries if e["health"] == "breach"),
                   "errors": sum(1 for e in entries if e["health"] == "error")},
        "breaches": breaches, "databases": entries,
    }


def _fmt_age(seconds: float | None) -> str:
    from slatelib.core.gc_text import fmt_age

    return "-" if seconds is None else fmt_age(seconds * 1000)


def health_table(report: dict[str, Any]) -> str:
    """The terminal table: one row per database, then each breach and error."""
    rows: list[tuple[Any, ...]] = []
    for e in report["databases"]:
        s = e.get("stats")
        if s is None:
            rows.append((e["db"], None, None, None, None, None, None, None, None,
                         e["status"].upper()))
            continue
        ckpt = str(s["checkpoints"])
        if s["oldest_checkpoint_age_s"] is not None:
            ckpt += f" (oldest {_fmt_age(s['oldest_checkpoint_age_s'])})"
        expires = s["oldest_checkpoint_expire"] or ("never" if s["checkpoints"] else None)
        comp_age = s["last_compaction_age_s"]
        holder = s["compactor_holder"]
        rows.append((
            e["db"], output.fmt_count(s["l0_ssts"]), output.fmt_count(s["sorted_runs"]),
            output.fmt_count(s["manifest_versions"]), ckpt, expires,
            f"{output.fmt_bytes(s['gc_reclaimable_bytes'])} "
            f"({output.fmt_count(s['gc_reclaimable_objects'])})",
            "never" if comp_age is None else _fmt_age(comp_age) + " ago",
            holder.upper() if holder == "foreign" else holder,
            "ok" if e["health"] == "ok" else "BREACH"))
    text = output.table(("DATABASE", "L0", "RUNS", "MANIFESTS", "CHECKPOINTS", "OLDEST EXPIRES",
                         "GC BACKLOG", "LAST COMPACTION", "COMPACTOR", "HEALTH"), rows)
    for e in report["databases"]:
        for b in e["breaches"]:
            text += f"{e['db']}: {b['threshold']}: {b['message']}\n"
        if "error" in e:
            text += f"{e['db']}: {e['status']}: {e['error']['message']}\n"
    return text


def _history(args: argparse.Namespace) -> dict[str, list[tuple[int, int | None]]]:
    """Database name -> L0 samples from ``--status-history`` (or the history the
    ``--status-file`` names); {} when none is given. A name is also filed under its
    spelling without a trailing ``/``.

    Raises:
        InvalidArgumentError: the file cannot be read.
    """
    import json

    from slatelib.ops.compaction.status_history import read_status_history

    path = args.status_history
    if path is None and args.status_file:
        try:
            with open(args.status_file, encoding="utf-8") as f:
                path = json.load(f).get("status_history")
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"--status-file {args.status_file}: {exc}") from exc
        if not path:
            raise InvalidArgumentError(
                f"--status-file {args.status_file}: the service keeps no status history "
                "(run it with --status-history FILE)")
    if not path:
        return {}
    try:
        got = read_status_history(path)
    except OSError as exc:
        raise InvalidArgumentError(f"--status-history {path}: {exc}") from exc
    out: dict[str, list[tuple[int, int | None]]] = {}
    for name, points in got.items():
        series = [(p.at_ms, p.l0) for p in points]
        out[name] = series
        out.setdefault(name.rstrip("/"), series)
    return out


def write_page(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file, then a rename).

    Raises:
        InvalidArgumentError: the folder cannot be written.
    """
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".slate-health-", suffix=".html", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise InvalidArgumentError(f"--html {path}: {exc}") from exc


def cmd_health(ctx: Context) -> int | None:
    """``slate health`` (module docstring).

    Raises:
        InvalidArgumentError: no database, a malformed URL or prefix, an unreadable
            ``--dbs-file``/``--status-history``, an unwritable ``--html``.
    """
    from slatelib.cli.health_html import render_health_page
    from slatelib.cli.output import iso_ms
    from slatelib.clock import SYSTEM_CLOCK

    args = ctx.args
    limits = thresholds(args)
    history = _history(args)  # refuse a bad file before reading any database
    dbs = targets(ctx)
    stores: dict[str, ObjectStore] = {}
    for t in dbs:
        if t.store_url not in stores:
            stores[t.store_url] = with_wal_store(open_store(t.store_url), ctx.wal_store_url)
    now = SYSTEM_CLOCK.now_ms()
    with ThreadPoolExecutor(max(1, min(args.parallelism, len(dbs)))) as pool:
        entries = list(pool.map(lambda t: check_database(stores[t.store_url], t, limits, now),
                                dbs))
    report = build_report(entries, limits, iso_ms(now) or "")
    if args.html:
        series = {t.name: history.get(t.name, history.get(t.alias, [])) for t in dbs}
        write_page(args.html, render_health_page(report, series))
    ctx.emit(report, table=lambda: health_table(report))
    totals = report["totals"]
    ctx.headline(f"{totals['databases']} databases: {totals['ok']} ok, {totals['breaches']} "
                 f"over a threshold, {totals['errors']} unreadable"
                 + (f"; page {args.html}" if args.html else ""))
    sys.stdout.flush()
    return report["exit_code"] or None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``health`` to the ``slate`` parser."""
    p = sub.add_parser(
        "health", help="health of one or many databases: L0, sorted runs, manifests, "
                       "checkpoints, GC backlog, compaction; exit 1 over a threshold",
        description="One row of health numbers per database (docs/health.md). Exit 1 when a "
                    "--max-* threshold is crossed; an unreadable database gets its error's "
                    "exit code while the others are still checked.")
    sel = p.add_argument_group("databases")
    sel.add_argument("--db", dest="health_dbs", action="append", default=[], metavar="URL",
                     help="database URL (repeatable)")
    sel.add_argument("--dbs-file", metavar="FILE",
                     help="file with one database URL per line (# comments allowed)")
    sel.add_argument("--discover", action="append", default=[], metavar="PREFIX_URL",
                     help="every database below this prefix URL (repeatable)")
    sel.add_argument("--parallelism", type=whole_number(minimum=1), default=8, metavar="N",
                     help="databases read at once (default 8)")
    lim = p.add_argument_group("thresholds (crossed when the value is above the limit)")
    lim.add_argument("--max-l0", type=whole_number(), metavar="N",
                     help="L0 SSTs of the deepest tree (0.17 stalls writers at l0_max_ssts)")
    lim.add_argument("--max-sorted-runs", type=whole_number(), metavar="N",
                     help="sorted runs of the tree with the most")
    lim.add_argument("--max-manifests", type=whole_number(), metavar="N",
                     help="manifest versions on storage")
    lim.add_argument("--max-gc-backlog-bytes", type=size(minimum=0), metavar="SIZE",
                     help="bytes a default GC run would reclaim now, e.g. 10GiB")
    lim.add_argument("--max-gc-backlog-objects", type=whole_number(), metavar="N",
                     help="objects a default GC run would delete now")
    lim.add_argument("--max-checkpoint-age", type=_duration, metavar="DURATION",
                     help="age of the oldest live checkpoint, e.g. 7days")
    lim.add_argument("--max-wal-to-replay", type=whole_number(), metavar="N",
                     help="WAL SSTs after the manifest's replay point (a reopen replays them)")
    lim.add_argument("--max-compaction-age", type=_duration, metavar="DURATION",
                     help="time since the last compaction (a database with L0 SSTs that "
                          "never compacted crosses it too), e.g. 1h")
    lim.add_argument("--no-foreign-compactor", action="store_true",
                     help="a compactor other than slatelib holding the epoch is a breach")
    page = p.add_argument_group("HTML page")
    page.add_argument("--html", metavar="FILE",
                      help="also write a self-contained HTML page: the table and, per "
                           "database, sorted-run sizes and L0 depth over time")
    hist = page.add_mutually_exclusive_group()
    hist.add_argument("--status-history", metavar="FILE",
                      help="the compaction service's status history (its --status-history) "
                           "for the L0 charts")
    hist.add_argument("--status-file", metavar="FILE",
                      help="the compaction service's status file: its status history is "
                           "charted")
    p.set_defaults(func=cmd_health)
