"""Compaction: plan, split into key-range tasks, execute them anywhere, commit by one CAS.

The public API, re-exported here (no logic)::

    plan_compaction(manifest, compactions, options) -> CompactionSpec | None      # pure
    execute_compaction_task(task) -> CompactionResult                            # one range
    commit_compaction(job, results) -> CommitOutcome                             # driver CAS
    run_compaction(path, store, ...) -> CompactionReport                         # all of it

Modules: :mod:`~.run` (one run: state, plan, fence, record, split, execute, commit),
:mod:`~.state` (the compactor state a run plans from), :mod:`~.commit` (the CAS writes),
:mod:`~.guard` (checks before the first write), :mod:`~.report`, :mod:`~.breakdown` (where
the execute phase's time goes), :mod:`~.service` and
:mod:`~.worker` (long-running modes). The tasks, the runner, the input readers, the range
split and merge-operator loading are the range engine's (:mod:`slatelib.ops.engine`),
shared with rescale and export; the task names are re-exported here for compaction's users.
``slatelib.ops.compact`` is kept as an alias of this package's API.
"""

from __future__ import annotations

from slatelib.core.compaction_plan import CompactionSpec, PlanOptions, Policy, plan_compaction
from slatelib.core.compaction_source import SourceId
from slatelib.ops.compaction.report import CompactionReport, CompactionSummary
from slatelib.ops.compaction.run import (
    CompactionJob,
    commit_compaction,
    plan_options,
    run_compaction,
)
from slatelib.ops.engine import (
    CompactionResult,
    CompactionTask,
    TaskFailure,
    TaskOutcome,
    TaskRunner,
    ThreadTaskRunner,
    execute_compaction_task,
    execute_tasks,
    run_compaction_task,
)

__all__ = [
    "CompactionJob",
    "CompactionReport",
    "CompactionResult",
    "CompactionSpec",
    "CompactionSummary",
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
