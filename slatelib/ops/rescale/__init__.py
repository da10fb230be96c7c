"""Rescaling databases: split one into shards by key range, merge shards into one.

Public API::

    split_database(source, store, targets, *, at=None, ...) -> RescaleReport
    merge_databases(sources, target, store, ...) -> RescaleReport

See :mod:`slatelib.ops.rescale.run` for the steps, :mod:`slatelib.core.rescale_plan` for the
pure planning, and ``jobs/rescale.py`` for the Spark job.
"""

from __future__ import annotations

from slatelib.ops.rescale.report import RescaleReport
from slatelib.ops.rescale.run import (
    DEFAULT_LIVE_WINDOW_S,
    BatchRunner,
    RescaleOptions,
    RunnerFactory,
    merge_databases,
    split_database,
)
from slatelib.ops.rescale.task_check import run_checked_compaction_task
from slatelib.ops.rescale.validate import Mapper, ScanTask, run_scan_task, thread_mapper

__all__ = [
    "DEFAULT_LIVE_WINDOW_S",
    "BatchRunner",
    "Mapper",
    "RescaleOptions",
    "RescaleReport",
    "RunnerFactory",
    "ScanTask",
    "merge_databases",
    "run_checked_compaction_task",
    "run_scan_task",
    "split_database",
    "thread_mapper",
]
