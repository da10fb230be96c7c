"""Per-database isolation of the Spark jobs: one failing database does not stop the others.

Several databases run in one Spark application; each gets its own result, and up to
``db_concurrency`` of them (``[gc]`` / ``[compaction]`` settings) run at once on driver
threads. A failure is the database's entry in the report (:func:`slatelib.ops.job_report.
db_entry`) with its exit code, also when Spark wraps it: a refusal of the executors
(:func:`slatelib.spark.executors.translate`) or a slatelib error raised in a task
(:func:`raised_in_task`) keeps its kind. The process exit code is 0 when every database
succeeded, else the code of the first failed database in argument order.
"""

from __future__ import annotations

import logging
import re
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from slatelib.errors import InvalidArgumentError, SlateError
from slatelib.exit_codes import EXIT_ERROR, EXIT_OK, exit_code_for
from slatelib.ops.job_report import db_entry

log = logging.getLogger("slatelib.jobs")

__all__ = ["raised_in_task", "run_isolated", "spark_failure"]


class Named(Protocol):
    """A database of a run, as the report names it."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


def run_isolated(
    targets: Sequence[T], fn: Callable[[T], dict[str, Any]],
    exit_code: Callable[[BaseException], int] = exit_code_for, *, concurrency: int = 1,
    setting: str = "db_concurrency",
) -> tuple[list[dict[str, Any]], int]:
    """Run ``fn`` per database, turning each failure into that database's result.

    Up to ``concurrency`` databases run at once, each on its own driver thread (their Spark
    jobs share the executors); results come back in ``targets`` order either way.
    ``exit_code`` maps a :class:`SlateError` to the database's exit code (a job may
    classify more errors than the CLI does).

    Raises:
        InvalidArgumentError: ``concurrency`` below 1 (named as ``setting``).
    """
    if concurrency < 1:
        raise InvalidArgumentError(f"{setting} must be at least 1, got {concurrency}")

    def isolated(t: T) -> dict[str, Any]:
        started = time.monotonic()
        try:
            result = fn(t)
            code = int(result.pop("exit_code", EXIT_OK))
        except SlateError as exc:
            code = exit_code(exc)
            log.error("job failed [db=%s, error=%s]", t.name, exc)
            result = {"error": {"type": type(exc).__name__, "message": str(exc)}}
        except Exception as exc:  # a bug or an unexpected library error: isolate it too
            if (known := spark_failure(exc)) is not None:
                code = exit_code(known)
                log.error("job failed [db=%s, error=%s]", t.name, known)
                result = {"error": {"type": type(known).__name__, "message": str(known)}}
            else:
                code = EXIT_ERROR
                log.error("job crashed [db=%s]\n%s", t.name, traceback.format_exc())
                result = {"error": {"type": type(exc).__name__, "message": str(exc)}}
        return db_entry(t.name, code, result, seconds=time.monotonic() - started)

    workers = min(concurrency, len(targets))
    if workers <= 1:
        results = [isolated(t) for t in targets]
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="slatelib-db") as pool:
            results = list(pool.map(isolated, targets))
    codes = [r["exit_code"] for r in results if r["exit_code"] != EXIT_OK]
    return results, codes[0] if codes else EXIT_OK


def spark_failure(exc: BaseException) -> SlateError | None:
    """The slatelib error a Spark failure stands for (executors without slatelib, with
    another build of it, or unable to start their Python; or a slatelib error a task
    raised, such as a merge operator missing, so the database gets that error's exit
    code), or None."""
    if "pyspark" not in type(exc).__module__ and "py4j" not in type(exc).__module__:
        return None
    from slatelib.spark.executors import translate

    return translate(exc) or raised_in_task(str(exc))


_TASK_ERROR = re.compile(r"^slatelib\.errors\.(\w+): (.*)$", re.MULTILINE)


def raised_in_task(text: str) -> SlateError | None:
    """The last ``slatelib.errors.<Kind>: message`` line of a Python worker's traceback, as
    an error of that kind carrying that message, or None."""
    import slatelib.errors as kinds

    found = _TASK_ERROR.findall(text)
    if not found:
        return None
    name, message = found[-1]
    cls = getattr(kinds, name, None)
    if not (isinstance(cls, type) and issubclass(cls, SlateError)):
        return None
    err: SlateError = cls.__new__(cls)  # not cls(message): some kinds build their message
    Exception.__init__(err, message)
    return err
