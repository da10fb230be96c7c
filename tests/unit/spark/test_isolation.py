"""Per-database isolation of the jobs (``slatelib/spark/isolation.py``), without Spark."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from slatelib.errors import FencedError, InvalidArgumentError
from slatelib.jobs._common import DbTarget
from slatelib.spark.isolation import run_isolated

TARGETS = [DbTarget("file:///", f"db{i}", f"file:///db{i}") for i in range(4)]


def test_databases_run_at_once_and_results_keep_the_argument_order() -> None:
    together = threading.Barrier(2, timeout=10)  # breaks (and fails the test) if run one by one

    def fn(t: DbTarget) -> dict[str, Any]:
        if t.path in ("db0", "db1"):
            together.wait()
        if t.path == "db2":
            raise FencedError("another compactor took over")
        if t.path == "db3":
            raise RuntimeError("a bug")
        return {"rows": int(t.path[-1])}

    results, code = run_isolated(TARGETS, fn, concurrency=2)
    assert [r["db"] for r in results] == [t.name for t in TARGETS]
    assert [r["status"] for r in results] == ["success", "success", "fenced", "error"]
    assert [r["exit_code"] for r in results] == [0, 0, 3, 1]
    assert results[0]["rows"] == 0 and results[1]["rows"] == 1
    assert results[3]["error"] == {"type": "RuntimeError", "message": "a bug"}
    assert code == 3  # the first failure in argument order, not in completion order


def test_concurrency_one_runs_the_databases_in_order_on_the_calling_thread() -> None:
    seen: list[tuple[str, int]] = []

    def fn(t: DbTarget) -> dict[str, Any]:
        seen.append((t.path, threading.get_ident()))
        return {}

    results, code = run_isolated(TARGETS, fn)
    assert code == 0 and [r["db"] for r in results] == [t.name for t in TARGETS]
    assert seen == [(t.path, threading.get_ident()) for t in TARGETS]


def test_a_concurrency_below_one_is_refused_with_the_setting_named() -> None:
    with pytest.raises(InvalidArgumentError, match="gc.db_concurrency must be at least 1, got 0"):
        run_isolated(TARGETS, lambda t: {}, concurrency=0, setting="gc.db_concurrency")


def test_a_slatelib_error_raised_in_a_spark_task_keeps_its_kind_and_exit_code() -> None:
    from slatelib.errors import ChecksumMismatchError, MergeOperatorMissingError
    from slatelib.exit_codes import exit_code_for
    from slatelib.spark.isolation import raised_in_task

    text = ("An exception was thrown from the Python worker:\nTraceback (most recent call "
            "last):\n  File \"x.py\", line 1\nslatelib.errors.MergeOperatorMissingError: key "
            "6b (b'k') has merge operands but no merge operator is configured (give ...)\n")
    err = raised_in_task(text)
    assert isinstance(err, MergeOperatorMissingError) and exit_code_for(err) == 2
    assert str(err).startswith("key 6b (b'k') has merge operands")
    err = raised_in_task("...\nslatelib.errors.ChecksumMismatchError: db/x.sst: checksum\n")
    assert isinstance(err, ChecksumMismatchError) and exit_code_for(err) == 5
    assert raised_in_task("ValueError: boom") is None
    assert raised_in_task("slatelib.errors.NoSuchKind: x") is None
