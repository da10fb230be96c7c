"""Build the SparkSession for a job, with Spark's own logging quiet. Nothing else lives here.

``[spark]`` settings (``master``, ``app_name``, ``log_level``, ``[spark.conf]``) are applied
here, below anything spark-submit was given (:func:`session_conf`); under spark-submit the
master is always spark-submit's (its ``--master``, default ``local[*]``).

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

from slatelib.config import SparkSettings, env_file_variables

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


def _submitted_log_level(conf: dict[str, str], level: str | None) -> str | None:
    """Under spark-submit: the ``spark.log.level`` to set, so that the SparkContext drops to
    warnings as it starts (the JVM runs already, with whatever log4j configuration
    spark-submit gave it); None when spark-submit or ``conf`` set one and no
    ``SLATELIB_SPARK_LOG_LEVEL`` (or ``[spark] log_level``, ``level``) overrides it."""
    from pyspark import SparkConf

    if level:
        return level
    if "spark.log.level" in conf or SparkConf().contains("spark.log.level"):
        return None
    java = SparkConf().get("spark.driver.extraJavaOptions") or ""
    return None if _has_log4j_option(java) else "WARN"


def submitted_conf() -> dict[str, str]:
    """What spark-submit set (its options, ``--conf``, ``spark-defaults.conf``), read from
    the already running JVM; empty when this driver was not started by spark-submit."""
    if not launched_by_spark_submit():
        return {}
    from pyspark import SparkConf

    return dict(SparkConf().getAll())


DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.python.worker.reuse": "true",
    "spark.task.maxFailures": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
"""The jobs' Spark properties, below ``[spark.conf]`` and anything spark-submit set."""


def session_conf(app_name: str, *, master: str | None = None,
                 conf: dict[str, str] | None = None, settings: SparkSettings | None = None,
                 submitted: dict[str, str] | None = None,
                 environ: dict[str, str] | None = None) -> dict[str, str]:
    """The Spark properties :func:`build_spark` sets (before the log settings), lowest
    first: :data:`DEFAULTS`, ``[spark.conf]``, ``[spark] app_name`` (else ``app_name``) and
    ``master``, ``SLATELIB_SPARK_MASTER``, the ``conf`` and ``master`` arguments; the
    variables ``--env-file`` loaded as ``spark.executorEnv.*``. Keys in ``submitted`` (what
    spark-submit set) are left out, so spark-submit's own options win; its default app name
    (the script's file name) does not count as given."""
    st = settings or SparkSettings()
    env = os.environ if environ is None else environ
    submitted = submitted or {}
    merged = {**DEFAULTS, **st.conf_dict()}
    merged["spark.app.name"] = st.app_name or app_name
    if not os.environ.get("SPARK_MASTER"):
        chosen = env.get("SLATELIB_SPARK_MASTER") or st.master or merged.get("spark.master")
        merged["spark.master"] = chosen or "local[*]"
    merged.update(conf or {})
    if master:
        merged["spark.master"] = master
    for name, value in env_file_variables().items():
        merged.setdefault(f"spark.executorEnv.{name}", value)
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    for key in list(merged):
        if key in submitted and not (key == "spark.app.name" and submitted[key] == script):
            del merged[key]
    return merged


def build_spark(app_name: str, *, master: str | None = None,
                conf: dict[str, str] | None = None,
                settings: SparkSettings | None = None) -> SparkSession:
    """A SparkSession for ``app_name`` with the properties of :func:`session_conf`:
    ``master`` defaults to what spark-submit set, else ``SLATELIB_SPARK_MASTER``, else
    ``[spark] master``, else ``local[*]``. Executors run this interpreter (the project's
    virtualenv) unless ``PYSPARK_PYTHON`` says otherwise. Spark logs warnings and errors
    only, unless ``SLATELIB_SPARK_LOG_LEVEL`` or ``[spark] log_level`` says otherwise
    (module docstring)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    st = settings or SparkSettings()
    merged = session_conf(app_name, master=master, conf=conf, settings=st,
                          submitted=submitted_conf())
    level = os.environ.get(LOG_LEVEL_ENV) or st.log_level or None
    quiet = False
    if launched_by_spark_submit():
        if (submitted_level := _submitted_log_level(merged, level)) is not None:
            merged["spark.log.level"] = submitted_level
        quiet = True
    elif (option := log4j_java_option(merged)) is not None:
        merged["spark.driver.extraJavaOptions"] = " ".join(
            filter(None, (merged.get("spark.driver.extraJavaOptions"), option)))
        quiet = True
    if level:
        merged["spark.log.level"] = level
    builder = SparkSession.builder
    for k, v in merged.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if level or not quiet:  # the shipped file reads the variable itself
        spark.sparkContext.setLogLevel(level or "WARN")
    return spark
