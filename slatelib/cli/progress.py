"""Progress for ``slate`` commands (docs/progress.md): their ``--progress/--no-progress`` and
``--progress-interval`` flags, the output installed around a command (:func:`with_progress`:
on when stderr is a terminal unless the flags say otherwise), and
:class:`BytesProgressRunner`, which shows the input bytes of ``slate compact``'s finished key
ranges. Lines go to stderr only (:mod:`slatelib.ops.progress`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from slatelib.ops.compaction import CompactionTask, TaskOutcome, ThreadTaskRunner
from slatelib.ops.engine import task_bytes
from slatelib.ops.progress import Progress, add_progress_args, progress_output_from_args, start

if TYPE_CHECKING:
    from slatelib.cli.app import Context

__all__ = ["BytesProgressRunner", "add_progress_args", "with_progress"]

R = TypeVar("R")


def with_progress(cmd: Callable[[Context], R]) -> Callable[[Context], R]:
    """``cmd`` with a progress output installed while it runs, as its flags say (the
    command's parser needs :func:`add_progress_args`)."""

    @functools.wraps(cmd)
    def run(ctx: Context) -> R:
        with progress_output_from_args(ctx.args):
            return cmd(ctx)

    return run


class BytesProgressRunner:
    """``inner`` (a :class:`ThreadTaskRunner`) with the estimated input bytes of its finished
    key ranges as progress under ``label``; a runner like ``inner`` otherwise."""

    def __init__(self, inner: ThreadTaskRunner, *, label: str) -> None:
        self.inner = inner
        self.label = label
        self._progress: Progress | None = None
        self._sizes: dict[int, int] = {}
        task_fn = inner.task_fn

        def run_one(task: CompactionTask) -> TaskOutcome:
            outcome = task_fn(task)
            if self._progress is not None:
                self._progress.add(self._sizes.get(task.index, 0))
            return outcome

        inner.task_fn = run_one

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        if not tasks:
            return []
        self._sizes = {t.index: task_bytes(t) for t in tasks}
        with start(self.label, unit="bytes", total=sum(self._sizes.values())) as progress:
            self._progress = progress
            try:
                return self.inner(tasks)
            finally:
                self._progress = None
