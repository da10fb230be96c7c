"""The jobs' SparkSession (``slatelib/spark/session.py``): ``[spark]`` settings, the launch
and the log4j file, without starting Spark."""

from __future__ import annotations

import shlex

import pytest

from slatelib.config import SparkSettings
from slatelib.spark import session
from slatelib.spark.session import DEFAULTS, fallback_master, launch_environment, session_conf


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


def test_the_shipped_log4j_file_is_applied_unless_one_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    assert session.LOG4J_CONF.is_file()
    text = session.LOG4J_CONF.read_text()
    assert "${env:SLATELIB_SPARK_LOG_LEVEL:-WARN}" in text and "SYSTEM_ERR" in text
    assert session.log4j_java_option({}) == (
        f"-Dlog4j.configurationFile={session.LOG4J_CONF.as_uri()}")
    mine = {"SPARK_SUBMIT_OPTS": "-Xss4m -Dlog4j.configurationFile=/etc/mine.properties"}
    assert session.log4j_java_option(mine) is None
    assert session.log4j_java_option({"JAVA_TOOL_OPTIONS": "-Dlog4j2.configurationFile=x"}) is None
    # the launch puts it in SPARK_SUBMIT_OPTS (before spark.driver.extraJavaOptions)
    env = session.launch_environment([], fallback="local[1]", environ={"SPARK_SUBMIT_OPTS": "-Xss4m"})
    assert env["SPARK_SUBMIT_OPTS"] == f"-Xss4m {session.log4j_java_option({})}"
    assert "SPARK_SUBMIT_OPTS" not in session.launch_environment([], fallback="x", environ=mine)
