"""The executor side of :mod:`slatelib.spark.executors`: what runs first in every task.

This module imports nothing but the standard library, and Spark ships it *by value* (its
code travels in the task, see :func:`slatelib.spark.executors.on_executors`), so it runs
even on an executor whose Python has no slatelib, or another slatelib, than the driver's.
Before the task's own function is unpickled (which would import that other slatelib and
fail on a missing or changed class), :class:`Guarded` compares the executor's slatelib with
the driver's, and refuses at once with both named (:data:`MISMATCH_MARK`). It also counts
where each task ran (host and executor id) in an accumulator, for the job's report.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import socket
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MISMATCH_MARK = "SLATELIB_EXECUTOR_MISMATCH:"
"""Starts the message of every refusal, so the driver finds it in Spark's error."""

PACKAGES = ("slatelib",)
"""The packages whose sources make a build: what runs on executors. Everything a task needs
is in slatelib (the jobs too, ``slatelib/jobs/``; the checkout's ``jobs/`` entry scripts
only call them and are not part of a build)."""

_CACHE = "_slatelib_executor_guard_cache"
"""A module in ``sys.modules`` that keeps this process's build across tasks (this module's
own globals are rebuilt with each task that ships it)."""


class ExecutorMismatch(RuntimeError):
    """The executor's slatelib is missing or is not the driver's."""


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("slatelib")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build() -> dict[str, str]:
    """This process's slatelib: ``version`` (the installed distribution's), ``fingerprint``
    (a hash of the ``.py`` sources of :data:`PACKAGES`; ``""`` when slatelib is missing),
    ``location`` and ``python``. Computed once per process."""
    cache = sys.modules.get(_CACHE)
    if cache is not None and getattr(cache, "build", None):
        return dict(cache.build)
    digest = hashlib.sha256()
    location = ""
    for name in PACKAGES:
        root = _package_dir(name)
        if root is None:
            if name == "slatelib":
                digest = None  # type: ignore[assignment]
                break
            continue
        if name == "slatelib":
            location = str(root)
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            digest.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    found = {"version": _version() if digest is not None else "not installed",
             "fingerprint": digest.hexdigest()[:16] if digest is not None else "",
             "location": location, "python": sys.executable}
    module = types.ModuleType(_CACHE)
    module.build = found  # type: ignore[attr-defined]
    sys.modules[_CACHE] = module
    return dict(found)


def executor_id() -> str:
    """The executor this task runs on: from the executor's log URL (standalone and YARN
    set it), ``SPARK_EXECUTOR_ID`` (Kubernetes), the standalone work directory
    (``.../app-<id>/<executor>``) or the YARN container; ``driver`` when none says (local
    mode, where tasks run in the driver's JVM)."""
    url = os.environ.get("SPARK_LOG_URL_STDERR", "")
    if m := re.search(r"executorId=([^&]+)", url):
        return m.group(1)
    if os.environ.get("SPARK_EXECUTOR_ID"):
        return os.environ["SPARK_EXECUTOR_ID"]
    cwd = Path(os.getcwd())
    if cwd.parent.name.startswith("app-") and os.environ.get("SPARK_EXECUTOR_DIRS"):
        return cwd.name
    if os.environ.get("CONTAINER_ID"):
        return os.environ["CONTAINER_ID"]
    return "driver"


def placement() -> str:
    """``host/executor`` of this task."""
    return f"{socket.gethostname()}/{executor_id()}"


def check(expected: dict[str, str]) -> None:
    """Refuse to run when this executor's slatelib is not ``expected`` (the driver's).

    Raises:
        ExecutorMismatch: missing, or another version or build (message: MISMATCH_MARK,
            then what differs, with both sides named).
    """
    mine = build()
    if mine["version"] == expected["version"] and mine["fingerprint"] == expected["fingerprint"]:
        return
    where = f"executor {placement()} (python {mine['python']})"
    if not mine["fingerprint"]:
        problem = f"slatelib is not installed on {where}"
    else:
        problem = (f"{where} runs slatelib {mine['version']} (build {mine['fingerprint']}, "
                   f"{mine['location']}), the driver slatelib {expected['version']} (build "
                   f"{expected['fingerprint']})")
    raise ExecutorMismatch(
        f"{MISMATCH_MARK} {problem}. Executors must run the driver's slatelib: ship the "
        "packed env (make package-executor-env; --archives dist/slatelib-executor-env."
        "tar.gz#env --conf spark.pyspark.python=./env/bin/python) built from the same "
        "source, or install the same wheel on every node")


class Guarded:
    """A task function behind :func:`check`: the function travels pickled (``payload``)
    and is unpickled only once the check passed; each call counts its placement in
    ``tally`` (an accumulator of ``{"host/executor": calls}``). ``requests``: an
    accumulator of ``{field: n}`` that :class:`GuardedIterator` adds the task's own store
    requests to (docs/request-accounting.md)."""

    def __init__(self, expected: dict[str, str], payload: bytes, tally: Any,
                 requests: Any = None) -> None:
        self.expected = expected
        self.payload = payload
        self.tally = tally
        self.requests = requests
        self._fn: Callable[..., Any] | None = None

    def _function(self) -> Callable[..., Any]:
        if self._fn is None:
            check(self.expected)
            import pickle

            self._fn = pickle.loads(self.payload)
            if self.tally is not None:  # once per task: each task unpickles its own copy
                self.tally.add({placement(): 1})
        return self._fn

    def __call__(self, *args: Any) -> Any:
        return self._function()(*args)


class GuardedIterator(Guarded):
    """:class:`Guarded` for functions of a partition's iterator (``mapPartitions``,
    ``mapInArrow``, ``mapInPandas``): the check runs before the first item is taken."""

    def __call__(self, items: Iterator[Any]) -> Iterator[Any]:
        fn = self._function()
        if self.requests is None:
            return iter(fn(items))
        return self._counted(fn, items)

    def _counted(self, fn: Callable[..., Any], items: Iterator[Any]) -> Iterator[Any]:
        """``fn(items)``, adding the store requests this process made while it ran to
        ``requests`` once it is done: a difference of the process's counts, so a reused
        Python worker never reports an earlier task's requests. (slatelib is the driver's
        here: :func:`check` passed.)"""
        from slatelib.objstore import accounting

        before = accounting.snapshot()
        try:
            yield from fn(items)
        finally:
            self.requests.add((accounting.snapshot() - before).as_flat())


class Counts:
    """The accumulator parameter of the placement tally: ``{"host/executor": tasks}``."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        return {}

    def addInPlace(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:  # noqa: N802
        for key, n in b.items():
            a[key] = a.get(key, 0) + n
        return a
