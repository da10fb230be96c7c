"""Garbage-collect SlateDB databases on Spark.

    spark-submit jobs/gc.py --db URL [--db URL ...] [--dbs-file FILE] [--discover PREFIX]
        [--min-age DURATION] [--force] [--dry-run | --no-dry-run] [--decisions FILE]
        [--{manifest,wal,wal-fence,compacted,compactions}-min-age DURATION]
        [--[no-]{manifest,wal,wal-fence,compacted,compactions}-dry-run]
        [--no-boundary-files] [--report FILE] [--conf FILE ...] [-v]

Each database is collected by :func:`slatelib.ops.gc.run_gc` with the Spark backend
(:mod:`slatelib.spark.gc`): the driver reads the manifests, executors list ``wal/`` and
``compacted/`` in key ranges and delete in parallel. Databases are isolated: one failing
does not stop the others, and each has its own entry in the report.

Dry run is the default unless ``[gc] dry_run = false`` is configured or ``--no-dry-run`` is
given (a directory's own dry run, ``[gc.wal_options] dry_run`` or ``--[no-]wal-dry-run``,
wins over that default; :mod:`slatelib.ops.gc.flags`); a dry run writes every decision as a JSON line (``{"db": ..., "action": ...,
"reason": ...}``) to stderr, or to ``--decisions FILE`` (``-``: stdout, before the report).
The report (stdout, and ``--report FILE``; slatelib/jobs/_common.py describes its top level) gives
per database the objects and bytes per kind (listed, kept, to delete, deleted, kept on the
re-check), boundary moves, removed checkpoints, detached clones, refusals, errors and the
time per phase. Exit code: 0 when every database succeeded, else the first failure's code
(2 bad arguments, 3 fenced, 4 conflict, 5 data error or not a database root (no manifest,
or the path is a file), 6 storage unavailable, 1 other).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from slatelib.config import Settings
from slatelib.core.gc_rules import GcDecision
from slatelib.errors import InvalidArgumentError
from slatelib.flags import parse_args_suggesting
from slatelib.jobs._common import (
    DbTarget,
    add_common_args,
    counts_store_requests,
    resolve_targets,
    run_main,
)
from slatelib.ops.gc import check_db_spelling, run_gc
from slatelib.ops.gc.flags import add_gc_args, gc_options_from_args
from slatelib.ops.job_report import gc_db_fields, gc_headline, gc_report
from slatelib.spark.isolation import run_isolated

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def build_parser() -> argparse.ArgumentParser:
    """The job's arguments (the common ones of ``slatelib/jobs/_common.py`` plus GC's)."""
    p = argparse.ArgumentParser(prog="jobs/gc.py", description=__doc__.split("\n\n")[0])
    add_common_args(p)
    add_gc_args(p)  # the flags of `slate gc` too (slatelib/ops/gc/flags.py)
    p.add_argument("--decisions", metavar="FILE",
                   help="where a dry run writes its decisions, one JSON line each "
                        "(default: stderr; -: stdout, before the report)")
    return p


@contextlib.contextmanager
def decisions_out(where: str | None) -> Iterator[IO[str]]:
    """The stream the decision lines go to: ``--decisions`` FILE, ``-`` (stdout) or stderr."""
    if where and where != "-":
        with open(where, "w", encoding="utf-8") as f:
            yield f
    else:
        yield sys.stdout if where == "-" else sys.stderr


@counts_store_requests(gc_headline)
def run(spark: SparkSession, settings: Settings, args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """Collect every database the arguments name. Returns the report and the exit code.

    Raises:
        InvalidArgumentError: bad options (e.g. ``--min-age`` below the floor without
            ``--force``) or no database given; raised before any database is touched.
    """
    options, forced = gc_options_from_args(settings, args)
    options.check()
    targets = resolve_targets(args, wal_store=settings.object_store.wal_store)
    dry_run = forced or options.writes_nothing()
    with decisions_out(args.decisions if dry_run else None) as out:
        return _run(spark, settings, args, targets, options, dry_run, out)


def _run(spark: SparkSession, settings: Settings, args: argparse.Namespace,
         targets: list[DbTarget], options: Any, dry_run: bool, out: IO[str],
         ) -> tuple[dict[str, Any], int]:
    from slatelib.spark.gc import SparkBackend

    started = time.monotonic()
    out_lock = threading.Lock()  # decision lines of databases collected at once

    def one(t: DbTarget) -> dict[str, Any]:
        check_db_spelling(t.name, "database URL")
        if t.store_url.startswith("memory:"):
            raise InvalidArgumentError(f"{t.name}: memory:// stores live in one process; "
                                       "the Spark executors cannot see them")

        def show(d: GcDecision) -> None:
            line = json.dumps({"db": t.name, **d.to_json()}) + "\n"
            with out_lock:
                out.write(line)

        # One backend per database: it holds that database's cached DataFrames.
        backend = SparkBackend(spark, list_partitions=settings.gc.list_partitions,
                               delete_concurrency=settings.gc.delete_concurrency,
                               local_threshold=settings.gc.driver_listing_max)
        report = run_gc(t.open(), t.path, options, dry_run=dry_run,
                        backend=backend, on_decision=show if dry_run else None)
        return gc_db_fields(report.to_json())

    results, code = run_isolated(targets, one, concurrency=settings.gc.db_concurrency,
                                 setting="gc.db_concurrency")
    report = gc_report(code, results, seconds=time.monotonic() - started, dry_run=dry_run,
                       min_age_s=options.min_age_s)
    return report, code


headline = gc_headline  # the report's headline (slatelib/ops/job_report.py)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run every database, print the report; returns the exit code (2 for bad
    arguments, before Spark starts)."""
    args = parse_args_suggesting(build_parser(), argv)
    return run_main(args, "slatelib-gc", run, needs_spark=True, headline=headline,
                    precheck=lambda settings: gc_options_from_args(settings, args)[0].check())


if __name__ == "__main__":
    raise SystemExit(main())
