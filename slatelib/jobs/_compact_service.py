"""``jobs/compact.py --service``: the long-running size-tiered compaction service on Spark.

    spark-submit jobs/compact.py --service --db URL [--db URL ...] [--dbs-file FILE]
        [--discover PREFIX] [--max-concurrent N] [--run-for DURATION | --until-idle]
        [--status-file FILE] [--status-history FILE] [--max-sst-size SIZE] [--parallelism N] [--conf FILE ...]

The flags of the service, which runs in :func:`slatelib.spark.standing.run_service` over
:class:`slatelib.ops.compaction.service.CompactionService`: the databases come from the
usual selection (``--discover`` is listed again every ``[service] discover_interval``),
each compaction's key ranges run on the executors through
:class:`slatelib.spark.compaction.SparkTaskRunner`, SIGTERM and SIGINT stop the service (a
second one abandons the running compactions and cancels their Spark jobs). Without Spark
(tests) the key ranges run on threads.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from slatelib.config import Settings, parse_duration
from slatelib.core.compaction_plan import Policy
from slatelib.errors import InvalidArgumentError
from slatelib.flags import parse_positive
from slatelib.jobs._common import resolve_targets
from slatelib.metrics.output import StatsTarget, serving_metrics
from slatelib.objstore import ObjectStore, resolve_store
from slatelib.ops.compaction import CompactionTask, TaskOutcome
from slatelib.ops.compaction.service import ServiceDb
from slatelib.spark.standing import run_service as run_on_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def check_service_args(args: argparse.Namespace) -> None:
    """Refuse what a standing size-tiered service cannot do.

    Raises:
        InvalidArgumentError: ``--dry-run``, ``--takeover``, ``--sources`` or a policy other
            than size-tiered.
    """
    if args.dry_run or args.takeover or args.sources:
        flag = "--dry-run" if args.dry_run else "--takeover" if args.takeover else "--sources"
        raise InvalidArgumentError(
            f"{flag} does not apply with --service (run a one-shot compaction; the service "
            "never takes a foreign compactor over)")
    if args.policy is not None and Policy.parse(args.policy) != Policy.SIZE_TIERED:
        raise InvalidArgumentError(
            f"--service schedules by 0.17's size-tiered rules; --policy {args.policy} is a "
            "one-shot choice")


def service_dbs(args: argparse.Namespace, settings: Settings) -> list[ServiceDb]:
    """The databases the arguments name (a database with a WAL store gets its store opened
    with it; the others share one store per URL)."""
    targets = resolve_targets(args, wal_store=settings.object_store.wal_store)
    return [ServiceDb(t.name, t.path, t.store_url if not t.wal_store else t.open(), t.wal_store)
            for t in targets]


def run_service(spark: SparkSession | None, settings: Settings, args: argparse.Namespace,
                task_fn: Callable[[CompactionTask], TaskOutcome]) -> tuple[dict[str, Any], int]:
    """Run the service until it stops. Returns the final report and the exit code.

    Raises:
        InvalidArgumentError: bad options or no database given (before anything runs).
    """
    check_service_args(args)
    if getattr(args, "status_history", None) is not None:
        settings = dataclasses.replace(settings, service=dataclasses.replace(
            settings.service, status_history=args.status_history))
    databases = service_dbs(args, settings)
    max_sst = parse_positive(args.max_sst_size, "--max-sst-size", size=True)
    parallelism = parse_positive(args.parallelism, "--parallelism")
    max_concurrent = parse_positive(args.max_concurrent, "--max-concurrent")
    run_for = None if args.run_for is None else parse_duration(args.run_for, what="--run-for")

    def rediscover() -> Sequence[ServiceDb]:
        return service_dbs(args, settings)

    if args.metrics_port < 0 or args.metrics_port > 65535:
        raise InvalidArgumentError(f"--metrics-port must be 0 to 65535, got {args.metrics_port}")
    stats_every = parse_duration(args.metrics_db_interval, what="--metrics-db-interval")
    stores: dict[str, ObjectStore] = {}

    def stats_targets() -> list[StatsTarget]:
        out = []
        for d in (rediscover() if args.discover else databases):
            store = d.store
            if isinstance(store, str):
                store = stores.get(store) or stores.setdefault(store, resolve_store(store))
            out.append((d.name, store, d.path))
        return out

    with serving_metrics(args.metrics_port, args.metrics_host,
                         l0_limit=settings.writer.l0_max_ssts, targets=stats_targets,
                         stats_interval_s=stats_every) as metrics:
        return run_on_spark(
            spark, databases, settings, task_fn=task_fn,
            discover=rediscover if args.discover else None, parallelism=parallelism,
            max_concurrent=max_concurrent, run_for=run_for, until_idle=args.until_idle,
            status_file=args.status_file, max_sst_size=max_sst,
            on_status=None if metrics is None else metrics.publish)
