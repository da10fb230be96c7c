"""Compact SlateDB databases on Spark: one logical compaction per database, split by key
range across executors and committed by the driver with one manifest CAS.

    spark-submit jobs/compact.py --db URL [--db URL ...] [--dbs-file FILE] [--discover PREFIX]
        [--policy l0|full|size-tiered] [--sources l0:<ULID>,sr:<id>,...]
        [--max-sst-size SIZE] [--parallelism N] [--dry-run] [--takeover] [--conf FILE ...]
        [--report FILE] [--metrics-file PATH] [--metrics-push URL] [-v]
    spark-submit jobs/compact.py --worker | --service ... [--metrics-port PORT]
        [--metrics-host HOST] [--metrics-db-interval DURATION]

Each database runs :func:`slatelib.ops.compaction.run_compaction` with a Spark task runner:
tasks are small picklable range specs, executors open their own store from the task's
``StoreSpec`` and upload their output SSTs; the driver plans, fences, records the compaction
in ``compactions/`` and commits. Progress goes to stderr; the JSON report (stdout, and
``--report FILE``; slatelib/jobs/_common.py describes its top level) has, per database, the inputs, outputs, rows and bytes in and out, the
versions and tombstones dropped, the seconds per phase and the throughput. Databases are
isolated: one failing does not stop the others.

Exit code: 0 when every database succeeded, else the first failure's: 2 invalid input,
3 fenced (another compactor took over), 4 conflict (a source disappeared or the commit kept
conflicting), 5 data error (a damaged or missing object, an unsupported database),
6 I/O failure (storage unavailable or failing), 7 compactor active (another compactor may
hold the epoch: see --takeover), 1 anything else (slatelib/exit_codes.py).
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from slatelib.config import Settings
from slatelib.errors import InvalidArgumentError
from slatelib.flags import (
    add_compaction_args,
    parse_args_suggesting,
    parse_positive,
    parse_sources,
)
from slatelib.jobs._common import (
    DbTarget,
    add_common_args,
    counts_store_requests,
    exit_code_for,
    resolve_targets,
    run_main,
)
from slatelib.ops.compaction import CompactionTask, TaskOutcome, run_compaction, run_compaction_task
from slatelib.ops.job_report import compact_db_fields, compact_headline, compact_report
from slatelib.spark.isolation import run_isolated

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("slatelib.jobs.compact")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jobs/compact.py", description=__doc__.split("\n\n")[0])
    add_common_args(p)
    add_compaction_args(p)
    mode = p.add_argument_group("standing modes (docs/rfcs/0009-compaction-worker.md)")
    which = mode.add_mutually_exclusive_group()
    which.add_argument("--worker", action="store_true",
                       help="execute the compactions that official 0.17 coordinators "
                            "(compactor_options.worker = null) schedule; never writes the "
                            "manifest")
    which.add_argument("--service", action="store_true",
                       help="a long-running size-tiered compactor for databases without a "
                            "compactor of their own")
    mode.add_argument("--max-concurrent", help="compactions held at once by the application "
                      "(default [worker] max_concurrent_compactions; with --service, "
                      "[compaction] db_concurrency)")
    until = mode.add_mutually_exclusive_group()
    until.add_argument("--run-for", help="stop after this long, e.g. 10m (then finish or "
                       "hand back what runs)")
    until.add_argument("--until-idle", action="store_true",
                       help="stop once nothing is scheduled and nothing runs")
    mode.add_argument("--status-file", help="worker and service modes: where to write the "
                      "periodic JSON status (default [worker] / [service] status_file)")
    mode.add_argument("--metrics-port", type=int, default=0, metavar="PORT",
                      help="worker and service modes: serve Prometheus metrics on "
                           "http://HOST:PORT/metrics (default 0: off; docs/metrics.md)")
    mode.add_argument("--metrics-host", default="0.0.0.0", metavar="HOST",
                      help="the address --metrics-port binds (default 0.0.0.0: every "
                           "interface, so that Prometheus can scrape the driver; "
                           "127.0.0.1 keeps it local)")
    mode.add_argument("--metrics-db-interval", default="1m", metavar="DURATION",
                      help="with --metrics-port: collect each database's stats (L0, sorted "
                           "runs, checkpoints, manifests, WAL, GC backlog: one listing and a "
                           "few reads per database) this often (default 1m; 0: not at all)")
    mode.add_argument("--status-history", metavar="FILE",
                      help="service mode: append each database's L0 depth and sorted runs to "
                      "this bounded JSON Lines file once a minute, for slate health --html "
                      "(default [service] status_history)")
    return p


@counts_store_requests(compact_headline)
def run(spark: SparkSession | None, settings: Settings, args: argparse.Namespace,
        task_fn: Callable[[CompactionTask], TaskOutcome] = run_compaction_task,
        ) -> tuple[dict[str, Any], int]:
    """Compact every database the arguments name. Returns the report and the exit code.

    ``spark`` may be None for a dry run (nothing executes).

    Raises:
        InvalidArgumentError: bad options or no database given (before any database runs).
    """
    if args.worker:
        from slatelib.jobs._compact_worker import run_worker

        return run_worker(spark, settings, args, task_fn)
    if args.service:
        from slatelib.jobs._compact_service import run_service

        return run_service(spark, settings, args, task_fn)
    check_one_shot_args(args)
    targets = resolve_targets(args, wal_store=settings.object_store.wal_store)
    sources = parse_sources(args.sources)
    max_sst = parse_positive(args.max_sst_size, "--max-sst-size", size=True)
    parallelism = parse_positive(args.parallelism, "--parallelism")
    if parallelism is None and settings.compaction.parallelism == 0 and spark is not None:
        parallelism = spark.sparkContext.defaultParallelism
    started = time.monotonic()

    def one(t: DbTarget) -> dict[str, Any]:
        from slatelib.spark.compaction import SparkTaskRunner

        runner = None if spark is None else SparkTaskRunner(
            spark, label=f"compact {t.name}", task_fn=task_fn)
        return compact_db_fields(run_compaction(
            t.path, t.open(), settings=settings, policy=args.policy, wal_store=t.wal_store,
            sources=sources, max_sst_size=max_sst, parallelism=parallelism,
            dry_run=args.dry_run, takeover=args.takeover, runner=runner,
        ).to_dict())

    results, code = run_isolated(targets, one, exit_code=exit_code_for,
                                 concurrency=settings.compaction.db_concurrency,
                                 setting="compaction.db_concurrency")
    report = compact_report(code, results, seconds=time.monotonic() - started,
                            dry_run=bool(args.dry_run))
    return report, code


headline = compact_headline  # the report's headline (slatelib/ops/job_report.py)


def check_one_shot_args(args: argparse.Namespace) -> None:
    """Refuse the standing modes' options on a one-shot run.

    Raises:
        InvalidArgumentError: one of them was given.
    """
    given = [f for f, v in (("--max-concurrent", args.max_concurrent),
                            ("--run-for", args.run_for), ("--until-idle", args.until_idle),
                            ("--status-file", args.status_file),
                            ("--status-history", args.status_history),
                            ("--metrics-port", args.metrics_port)) if v]
    if given:
        raise InvalidArgumentError(f"{', '.join(given)} only apply with --worker or --service")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args_suggesting(build_parser(), argv)
    return run_main(args, "slatelib-compact", run, needs_spark=not args.dry_run,
                    headline=headline, precheck=lambda settings: check_args(args))


def check_args(args: argparse.Namespace) -> None:
    """The one-shot options :func:`run` reads, checked before Spark starts (the standing
    modes check their own).

    Raises:
        InvalidArgumentError: naming the option.
    """
    if not (args.worker or args.service):
        check_one_shot_args(args)
        parse_sources(args.sources)
        parse_positive(args.max_sst_size, "--max-sst-size", size=True)
        parse_positive(args.parallelism, "--parallelism")


if __name__ == "__main__":
    raise SystemExit(main())
