"""The units of a compaction job: ``CompactionTask`` -> ``CompactionResult`` / ``TaskFailure``.

A :class:`CompactionTask` is everything one executor needs to compact one key range and
nothing else: how to open the store (a :class:`~slatelib.objstore.StoreSpec`), the database
root, the range, the input views that overlap it (with their SST handles and resolved
object paths, clone SSTs included), the retention parameters and the output options. It is
small, frozen and picklable, and independent of how the compaction was chosen (our
planner today, an official coordinator's ``compactions/`` entry later).

A feature may attach an :class:`OutputCheck` (``after_outputs``): the engine's hook, called in
the same task once the outputs are written (:func:`~slatelib.ops.engine.run_compaction_task`),
what it returns kept in :attr:`CompactionResult.check`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from slatelib import errors as errors_module
from slatelib.core.compaction_inputs import TaskView as TaskView  # re-exported
from slatelib.core.manifest import SstHandle
from slatelib.core.ranges import BytesRange
from slatelib.core.retention import RetentionStats
from slatelib.errors import InternalError, SlateError
from slatelib.format.sst import SstWriterOptions
from slatelib.ids import Ulid, ulid_to_str
from slatelib.objstore import ObjectStore, StoreSpec


@dataclass(frozen=True, slots=True)
class TaskSource:
    """An L0 view (one entry) or a sorted run (its views in key order), newest first."""

    name: str
    views: tuple[TaskView, ...]


@dataclass(frozen=True, slots=True)
class CompactionTask:
    """One key range of one compaction, for one executor."""

    store: StoreSpec
    db_path: str
    compaction_id: Ulid
    index: int
    range: BytesRange
    sources: tuple[TaskSource, ...]
    retention_min_seq: int
    bottom: bool
    clock_tick: int
    sst_options: SstWriterOptions
    max_sst_size: int
    merge_operator: str | None = None
    max_fetch_tasks: int = 4
    bytes_to_fetch: int = 2 * 1024 * 1024
    min_ulid_ms: int = 0
    """Output SST ULIDs are minted no earlier than this (the compaction id's time), so
    0.17's GC low watermark always covers them even if this executor's clock lags."""
    after_outputs: OutputCheck | None = None
    """The feature's hook run after the outputs are written (None: the compaction alone)."""

    @property
    def label(self) -> str:
        return f"{ulid_to_str(self.compaction_id)}#{self.index}"


class OutputCheck(Protocol):
    """A check that travels with a task (so it must pickle) and that the engine runs in the
    same task, after the outputs are written: ``check(store, task, outputs)``; its value is
    kept in :attr:`CompactionResult.check`. It should report a failure in its value: one that
    raises fails the task (as a :class:`TaskFailure`)."""

    def __call__(self, store: ObjectStore, task: CompactionTask,
                 outputs: Sequence[SstHandle]) -> object: ...


@dataclass(frozen=True)
class TaskMetrics:
    """What one task did, and how long each phase took (seconds)."""

    rows_in: int = 0
    rows_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    ssts_in: int = 0
    retention: dict[str, int] = field(default_factory=dict)
    read_s: float = 0.0
    merge_s: float = 0.0
    write_s: float = 0.0
    total_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_bytes: int = 0
    windows: int = 0


@dataclass(frozen=True, slots=True)
class TaskTimes:
    """When one task's steps happened, as wall-clock seconds since the epoch
    (``time.time()``; 0.0: not known). ``submitted`` and ``collected`` are the driver's
    (the runner call that ran the task began, its results were back); ``launched`` is the
    first moment the runner's own code ran where the task runs (a Spark runner: the
    partition's function, before the task spec is unpickled; 0.0 elsewhere), ``started``
    and ``ended`` bound the task's own code (:func:`~slatelib.ops.engine.run_compaction_task`).
    On a cluster the executors' clocks may differ from the driver's: the breakdown clamps
    them (:mod:`slatelib.ops.compaction.breakdown`)."""

    submitted: float = 0.0
    launched: float = 0.0
    started: float = 0.0
    ended: float = 0.0
    collected: float = 0.0


@dataclass(frozen=True)
class CompactionResult:
    """The output SSTs of one task (in key order) and its metrics."""

    index: int
    outputs: tuple[SstHandle, ...]
    metrics: TaskMetrics
    attempt: int = 1
    check: object | None = None
    """What the task's :class:`OutputCheck` returned (None: the task had none)."""
    times: TaskTimes | None = None
    """When the task ran (None: its runner did not say)."""


@dataclass(frozen=True)
class TaskFailure:
    """A task that raised, as a picklable value (Spark would lose the error's type)."""

    index: int
    error_type: str
    message: str
    retryable: bool
    path: str | None = None
    block: int | None = None
    region: str | None = None
    attempt: int = 1
    executor: str | None = None
    """Where the task ran (``host/executor``), when a Spark runner says."""

    @staticmethod
    def of(index: int, exc: BaseException) -> TaskFailure:
        retryable = isinstance(exc, errors_module.UnavailableError | errors_module.
                               CommitStateUnknownError | errors_module.AlreadyExistsError)
        return TaskFailure(
            index=index,
            error_type=type(exc).__name__ if isinstance(exc, SlateError) else "InternalError",
            message=str(exc) if isinstance(exc, SlateError)
            else f"{type(exc).__name__}: {exc}",
            retryable=retryable,
            path=getattr(exc, "path", None),
            block=getattr(exc, "block", None),
            region=getattr(exc, "region", None),
        )

    def to_error(self) -> SlateError:
        """The error to raise on the driver, of the same slatelib kind (path, block and
        region kept)."""
        cls: Any = getattr(errors_module, self.error_type, InternalError)
        if not (isinstance(cls, type) and issubclass(cls, SlateError)) or issubclass(
                cls, errors_module.MergeOperatorMissingError):
            cls = InternalError if cls is not errors_module.MergeOperatorMissingError \
                else errors_module.InvalidArgumentError
        where = f" on executor {self.executor}" if self.executor else ""
        message = (f"compaction task {self.index} failed (attempt {self.attempt}){where}: "
                   f"{self.message}")
        try:
            err: SlateError = cls(message)
        except TypeError:
            err = InternalError(message)
        for name in ("path", "block", "region"):
            value = getattr(self, name)
            if value is not None:
                setattr(err, name, value)
        return err


TaskOutcome = CompactionResult | TaskFailure


def sum_retention(results: list[CompactionResult]) -> RetentionStats:
    total = RetentionStats()
    for r in results:
        total.add(RetentionStats(**r.metrics.retention))
    return total
