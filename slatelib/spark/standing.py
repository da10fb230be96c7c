"""The standing compaction modes on Spark (docs/rfcs/0009-compaction-worker.md): worker mode
(:class:`~slatelib.ops.compaction.worker.CompactionWorker`) and the size-tiered service
(:class:`~slatelib.ops.compaction.service.CompactionService`), with each compaction's key
ranges run on the executors by :class:`~slatelib.spark.compaction.SparkTaskRunner`.

SIGTERM and SIGINT stop them: the worker hands running jobs back to their coordinators
(Scheduled); the service stops, and a second signal abandons the running compactions and
cancels their Spark jobs. Without Spark (tests) the key ranges run on threads. The flags
are parsed by ``slatelib/jobs/_compact_worker.py`` and ``slatelib/jobs/_compact_service.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from slatelib.config import Settings
from slatelib.exit_codes import EXIT_NAMES, EXIT_OK
from slatelib.ops.compaction import CompactionTask, TaskOutcome
from slatelib.ops.compaction.service import CompactionService, ServiceDb, stop_on_signals
from slatelib.ops.compaction.worker import CompactionWorker, WorkerDb, WorkerOptions
from slatelib.ops.engine import TaskRunner

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("slatelib.jobs.compact")

SERVICE_LOGGER = "slatelib.ops.compaction.service"

__all__ = ["run_service", "run_worker"]


def run_worker(spark: SparkSession | None, databases: Callable[[], list[WorkerDb]],
               settings: Settings, options: WorkerOptions, *, slots: int | None,
               task_fn: Callable[[CompactionTask], TaskOutcome],
               on_status: Callable[[dict[str, Any]], None] | None = None,
               ) -> tuple[dict[str, Any], int]:
    """Run worker mode over ``databases`` (re-listed as it polls) until it stops. Returns
    the report and the exit code: with ``until_idle``, the code of the first database whose
    scheduled work this worker left undone (5: an entry it does not execute, such as a
    segment drain; a failed job's code; a failing poll), else 0. Failing jobs are handed
    back and reported, not fatal. ``slots``: compactions' key ranges at once (default:
    Spark's default parallelism). ``on_status``: called with the status after every poll
    (the ``/metrics`` snapshot)."""
    runner = None
    if spark is not None:
        from slatelib.spark.compaction import SparkTaskRunner

        runner = SparkTaskRunner(spark, label="worker", task_fn=task_fn)
        slots = slots or spark.sparkContext.defaultParallelism
    worker = CompactionWorker(databases, settings=settings, options=options, runner=runner,
                              slots=slots, on_status=on_status)

    def on_signal(name: str) -> None:
        log.warning("worker: %s: handing running jobs back and stopping", name)
        worker.stop(release=True)

    with stop_on_signals(on_signal):
        report = worker.run()
    code = worker.exit_code()
    report["job"] = "compact"
    report["status"] = EXIT_NAMES.get(code, "error")
    if code != EXIT_OK:
        log.error("worker: scheduled work was left undone (see the report's databases: "
                  "declined, failed, last_error); exit %d", code)
    return report, code


def run_service(spark: SparkSession | None, databases: Sequence[ServiceDb],
                settings: Settings, *, task_fn: Callable[[CompactionTask], TaskOutcome],
                discover: Callable[[], Sequence[ServiceDb]] | None = None,
                parallelism: int | None = None, max_concurrent: int | None = None,
                run_for: float | None = None, until_idle: bool = False,
                status_file: str | None = None, max_sst_size: int | None = None,
                on_status: Callable[[dict[str, Any]], None] | None = None,
                ) -> tuple[dict[str, Any], int]:
    """Run the size-tiered service over ``databases`` until it stops (``discover``: lists
    them again every ``[service] discover_interval``; the other options are
    :class:`CompactionService`'s; ``parallelism`` defaults to Spark's default parallelism
    when ``[compaction] parallelism`` is 0; ``on_status``: called with the status after
    every pass, the ``/metrics`` snapshot). Returns the final report and the exit code."""
    if parallelism is None and settings.compaction.parallelism == 0 and spark is not None:
        parallelism = spark.sparkContext.defaultParallelism
    runner_factory: Callable[[ServiceDb], TaskRunner] | None = None
    on_abandon: Callable[[], None] | None = None
    if spark is not None:
        from slatelib.spark.compaction import SparkTaskRunner

        def runner_factory(db: ServiceDb) -> TaskRunner:
            return SparkTaskRunner(spark, label=f"compact {db.name}", task_fn=task_fn)

        on_abandon = spark.sparkContext.cancelAllJobs

    service = CompactionService(
        databases, settings=settings, max_concurrent=max_concurrent, run_for=run_for,
        until_idle=until_idle, status_file=status_file, parallelism=parallelism,
        max_sst_size=max_sst_size, runner_factory=runner_factory, task_fn=task_fn,
        discover=discover, on_abandon=on_abandon, on_status=on_status)
    logger = logging.getLogger(SERVICE_LOGGER)
    level = logger.level
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)  # a line per compaction is the service's output
    try:
        with stop_on_signals(service):
            return service.run()
    finally:
        logger.setLevel(level)
