"""``jobs/compact.py --worker``: the flags of worker mode, which runs in
:func:`slatelib.spark.standing.run_worker` over
:class:`slatelib.ops.compaction.worker.CompactionWorker`.

The driver polls and claims, heartbeats and reports; each claimed compaction's key ranges
run on the executors as one Spark job per range (so that each finished range is recorded
in the job's context at once). SIGTERM and SIGINT hand running jobs back to their
coordinators (Scheduled) and stop; ``--run-for`` and ``--until-idle`` stop claiming and
finish what runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from slatelib.config import Settings, parse_duration
from slatelib.errors import InvalidArgumentError
from slatelib.flags import parse_positive
from slatelib.jobs._common import resolve_targets
from slatelib.metrics.output import StatsTarget, serving_metrics
from slatelib.objstore import ObjectStore
from slatelib.ops.compaction import CompactionTask, TaskOutcome
from slatelib.ops.compaction.worker import WorkerDb, WorkerOptions
from slatelib.spark.standing import run_worker as run_on_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


ONE_SHOT_ONLY = ("policy", "sources", "dry_run", "takeover")


def check_worker_args(args: argparse.Namespace) -> None:
    """Raises:
        InvalidArgumentError: an option of one-shot runs was given with ``--worker``."""
    given = [f"--{n.replace('_', '-')}" for n in ONE_SHOT_ONLY if getattr(args, n, None)]
    if given:
        raise InvalidArgumentError(
            f"{', '.join(given)} cannot be used with --worker: the coordinator decides what "
            "to compact and commits it")


def worker_options(settings: Settings, args: argparse.Namespace) -> WorkerOptions:
    """The worker's options: settings, then the flags.

    Raises:
        InvalidArgumentError: a bad flag or setting.
    """
    opts = WorkerOptions.from_settings(
        settings,
        max_concurrent=parse_positive(args.max_concurrent, "--max-concurrent"),
        run_for_s=None if args.run_for is None else parse_duration(args.run_for,
                                                                    what="--run-for"),
        until_idle=bool(args.until_idle) or None,
        status_file=args.status_file or None,
    )
    opts.check()
    return opts


def database_lister(args: argparse.Namespace, wal_store: str = "",
                    ) -> Callable[[], list[WorkerDb]]:
    """The databases the arguments name, re-resolved on each call (``--discover`` finds
    new ones), with one store per store URL and WAL store (``wal_store``: the settings'
    default WAL store)."""
    stores: dict[tuple[str, str], ObjectStore] = {}

    def databases() -> list[WorkerDb]:
        out = []
        for t in resolve_targets(args, wal_store=wal_store):
            store = stores.get((t.store_url, t.wal_store))
            if store is None:
                store = stores[(t.store_url, t.wal_store)] = t.open()
            out.append(WorkerDb(t.name, t.path, store))
        return out

    return databases


def run_worker(spark: SparkSession | None, settings: Settings, args: argparse.Namespace,
               task_fn: Callable[[CompactionTask], TaskOutcome],
               ) -> tuple[dict[str, Any], int]:
    """Run worker mode until it stops. Returns the report and the exit code: 2 for bad
    arguments; with ``--until-idle``, the code of the first database whose scheduled work
    this worker left undone (5: an entry it does not execute, such as a segment drain; a
    failed job's code; a failing poll), else 0. Failing jobs are handed back and reported,
    not fatal.

    Raises:
        InvalidArgumentError: bad options, or no database given.
    """
    check_worker_args(args)
    max_sst = parse_positive(args.max_sst_size, "--max-sst-size", size=True)
    if max_sst is not None:
        settings = replace(settings, compaction=replace(settings.compaction,
                                                        max_sst_size=max_sst))
    opts = worker_options(settings, args)
    databases = database_lister(args, settings.object_store.wal_store)
    databases()  # fail fast on a bad URL or an empty selection
    if args.metrics_port < 0 or args.metrics_port > 65535:
        raise InvalidArgumentError(f"--metrics-port must be 0 to 65535, got {args.metrics_port}")
    stats_every = parse_duration(args.metrics_db_interval, what="--metrics-db-interval")

    def stats_targets() -> list[StatsTarget]:
        return [(d.name, d.store, d.path) for d in databases()]

    with serving_metrics(args.metrics_port, args.metrics_host,
                         l0_limit=settings.writer.l0_max_ssts, targets=stats_targets,
                         stats_interval_s=stats_every, worker=True) as metrics:
        return run_on_spark(spark, databases, settings, opts, task_fn=task_fn,
                            slots=parse_positive(args.parallelism, "--parallelism"),
                            on_status=None if metrics is None else metrics.publish)
