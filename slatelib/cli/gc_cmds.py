"""``slate … gc``: garbage-collect one database in this process (the planner of the Spark
job, without Spark).

Prints every decision as a JSON line (``{"action": "keep"|"delete", "kind", "path", "size",
"last_modified", "reason"}``) in path order per directory, then one line
``{"report": {...}}`` with the counts and bytes per kind, boundary moves, removed
checkpoints, detached clones, refusals, errors and phase times. Dry run unless
``--no-dry-run`` is given or ``[gc] dry_run = false`` is configured (``--dry-run
--no-dry-run`` together is refused: exit code 2).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from slatelib.core.gc_rules import GcDecision
from slatelib.flags import OnOffFlag, accept_dash_values
from slatelib.ops.gc import check_db_spelling, collect_garbage

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
    dry_run = ctx.settings.gc.dry_run if args.dry_run is None else bool(args.dry_run)

    def show(d: GcDecision) -> None:
        ctx.emit(d.to_json())

    report = collect_garbage(ctx.db_path, ctx.store, min_age=args.min_age, force=args.force,
                             dry_run=dry_run, settings=ctx.settings, on_decision=show)
    ctx.emit({"report": report.to_json()})
    return 1 if report.error_count else None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``gc`` to the ``slate`` parser."""
    p = sub.add_parser(
        "gc", help="garbage-collect the database (dry run by default): one decision per object",
    )
    accept_dash_values(p)  # --min-age -5min: "must not be negative"
    p.add_argument("--min-age", metavar="DURATION",
                   help="only objects older than this may go (default [gc] min_age, 5min)")
    p.add_argument("--force", action="store_true",
                   help="allow --min-age below [gc] min_age_floor (5min)")
    p.add_argument("--dry-run", action=OnOffFlag, default=None,
                   help="decide and report only; --no-dry-run deletes; giving both is refused "
                        "(default [gc] dry_run)")
    p.set_defaults(func=cmd_gc)
