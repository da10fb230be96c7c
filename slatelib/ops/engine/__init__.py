"""The range engine: key-range tasks over SST views, shared by compaction, rescale and export.

A feature (compaction, rescale, export) chooses *what* to read and *what* to commit; the
engine splits the inputs into balanced key ranges, builds one picklable task per range,
reads the inputs of a range, merges them with 0.17's retention, writes the output SSTs, and
runs the tasks somewhere (threads here, Spark executors in ``slatelib.spark``). This
``__init__`` is the engine's whole public surface (re-exports, no logic); its modules all
start with ``_`` and are private to it (``tests/unit/test_layers.py`` enforces both)::

    input_views(spec, manifest, tables) -> [InputView]               # a spec's inputs
    split_ranges(store, views, ...) -> [BytesRange]                  # the range split
    build_tasks(spec, views, ranges, TaskOptions) -> [CompactionTask]
    execute_compaction_task(task) -> CompactionResult                # one range, raises
    run_compaction_task(task) -> CompactionResult | TaskFailure      # one range, as a value
    execute_tasks(runner, tasks, max_attempts) -> ([CompactionResult], runs)
    load_merge_operator(name) -> MergeOperator | None

Hooks: a feature may attach an :class:`OutputCheck` to a task
(``replace(task, after_outputs=check)``); the engine calls it in the same task once the
outputs are written and keeps what it returns in ``CompactionResult.check`` (the rescale's
in-task check, :mod:`slatelib.ops.rescale.task_check`).

Modules: ``_task`` (the task, its outcome, the hook protocol), ``_runner`` (where tasks run,
retries), ``_execute`` (one task: read, merge, write), ``_input`` (the input readers),
``_output`` (the output SSTs), ``_output_options`` (the outputs' SST options from samples of
the database), ``_split`` (input views, the range split, task building),
``_merge_operator``.
"""

from __future__ import annotations

from slatelib.ops.engine._execute import execute_compaction_task, input_buffers
from slatelib.ops.engine._input import ReadTimer, open_inputs, source_blocks, source_rows
from slatelib.ops.engine._merge_operator import load_merge_operator
from slatelib.ops.engine._output_options import plan_database_options, plan_output_options
from slatelib.ops.engine._runner import (
    StreamingTaskRunner,
    TaskRunner,
    ThreadTaskRunner,
    execute_tasks,
    run_compaction_task,
)
from slatelib.ops.engine._split import (
    InputView,
    TaskOptions,
    build_tasks,
    fine_anchors,
    input_views,
    split_ranges,
)
from slatelib.ops.engine._task import (
    CompactionResult,
    CompactionTask,
    OutputCheck,
    TaskFailure,
    TaskMetrics,
    TaskOutcome,
    TaskSource,
    TaskTimes,
    TaskView,
    sum_retention,
)
from slatelib.ops.engine._task_size import task_bytes

__all__ = [
    "CompactionResult",
    "CompactionTask",
    "InputView",
    "OutputCheck",
    "ReadTimer",
    "StreamingTaskRunner",
    "TaskFailure",
    "TaskMetrics",
    "TaskOptions",
    "TaskOutcome",
    "TaskRunner",
    "TaskSource",
    "TaskTimes",
    "TaskView",
    "ThreadTaskRunner",
    "build_tasks",
    "execute_compaction_task",
    "execute_tasks",
    "fine_anchors",
    "input_buffers",
    "input_views",
    "load_merge_operator",
    "open_inputs",
    "plan_database_options",
    "plan_output_options",
    "run_compaction_task",
    "source_blocks",
    "source_rows",
    "split_ranges",
    "sum_retention",
    "task_bytes",
]
