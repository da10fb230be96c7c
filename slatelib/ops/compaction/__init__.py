"""Compaction: plan, split into key-range tasks, execute them anywhere, commit by one CAS.

The public API, re-exported here (no logic)::

    plan_compaction(manifest, compactions, options) -> CompactionSpec | None      # pure
    execute_compaction_task(task) -> CompactionResult                            # one range
    commit_compaction(job, results) -> CommitOutcome                             # driver CAS
    run_compaction(path, store, ...) -> CompactionReport                         # all of it

Modules: :mod:`~.run` (one run: state, plan, fence, record, split, execute, commit),
:mod:`~.runner` (where tasks run, retries), :mod:`~.task` (the picklable task and its
outcome), :mod:`~.execute` / :mod:`~.input` / :mod:`~.output` (one task on an executor),
:mod:`~.plan_io` (state reads and range splitting), :mod:`~.commit` (the CAS writes),
:mod:`~.guard` (checks before the first write), :mod:`~.report`.
``slatelib.ops.compact`` is kept as an alias of this package's API.
"""

from __future__ import annotations

from slatelib.core.compaction_plan import CompactionSpec, PlanOptions, Policy, plan_compaction
from slatelib.core.compaction_source import SourceId
from slatelib.ops.compaction.execute import execute_compaction_task
from slatelib.ops.compaction.report import CompactionReport
from slatelib.ops.compaction.run import (
    CompactionJob,
    commit_compaction,
    plan_options,
    run_compaction,
)
from slatelib.ops.compaction.runner import (
    TaskRunner,
    ThreadTaskRunner,
    execute_tasks,
    run_compaction_task,
)
from slatelib.ops.compaction.task import (
    CompactionResult,
    CompactionTask,
    TaskFailure,
    TaskOutcome,
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
