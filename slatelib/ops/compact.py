"""Compatibility alias: the compaction API moved to :mod:`slatelib.ops.compaction`.

``from slatelib.ops.compact import run_compaction, ThreadTaskRunner, ...`` keeps working;
new code imports from :mod:`slatelib.ops.compaction`. Re-exports only, no logic.
"""

from __future__ import annotations

from slatelib.ops.compaction import (
    CompactionJob,
    CompactionReport,
    CompactionResult,
    CompactionSpec,
    CompactionTask,
    PlanOptions,
    Policy,
    SourceId,
    TaskFailure,
    TaskOutcome,
    TaskRunner,
    ThreadTaskRunner,
    commit_compaction,
    execute_compaction_task,
    execute_tasks,
    plan_compaction,
    plan_options,
    run_compaction,
    run_compaction_task,
)

__all__ = [
    "CompactionJob",
    "CompactionReport",
    "CompactionResult",
    "CompactionSpec",
    "CompactionTask",
    "PlanOptions",
    "Policy",
    "SourceId",
    "TaskFailure",
    "TaskOutcome",
    "TaskRunner",
    "ThreadTaskRunner",
    "commit_compaction",
    "execute_compaction_task",
    "execute_tasks",
    "plan_compaction",
    "plan_options",
    "run_compaction",
    "run_compaction_task",
]
