"""``slate … gc``: garbage-collect one database in this process (the planner of the Spark
job, without Spark).

Prints every decision as a JSON line (``{"action": "keep"|"delete", "kind", "path", "size",
"last_modified", "reason"}``) in path order per directory, then one line with the report,
in the shape of ``jobs/gc.py``'s (:mod:`slatelib.ops.job_report`): ``job``, ``status``,
``headline``, ``seconds``, ``dry_run``, ``min_age_s``, ``totals`` and ``databases`` with the
one database (counts and bytes per kind, boundary moves, removed checkpoints, detached
clones, refusals, errors and phase times) and ``store_requests`` (the object-store requests
it made, docs/request-accounting.md). ``--format table`` prints the decisions as lines
and the counts per kind as a table. The headline (``dry run: would delete 3 objects (…):
manifest 2 (…), wal 1 (…); 2 kept; nothing deleted; 0.1 s``) ends it on stderr. Dry run unless
``--no-dry-run`` is given or ``[gc] dry_run = false`` is configured (``--dry-run
--no-dry-run`` together is refused: exit code 2); a directory's own dry run
(``--no-wal-dry-run``, ``[gc.wal_options] dry_run = false``) wins over that default, and
``--<dir>-min-age`` / ``--no-boundary-files`` set the other per-directory options
(:mod:`slatelib.ops.gc.flags`).

Progress (objects listed and deleted, rate, ETA) goes to stderr when it is a terminal, or
with ``--progress`` (docs/progress.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from slatelib.cli import output
from slatelib.cli.progress import add_progress_args, with_progress
from slatelib.core.gc_rules import GcDecision
from slatelib.objstore.accounting import JobRequests
from slatelib.ops.gc import check_db_spelling, collect_garbage
from slatelib.ops.gc.flags import add_gc_args, gc_options_from_args
from slatelib.ops.job_report import db_entry, gc_db_fields, gc_report

if TYPE_CHECKING:
    from slatelib.cli.app import Context


def cmd_gc(ctx: Context) -> int | None:
    """``slate gc``: exit code 1 when some deletion failed (the report says which).

    Raises:
        InvalidArgumentError: ``--db``/``--path`` ends with ``/`` (a prefix, not a database).
        SlateError: a refusal (see :func:`slatelib.ops.gc.collect_garbage`), reported by
            ``slate`` with its exit code.
    """
    args = ctx.args
    if args.db:
        check_db_spelling(args.db, "database URL")
    elif args.path:
        check_db_spelling(args.path)
    options, forced = gc_options_from_args(ctx.settings, args)

    table = ctx.output_format == "table"
    if table:
        sys.stdout.write(_DECISION_LINE.format("ACTION", "KIND", "SIZE", "MODIFIED", "PATH",
                                               "REASON").rstrip() + "\n")

    def show(d: GcDecision) -> None:
        if table:
            j = d.to_json()
            sys.stdout.write(_DECISION_LINE.format(
                j["action"], j["kind"], output.fmt_bytes(j["size"]), j["last_modified"],
                j["path"], j["reason"]) + "\n")
        else:
            ctx.emit(d.to_json())

    started = time.monotonic()
    requests = JobRequests()
    report = collect_garbage(ctx.db_path, ctx.store, dry_run=forced, settings=ctx.settings,
                             on_decision=show, options=options)
    dry_run = report.dry_run
    seconds = time.monotonic() - started
    rep = report.to_json()
    fields = gc_db_fields(rep)
    code = int(fields.pop("exit_code"))
    job = gc_report(code, [db_entry(ctx.db_name, code, fields, seconds=seconds)],
                    seconds=seconds, dry_run=dry_run, min_age_s=report.min_age_s,
                    store_requests=requests.report())
    ctx.emit(job, table=lambda: "\n" + report_table(rep))
    ctx.headline(job["headline"])
    return code or None


_DECISION_LINE = "{:<6}  {:<11}  {:>9}  {:<20}  {}  {}"


def report_table(rep: dict[str, Any]) -> str:
    """Objects and bytes per kind of a GC report (``--format table``)."""
    deleting = "DELETED" if not rep["dry_run"] else "TO DELETE"
    rows = []
    for kind, t in rep["kinds"].items():
        gone = (t["deleted"], t["deleted_bytes"]) if not rep["dry_run"] else (
            t["to_delete"], t["to_delete_bytes"])
        rows.append((kind, output.fmt_count(t["listed"]), output.fmt_bytes(t["listed_bytes"]),
                     output.fmt_count(t["kept"]), output.fmt_bytes(t["kept_bytes"]),
                     output.fmt_count(gone[0]), output.fmt_bytes(gone[1])))
    text = output.table(("KIND", "LISTED", "SIZE", "KEPT", "KEPT SIZE", deleting,
                         deleting + " SIZE"), rows)
    for name in ("expired_checkpoints", "refused", "errors"):
        if rep.get(name):
            text += f"{name.replace('_', ' ')}: {output.generic(rep[name]).strip()}\n"
    return text


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``gc`` to the ``slate`` parser."""
    p = sub.add_parser(
        "gc", help="garbage-collect the database (dry run by default): one decision per object",
    )
    add_gc_args(p)
    add_progress_args(p)
    p.set_defaults(func=with_progress(cmd_gc))
