"""Build the SparkSession for a job, with Spark's own logging quiet, and describe where it ran.

What the driver JVM was given always wins: spark-submit's ``--master``, ``--deploy-mode``,
``--conf``, ``--properties-file`` and ``spark-defaults.conf``, or, when the job starts the
JVM itself (``slate-spark``, ``python jobs/compact.py``), slate-spark's launch options and
``spark-defaults.conf``. The jobs read it back from the running JVM (:func:`submitted_conf`)
and add only what it left unset: :data:`DEFAULTS`, ``[spark.conf]``, ``[spark] app_name``
and the ``--env-file`` variables as ``spark.executorEnv.*`` (:func:`session_conf`).

The master: spark-submit's (its ``--master``, else ``spark-defaults.conf``, else ``MASTER``,
else ``local[*]``). A JVM started here follows the same order, with slate-spark's
``--master`` first and :func:`fallback_master` (``SLATELIB_SPARK_MASTER``, ``[spark]
master``, ``local[*]``) in the place of ``MASTER`` (:func:`start_driver_jvm`).

Spark's INFO lines are off by default: ``conf/log4j2.properties`` (warnings and errors, on
stderr) is applied unless a log4j configuration is already given, and
``SLATELIB_SPARK_LOG_LEVEL`` (e.g. ``INFO``) turns them back on. Started from Python
(``slate-spark``), the driver JVM gets the file with ``-Dlog4j.configurationFile`` in
``SPARK_SUBMIT_OPTS`` (before ``spark.driver.extraJavaOptions``, so a user's own wins);
under ``spark-submit`` the JVM already runs, so only ``spark.log.level`` (WARN) can be set
as the SparkContext starts: the lines printed before it (about five) stay unless
spark-submit is given ``--driver-java-options -Dlog4j.configurationFile=conf/log4j2.properties``.

Under ``spark-submit`` the Python driver's stderr is merged into stdout by Spark
(``PythonRunner``); :func:`separate_stderr` points it back at the launcher's stderr so that
stdout carries the JSON report alone.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slatelib.config import SparkSettings, env_file_variables
from slatelib.spark.jars import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    feature_loaded,
    local_jars,
    with_jars,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

LOG4J_CONF = Path(__file__).resolve().parents[2] / "conf" / "log4j2.properties"
"""The shipped log4j2 file of a checkout (``conf/`` beside ``slatelib/``; absent in a wheel)."""
LOG_LEVEL_ENV = "SLATELIB_SPARK_LOG_LEVEL"
SUBMIT_ARGS_ENV = "SLATELIB_SPARK_SUBMIT_ARGS"
"""slate-spark's Spark options for the driver JVM's launch (shell-quoted; ``slatelib/jobs/launcher.py``)."""
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


def log4j_java_option(environ: Mapping[str, str] | None = None) -> str | None:
    """The driver JVM option that applies the shipped log4j2 file, or None when a log4j
    configuration is already given (``SPARK_SUBMIT_OPTS``, ``JAVA_TOOL_OPTIONS``) or the file
    is absent (e.g. the jobs shipped without ``conf/``)."""
    env = os.environ if environ is None else environ
    given = " ".join(filter(None, (env.get("SPARK_SUBMIT_OPTS"), env.get("JAVA_TOOL_OPTIONS"))))
    if _has_log4j_option(given) or not LOG4J_CONF.is_file():
        return None
    return f"-Dlog4j.configurationFile={LOG4J_CONF.as_uri()}"


SHELL_BOOKKEEPING = frozenset({"spark.app.submitTime", "spark.submit.deployMode",
                               "spark.submit.pyFiles", "spark.ui.showConsoleProgress"})
"""What the driver JVM's own launch sets when slate-spark (not spark-submit) started it as a
``pyspark-shell``: not the user's settings, so the jobs' values may replace them."""


def submitted_conf() -> dict[str, str]:
    """What the driver JVM was given: spark-submit's options (``--master``, ``--name``,
    ``--conf``, ``--properties-file``) and ``spark-defaults.conf``, or, started from Python,
    the launch options of :func:`start_driver_jvm` and ``spark-defaults.conf``. Read from the
    running JVM, which is started (or attached to, under spark-submit) first: a
    ``SparkConf`` built before the JVM is up is an empty Python dict, whatever spark-submit
    was given. The launch's own bookkeeping (:data:`SHELL_BOOKKEEPING`, its default app
    name) is left out when slate-spark launched the JVM."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    conf = dict(SparkConf().getAll())
    if not launched_by_spark_submit():
        for key in SHELL_BOOKKEEPING:
            conf.pop(key, None)
        if conf.get("spark.app.name") == "pyspark-shell":
            del conf["spark.app.name"]
    return conf


def fallback_master(settings: SparkSettings | None = None,
                    environ: Mapping[str, str] | None = None) -> str:
    """The master when nothing Spark-level names one: ``SLATELIB_SPARK_MASTER``, else
    ``[spark] master`` (or ``[spark.conf] "spark.master"``), else ``local[*]``."""
    st = settings or SparkSettings()
    env = os.environ if environ is None else environ
    return (env.get("SLATELIB_SPARK_MASTER") or st.master or st.conf_dict().get("spark.master")
            or "local[*]")


def launch_environment(submit_args: list[str], *, fallback: str,
                       environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment changes that make PySpark launch the driver JVM (``spark-submit
    ... pyspark-shell``) the way spark-submit would have been run by hand:

    - ``PYSPARK_SUBMIT_ARGS``: any already set, then ``submit_args`` (slate-spark's
      ``--master``, ``--conf``, ``--archives``, ...; later options win), then
      ``pyspark-shell``;
    - ``MASTER`` (spark-submit's own fallback, below ``--master`` and ``spark-defaults.conf``'s
      ``spark.master``): ``fallback``, unless the environment sets it;
    - ``SPARK_SUBMIT_OPTS``: the shipped log4j file, unless a log4j configuration is given
      there or in ``JAVA_TOOL_OPTIONS``; spark-submit puts these options before
      ``spark.driver.extraJavaOptions``, so a user's own ``-Dlog4j...`` still wins.
    """
    env = os.environ if environ is None else environ
    given = shlex.split(env.get("PYSPARK_SUBMIT_ARGS", ""))
    if given and given[-1] == "pyspark-shell":
        given = given[:-1]
    changes = {"PYSPARK_SUBMIT_ARGS": shlex.join([*given, *submit_args, "pyspark-shell"])}
    if not env.get("MASTER"):
        changes["MASTER"] = fallback
    opts = env.get("SPARK_SUBMIT_OPTS", "")
    if (option := log4j_java_option(environ=env)) is not None:
        changes["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, (opts, option)))
    return changes


def start_driver_jvm(submit_args: list[str] | None = None, *,
                     settings: SparkSettings | None = None) -> bool:
    """Start this process's driver JVM (PySpark's gateway) unless it runs already (under
    spark-submit it always does: this attaches to it). Returns whether it was started here.

    ``submit_args`` are spark-submit options for the launch (slate-spark's ``--master``,
    ``--conf``, ...); the master otherwise follows spark-submit's own order (``--master``,
    ``spark-defaults.conf``, ``MASTER``) with :func:`fallback_master` as ``MASTER``."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None or launched_by_spark_submit():
        SparkContext._ensure_initialized()
        return False
    changes = launch_environment(list(submit_args or ()), fallback=fallback_master(settings))
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        SparkContext._ensure_initialized()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return True


DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.python.worker.reuse": "true",
    "spark.task.maxFailures": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
"""The jobs' Spark properties, below ``[spark.conf]`` and anything spark-submit set."""


def session_conf(app_name: str, *, conf: dict[str, str] | None = None,
                 settings: SparkSettings | None = None,
                 submitted: dict[str, str] | None = None) -> dict[str, str]:
    """The Spark properties :func:`build_spark` adds to what the driver JVM was given, lowest
    first: :data:`DEFAULTS`, ``[spark.conf]``, ``[spark] app_name`` (else ``app_name``), the
    ``conf`` argument, and the variables ``--env-file`` loaded as ``spark.executorEnv.*``.
    Every key in ``submitted`` (what spark-submit, slate-spark's launch options or
    ``spark-defaults.conf`` set: :func:`submitted_conf`) is left out, so those always win;
    spark-submit's default app name (the script's file name) does not count as given. The
    master is never set here: it is the driver JVM's (:func:`start_driver_jvm`)."""
    st = settings or SparkSettings()
    submitted = submitted or {}
    merged = {**DEFAULTS, **st.conf_dict()}
    merged.pop("spark.master", None)  # a fallback only: fallback_master()
    merged["spark.app.name"] = st.app_name or app_name
    merged.update(conf or {})
    for name, value in env_file_variables().items():
        merged.setdefault(f"spark.executorEnv.{name}", value)
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    for key in list(merged):
        if key in submitted and not (key == "spark.app.name" and submitted[key] == script):
            del merged[key]
    return merged


def build_spark(app_name: str, *, master: str | None = None,
                conf: dict[str, str] | None = None, settings: SparkSettings | None = None,
                submit_args: list[str] | None = None,
                jars: Sequence[str] = ("delta",)) -> SparkSession:
    """A SparkSession for ``app_name``: the driver JVM is started (:func:`start_driver_jvm`,
    with ``--master master`` and ``submit_args`` as launch options) or, under spark-submit,
    attached to; what it was given wins, and :func:`session_conf` fills in the rest.

    ``master`` is an explicit choice, like spark-submit's ``--master`` (ignored under
    spark-submit, whose own wins). Executors run ``spark.pyspark.python`` when it is set
    (as spark-submit does), else ``PYSPARK_PYTHON``, else this interpreter (the project's
    virtualenv: right for local masters and for nodes that have it at the same path).
    Spark logs warnings and errors only, unless ``SLATELIB_SPARK_LOG_LEVEL`` or ``[spark]
    log_level`` says otherwise, or a ``spark.log.level`` or log4j configuration is given
    (module docstring).

    ``jars``: the features of :mod:`slatelib.spark.jars` (``delta``, ``s3a``) whose fetched
    jars a JVM started here gets (``--jars``, merged with any given); under spark-submit,
    only its own ``--jars``/``--packages`` count. When delta-spark's classes load, Delta's
    session extension and catalog are added (:func:`delta_conf`)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    st = settings or SparkSettings()
    if submit_args is None:
        submit_args = shlex.split(os.environ.get(SUBMIT_ARGS_ENV, ""))
    launch = (["--master", master] if master else []) + list(submit_args)
    if not launched_by_spark_submit() and SparkContext._gateway is None:
        launch = launch_jars(launch, jars)
    started = start_driver_jvm(launch, settings=st)
    submitted = submitted_conf()
    merged = session_conf(app_name, conf=conf, settings=st, submitted=submitted)
    if feature_loaded(SparkContext._jvm, "delta"):
        merged.update(delta_conf({**merged, **submitted}))
    if master and not started and not launched_by_spark_submit():
        merged["spark.master"] = master  # the JVM ran already (another session of this process)
    effective = {**merged, **submitted}
    if python := effective.get("spark.pyspark.python"):
        os.environ["PYSPARK_PYTHON"] = python
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    level = os.environ.get(LOG_LEVEL_ENV) or st.log_level or None
    if level:
        merged["spark.log.level"] = level
    elif "spark.log.level" not in submitted and not (started and LOG4J_CONF.is_file()):
        # a JVM started here has the shipped log4j file (or the user's) from its launch
        if not _has_log4j_option(effective.get("spark.driver.extraJavaOptions") or ""):
            merged["spark.log.level"] = "WARN"
    builder = SparkSession.builder
    for k, v in merged.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if level:
        spark.sparkContext.setLogLevel(level)
    return spark


def launch_jars(launch: list[str], features: Sequence[str],
                environ: Mapping[str, str] | None = None) -> list[str]:
    """``launch`` with the fetched jars of ``features`` added (:func:`slatelib.spark.jars.
    with_jars`: one ``--jars`` naming the user's jars, from ``launch`` and
    ``PYSPARK_SUBMIT_ARGS``, and ours). A feature whose jars are not all fetched adds none
    (``make jars``); what that means is decided where the feature is used (the export falls
    back to delta-rs, or refuses an S3 target)."""
    env = os.environ if environ is None else environ
    paths: list[Path] = []
    for feature in features:
        found = local_jars([feature])
        if found.complete:
            paths.extend(found.paths)
        else:
            log.debug("jars of %s not fetched (missing %s): run make jars", feature,
                      ", ".join(j.filename for j in found.missing))
    given = shlex.split(env.get("PYSPARK_SUBMIT_ARGS", ""))
    return with_jars(launch, paths, given)


def delta_conf(effective: Mapping[str, str]) -> dict[str, str]:
    """What Delta needs in a session, given what is set already (``effective``): its SQL
    extension added to ``spark.sql.extensions`` (kept with any others), and its catalog as
    ``spark_catalog`` unless another catalog is configured there."""
    out: dict[str, str] = {}
    extensions = [e for e in effective.get("spark.sql.extensions", "").split(",") if e.strip()]
    if DELTA_EXTENSION not in (e.strip() for e in extensions):
        out["spark.sql.extensions"] = ",".join([*extensions, DELTA_EXTENSION])
    if not effective.get("spark.sql.catalog.spark_catalog"):
        out["spark.sql.catalog.spark_catalog"] = DELTA_CATALOG
    return out


def spark_facts(spark: SparkSession) -> dict[str, Any]:
    """The report's ``spark`` section: where the job ran (the effective master, the
    application id and name, and the deploy mode, as the driver JVM has them)."""
    from slatelib.spark.executors import tasks_by_executor

    sc = spark.sparkContext
    conf = sc.getConf()
    return {"master": sc.master, "app_id": sc.applicationId,
            "app_name": getattr(sc, "appName", None),
            "deploy_mode": conf.get("spark.submit.deployMode", "client"),
            "default_parallelism": int(sc.defaultParallelism),
            "tasks_by_executor": tasks_by_executor(sc)}
