"""``slate-spark`` (``slatelib/jobs/launcher.py``): Spark options anywhere on the line, the global job
options (``--wal-store``) before or after the job's name, and the dispatch to the job."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from slatelib.jobs import launcher


def test_global_job_options_are_taken_from_anywhere_and_may_be_empty() -> None:
    assert launcher.hoist_global_options(
        ["--wal-store", "s3://w", "gc", "--db", "s3://b/a"]) == (
        ["--wal-store", "s3://w"], ["gc", "--db", "s3://b/a"])
    assert launcher.hoist_global_options(["gc", "--wal-store=", "--db", "x"]) == (
        ["--wal-store", ""], ["gc", "--db", "x"])
    assert launcher.hoist_global_options(
        ["--wal-store", "s3://w", "gc", "--wal-store=s3://w"])[0] == ["--wal-store", "s3://w"]
    for bad, why in ((["gc", "--wal-store"], "needs a value"),
                     (["--wal-store", "--db", "x"], "needs a value"),
                     (["--wal-store", "a", "gc", "--wal-store", "b"], "different values")):
        with pytest.raises(ValueError, match=why):
            launcher.hoist_global_options(bad)


def test_the_wal_store_before_the_job_reaches_the_job(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    fake_job: Callable[[int], list[list[str]]],
) -> None:
    seen = fake_job(0)
    monkeypatch.setenv("PYSPARK_PYTHON", "python")
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "python")
    monkeypatch.delenv(launcher.SUBMIT_ARGS_ENV, raising=False)  # restored after
    assert launcher.main(["--wal-store", "file:///w", "--master", "local[1]", "gc",
                          "--db", "file:///x"]) == 0
    assert seen == [["--db", "file:///x", "--wal-store", "file:///w"]]
    assert launcher.main(["--wal-store", "a", "gc", "--wal-store", "b"]) == 2
    assert "different values" in capsys.readouterr().err


def test_slate_spark_takes_spark_options_anywhere_on_the_line() -> None:
    submit, rest = launcher.split_spark_options(
        ["compact", "--master", "spark://h:7077", "--db", "s3://b/db", "--spark-conf=x.y=1 2",
         "--executor-env", "dist/env.tar.gz", "--policy", "l0", "--deploy-mode", "client"])
    assert rest == ["compact", "--db", "s3://b/db", "--policy", "l0"]
    assert submit == ["--master", "spark://h:7077", "--conf", "x.y=1 2",
                      "--archives", "dist/env.tar.gz#env",
                      "--conf", "spark.pyspark.python=./env/bin/python",
                      "--deploy-mode", "client"]
    for bad in (["--master"], ["--spark-conf", "novalue"], ["--deploy-mode", "cluster"],
                ["--master", "--db"]):
        with pytest.raises(ValueError):
            launcher.split_spark_options(bad)


def test_slate_spark_dispatches_to_the_job_module(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    fake_job: Callable[[int], list[list[str]]],
) -> None:
    seen = fake_job(3)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    assert launcher.main(["gc", "--db", "file:///x"]) == 3
    assert seen == [["--db", "file:///x"]]
    import sys

    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert launcher.main(["vacuum"]) == 2
    assert "unknown job 'vacuum'" in capsys.readouterr().err
    assert launcher.main(["--help"]) == 0
    assert "slate-spark {compact,gc,rescale,export}" in capsys.readouterr().out


def test_every_job_is_a_module_of_the_installed_package_with_its_script() -> None:
    """slate-spark dispatches to ``slatelib.jobs.<job>`` (no top-level ``jobs``), and
    ``job_script`` names the same module's file, which spark-submit can run (it calls
    ``main`` as ``__main__``)."""
    import importlib
    from pathlib import Path

    import slatelib.jobs as jobs_pkg

    assert set(launcher.JOBS) == set(jobs_pkg.JOB_NAMES)
    for name, module_name in launcher.JOBS.items():
        assert module_name == f"slatelib.jobs.{name}"
        module = importlib.import_module(module_name)
        script = jobs_pkg.job_script(name)
        assert script == Path(module.__file__ or "").resolve() and script.is_file()
        assert callable(module.main) and 'if __name__ == "__main__":' in script.read_text()
    with pytest.raises(ValueError, match="unknown job 'launcher'"):
        jobs_pkg.job_script("launcher")
