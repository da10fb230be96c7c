"""The one way the jobs run Python on Spark executors (docs/rfcs/0017-cluster-execution.md).

Every function a job hands to Spark (``rdd.map``, ``mapPartitions``, ``mapInArrow``,
``mapInPandas``) is wrapped by :func:`on_executors` first. On the executor the wrapper
(:mod:`slatelib.spark.guard`, shipped by value) then:

- refuses at once, before the function is unpickled, when the executor's slatelib is not
  the driver's (another version or another build of the sources) or is missing, naming
  both sides; without this the task would fail later, on a pickled class that changed;
- counts the task in a per-application tally of where tasks ran (``host/executor``),
  which every job reports (``spark.tasks_by_executor``).

On the driver, :func:`translate` turns the failures that mean "the executors are not set
up for slatelib" (the refusal above; an executor that cannot start its Python, e.g. a
packed env whose interpreter is not at the same path on every node) into
:class:`~slatelib.errors.ExecutorEnvironmentError` with what to do.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from slatelib.errors import ExecutorEnvironmentError
from slatelib.objstore.accounting import JobRequests, RequestCounts
from slatelib.spark import guard

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

_lock = threading.Lock()
_tallies: dict[str, Any] = {}
"""Application id -> the placement accumulator of that SparkContext."""
_request_tallies: dict[str, Any] = {}
"""Application id -> the store-request accumulator of that SparkContext."""
_registered = False


def _register_guard() -> None:
    global _registered
    if not _registered:
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(guard)  # type: ignore[no-untyped-call]
        _registered = True


def _tally(sc: SparkContext) -> Any:
    with _lock:
        app = str(sc.applicationId)
        if app not in _tallies:
            _tallies[app] = sc.accumulator({}, guard.Counts())  # type: ignore[arg-type]
        return _tallies[app]


def _requests_tally(sc: SparkContext) -> Any:
    with _lock:
        app = str(sc.applicationId)
        if app not in _request_tallies:
            _request_tallies[app] = sc.accumulator({}, guard.Counts())  # type: ignore[arg-type]
        return _request_tallies[app]


def executor_requests(sc: SparkContext) -> RequestCounts:
    """The store requests of this application's guarded iterator tasks so far, summed as
    each finished (each task adds only its own; a failed task attempt adds nothing):
    take it before and after a job and subtract (docs/request-accounting.md)."""
    with _lock:
        tally = _request_tallies.get(str(getattr(sc, "applicationId", "")))
    return RequestCounts.from_flat(tally.value) if tally is not None else RequestCounts()


def job_requests(spark: SparkSession | None) -> JobRequests:
    """The store requests of a job from now on: the driver's, and its Spark tasks' when it
    has a session (``store_requests`` of every job report)."""
    sc = getattr(spark, "sparkContext", None)
    if sc is None:  # no session (a dry run; tests that run tasks in threads)
        return JobRequests()
    return JobRequests(lambda: executor_requests(sc))


def on_executors(sc: SparkContext, fn: Callable[..., Any], *,
                 iterator: bool = False) -> Callable[..., Any]:
    """``fn`` behind the executor check and the placement tally (module docstring).
    ``iterator``: ``fn`` takes a partition's iterator (``mapPartitions``, ``mapInArrow``,
    ``mapInPandas``), so the check runs before its first item is read; such a task also
    adds the store requests it made to :func:`executor_requests`."""
    from pyspark import cloudpickle

    _register_guard()
    payload = cloudpickle.dumps(fn)  # type: ignore[no-untyped-call]
    if iterator:
        return guard.GuardedIterator(guard.build(), payload, _tally(sc), _requests_tally(sc))
    return guard.Guarded(guard.build(), payload, _tally(sc))


def map_on_executors(sc: SparkContext, fn: Callable[[Any], Any], items: Sequence[Any],
                     ) -> list[Any]:
    """``fn`` of each of ``items``, one Spark partition per item, run on the executors
    behind the check (module docstring); results in ``items`` order. The check runs before
    the partition's item is unpickled (``rdd.map`` would unpickle it first)."""
    if not items:
        return []

    def each(part: Iterator[Any]) -> Iterator[Any]:
        return map(fn, part)

    guarded = on_executors(sc, each, iterator=True)
    return list(sc.parallelize(list(items), len(items)).mapPartitions(guarded).collect())


def spark_mapper(spark: SparkSession, label: str = "spark tasks",
                 ) -> Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]:
    """A ``Mapper`` (:data:`slatelib.ops.rescale.Mapper`) that runs each item on the
    executors, one partition each (:func:`map_on_executors`), with the tasks done as
    progress under ``label`` (:mod:`slatelib.spark.progress`)."""

    def run(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        from slatelib.ops.progress import start
        from slatelib.spark.progress import track

        progress = start(label, unit="tasks", total=len(items))
        with track(spark.sparkContext, progress):
            out = map_on_executors(spark.sparkContext, fn, items)
        progress.finish(len(items))
        return out

    return run


def tasks_by_executor(sc: SparkContext) -> dict[str, int]:
    """Where this application's guarded tasks ran: ``{"host/executor": tasks}`` (``driver``
    as the executor in local mode). Speculative and retried attempts count too."""
    with _lock:
        tally = _tallies.get(str(sc.applicationId))
    return dict(sorted(tally.value.items())) if tally is not None else {}


_CANNOT_RUN = re.compile(r'Cannot run program "([^"]+)"[^\n]*')


def translate(exc: BaseException) -> ExecutorEnvironmentError | None:
    """The :class:`~slatelib.errors.ExecutorEnvironmentError` a Spark failure stands for,
    or None when it is not about the executors' set-up."""
    text = str(exc)
    if guard.MISMATCH_MARK in text:
        start = text.index(guard.MISMATCH_MARK) + len(guard.MISMATCH_MARK)
        line = text[start:].splitlines()[0].strip()
        return ExecutorEnvironmentError(line)
    if m := _CANNOT_RUN.search(text):
        program = m.group(1)
        hint = ""
        if program.startswith("./"):
            archive = program.split("/")[1]
            hint = (f" {program} comes from an archive shipped as '#{archive}' (--archives "
                    f"...#{archive}): is it given? A packed env (make package-executor-env) "
                    "links bin/python to the Python it was built with, which must exist at "
                    "the same path on every node (make package-executor-env prints it)")
        else:
            hint = " (spark.pyspark.python must name a Python that exists on every node)"
        return ExecutorEnvironmentError(
            f"an executor could not start its Python: {m.group(0).strip()}.{hint}")
    return None
