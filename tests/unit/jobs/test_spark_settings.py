"""``[spark]`` settings, ``--env-file`` and ``slate-spark``, without starting Spark."""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from jobs import launcher
from jobs._common import add_common_args, settings_from
from jobs._spark import DEFAULTS, fallback_master, launch_environment, session_conf
from slatelib.config import SparkSettings
from slatelib.objstore.url import set_store_defaults, store_defaults


def test_session_conf_layers_and_never_sets_what_was_submitted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    st = SparkSettings(master="local[3]", app_name="nightly", log_level="INFO",
                       conf=(("spark.executor.memory", "4g"), ("spark.ui.enabled", "true"),
                             ("spark.master", "local[4]")))
    got = session_conf("slatelib-gc", settings=st)
    assert "spark.master" not in got  # the master is the driver JVM's (launch fallback)
    assert got["spark.app.name"] == "nightly"
    assert got["spark.executor.memory"] == "4g" and got["spark.ui.enabled"] == "true"
    assert got["spark.task.maxFailures"] == DEFAULTS["spark.task.maxFailures"]
    # whatever the JVM was given wins (spark-submit's default app name, the script's, not)
    monkeypatch.setattr("sys.argv", ["/x/jobs/gc.py"])
    submitted = {"spark.master": "yarn", "spark.executor.memory": "8g", "spark.app.name": "gc.py"}
    got = session_conf("slatelib-gc", settings=st, submitted=submitted)
    assert "spark.master" not in got and "spark.executor.memory" not in got
    assert got["spark.app.name"] == "nightly"
    submitted["spark.app.name"] = "given-by-name"
    assert "spark.app.name" not in session_conf("slatelib-gc", settings=st, submitted=submitted)


def test_the_fallback_master_is_the_variable_then_the_settings_then_local() -> None:
    st = SparkSettings(master="local[3]")
    assert fallback_master(st, {"SLATELIB_SPARK_MASTER": "local[1]"}) == "local[1]"
    assert fallback_master(st, {}) == "local[3]"
    assert fallback_master(SparkSettings(conf=(("spark.master", "local[4]"),)), {}) == "local[4]"
    assert fallback_master(None, {}) == "local[*]"


def test_a_launch_puts_the_fallback_below_spark_defaults_and_submit_options_after_given() -> None:
    env = launch_environment(["--master", "spark://h:7077", "--conf", "a=b c"],
                             fallback="local[3]",
                             environ={"PYSPARK_SUBMIT_ARGS": "--driver-memory 2g pyspark-shell"})
    # MASTER is spark-submit's own fallback: below --master and spark-defaults.conf
    assert env["MASTER"] == "local[3]"
    assert shlex.split(env["PYSPARK_SUBMIT_ARGS"]) == [
        "--driver-memory", "2g", "--master", "spark://h:7077", "--conf", "a=b c", "pyspark-shell"]
    assert "MASTER" not in launch_environment([], fallback="local[3]", environ={"MASTER": "yarn"})


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


def test_jobs_load_env_files_before_settings_and_register_store_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / "job.env"
    env_file.write_text("SLATELIB_GC__MIN_AGE=10min\n")
    conf = tmp_path / "c.toml"
    conf.write_text('[object_store]\nregion = "eu-west-1"\n')
    p = argparse.ArgumentParser()
    add_common_args(p)
    args = p.parse_args(["--db", "file:///tmp/x", "--env-file", str(env_file),
                         "--conf", str(conf)])
    monkeypatch.delenv("SLATELIB_GC__MIN_AGE", raising=False)
    try:
        settings = settings_from(args)
        assert settings.gc.min_age == 600.0
        assert store_defaults("s3") == {"region": "eu-west-1"}
    finally:
        set_store_defaults(None)
        os.environ.pop("SLATELIB_GC__MIN_AGE", None)


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
