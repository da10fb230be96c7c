"""Build the SparkSession for a job, with Spark's own logging quiet. Nothing else lives here.

Spark's INFO lines are off by default: ``conf/log4j2.properties`` (warnings and errors, on
stderr) is applied unless a log4j configuration is already given, and
``SLATELIB_SPARK_LOG_LEVEL`` (e.g. ``INFO``) turns them back on. Started from Python
(``python jobs/compact.py``), the driver JVM gets the file with ``-Dlog4j.configurationFile``;
under ``spark-submit`` the JVM already runs, so only ``spark.log.level`` (WARN) can be set
as the SparkContext starts: the lines printed before it (about five) stay unless
spark-submit is given ``--driver-java-options -Dlog4j.configurationFile=conf/log4j2.properties``.

Under ``spark-submit`` the Python driver's stderr is merged into stdout by Spark
(``PythonRunner``); :func:`separate_stderr` points it back at the launcher's stderr so that
stdout carries the JSON report alone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J_CONF = Path(__file__).resolve().parent.parent / "conf" / "log4j2.properties"
LOG_LEVEL_ENV = "SLATELIB_SPARK_LOG_LEVEL"
_LOG4J_PROPS = ("log4j.configurationFile", "log4j2.configurationFile")


def launched_by_spark_submit() -> bool:
    """Whether ``spark-submit`` started this driver (its JVM is up and waits for us)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def separate_stderr() -> bool:
    """Under ``spark-submit``, send this process's stderr (fd 2: logging, progress, Python
    tracebacks) to the stderr of the spark-submit JVM, which Spark otherwise merges into
    stdout. Returns whether it did (Linux ``/proc`` only; elsewhere nothing changes)."""
    if not launched_by_spark_submit():
        return False
    try:
        fd = os.open(f"/proc/{os.getppid()}/fd/2", os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False
    try:
        sys.stderr.flush()
        os.dup2(fd, 2)
    finally:
        os.close(fd)
    return True


def _has_log4j_option(java_options: str) -> bool:
    return any(f"-D{p}=" in java_options for p in _LOG4J_PROPS)


def log4j_java_option(conf: dict[str, str] | None = None) -> str | None:
    """The driver JVM option that applies the shipped log4j2 file, or None when a log4j
    configuration is already given (in ``conf`` or the environment) or the file is absent
    (e.g. the jobs shipped without ``conf/``)."""
    given = " ".join(filter(None, ((conf or {}).get("spark.driver.extraJavaOptions"),
                                   os.environ.get("SPARK_SUBMIT_OPTS"),
                                   os.environ.get("JAVA_TOOL_OPTIONS"))))
    if _has_log4j_option(given) or not LOG4J_CONF.is_file():
        return None
    return f"-Dlog4j.configurationFile={LOG4J_CONF.as_uri()}"


def _submitted_log_level(conf: dict[str, str]) -> str | None:
    """Under spark-submit: the ``spark.log.level`` to set, so that the SparkContext drops to
    warnings as it starts (the JVM runs already, with whatever log4j configuration
    spark-submit gave it); None when spark-submit or ``conf`` set one and no
    ``SLATELIB_SPARK_LOG_LEVEL`` overrides it."""
    from pyspark import SparkConf

    level = os.environ.get(LOG_LEVEL_ENV)
    if level:
        return level
    if "spark.log.level" in conf or SparkConf().contains("spark.log.level"):
        return None
    java = SparkConf().get("spark.driver.extraJavaOptions") or ""
    return None if _has_log4j_option(java) else "WARN"


def build_spark(app_name: str, *, master: str | None = None,
                conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession for ``app_name``. ``master`` defaults to what spark-submit set, else
    ``local[*]``. Executors run this interpreter (the project's virtualenv) unless
    ``PYSPARK_PYTHON`` says otherwise. Spark logs warnings and errors only, unless
    ``SLATELIB_SPARK_LOG_LEVEL`` says otherwise (module docstring)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif "spark.master" not in (conf or {}) and not os.environ.get("SPARK_MASTER"):
        builder = builder.config("spark.master", os.environ.get("SLATELIB_SPARK_MASTER", "local[*]"))
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.python.worker.reuse": "true",
        "spark.task.maxFailures": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    merged = {**defaults, **(conf or {})}
    quiet = False
    if launched_by_spark_submit():
        if (level := _submitted_log_level(merged)) is not None:
            merged["spark.log.level"] = level
        quiet = True
    elif (option := log4j_java_option(merged)) is not None:
        merged["spark.driver.extraJavaOptions"] = " ".join(
            filter(None, (merged.get("spark.driver.extraJavaOptions"), option)))
        quiet = True
    if os.environ.get(LOG_LEVEL_ENV):
        merged["spark.log.level"] = os.environ[LOG_LEVEL_ENV]
    for k, v in merged.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    level = os.environ.get(LOG_LEVEL_ENV)
    if level or not quiet:  # the shipped file reads the variable itself
        spark.sparkContext.setLogLevel(level or "WARN")
    return spark
