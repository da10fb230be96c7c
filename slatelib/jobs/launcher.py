"""``slate-spark``: run a job of the installed package on Spark from a plain shell.

    slate-spark compact --db URL [options of jobs/compact.py]
    slate-spark gc      --db URL [options of jobs/gc.py]
    slate-spark rescale ...      [options of jobs/rescale.py]
    slate-spark export  --db URL --to URL --format parquet|delta [options of jobs/export.py]

Spark options, anywhere on the line (they are spark-submit's, with ``--spark-conf`` for
its ``--conf``, which the jobs use for their settings files):

    --master URL              e.g. spark://host:7077, yarn, k8s://https://host:6443
    --deploy-mode client      (the only mode a job started from Python can run in)
    --spark-conf KEY=VALUE    a Spark property (repeatable)
    --properties-file FILE    instead of spark-defaults.conf
    --archives ARCHIVE[#DIR]  unpacked in each executor's working directory (repeatable)
    --py-files FILE           (repeatable)
    --executor-env ARCHIVE    a packed env (make package-executor-env): the same as
                              --archives ARCHIVE#env --spark-conf spark.pyspark.python=./env/bin/python

Job options every job takes may also come before the job's name (``slate-spark --wal-store
s3://wal-bucket gc --db ...``): ``--wal-store URL``, the object store that keeps the
databases' WAL (:data:`GLOBAL_JOB_OPTIONS`).

It runs the job module in this process, with this interpreter (the venv's Python, where
slatelib, PySpark and obstore are installed) as the driver, and PySpark's own bundled Spark
(or ``SPARK_HOME``'s): no ``spark-submit`` or activated venv needed. The options above are
handed to the driver JVM's launch as spark-submit options, so they win over
``spark-defaults.conf``, which wins over the settings. The master: ``--master``, else
``spark-defaults.conf``, else ``SLATELIB_SPARK_MASTER``, ``[spark] master`` (``--conf FILE``)
or ``local[*]``. Executors run ``spark.pyspark.python`` if set, else this interpreter.
Everything else is as for ``spark-submit jobs/JOB.py`` (same options, report on stdout,
headline on stderr, exit codes).
"""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from collections.abc import Sequence

from slatelib.spark.session import SUBMIT_ARGS_ENV

JOBS = {
    "compact": "slatelib.jobs.compact",
    "gc": "slatelib.jobs.gc",
    "rescale": "slatelib.jobs.rescale",
    "export": "slatelib.jobs.export",
}
"""Subcommand -> job module."""

USAGE = (
    "usage: slate-spark {compact,gc,rescale,export} [JOB OPTIONS ...] [SPARK OPTIONS ...]\n"
    "       slate-spark JOB --help      (the job's options)\n"
)


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("slatelib")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


SPARK_VALUE_OPTIONS = {
    "--master": "--master",
    "--deploy-mode": "--deploy-mode",
    "--spark-conf": "--conf",
    "--properties-file": "--properties-file",
    "--archives": "--archives",
    "--py-files": "--py-files",
    "--executor-env": None,
}
"""slate-spark's Spark options -> the spark-submit option each becomes (None: expanded)."""

GLOBAL_JOB_OPTIONS = ("--wal-store",)
"""Options of every job (``slatelib/jobs/_common.py`` ``add_common_args``) that slate-spark also takes
before the job's name; they are handed to the job."""


def hoist_global_options(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(global job options, the rest)``: every :data:`GLOBAL_JOB_OPTIONS` (``--opt VALUE``
    or ``--opt=VALUE``; the value may be empty) taken out of ``args``, wherever it is.

    Raises:
        ValueError: an option without its value, or given twice with different values.
    """
    found: dict[str, str] = {}
    rest: list[str] = []
    it = iter(args)
    for arg in it:
        name, eq, value = arg.partition("=")
        if name not in GLOBAL_JOB_OPTIONS:
            rest.append(arg)
            continue
        if not eq:
            nxt = next(it, None)
            if nxt is None or nxt.startswith("--"):
                raise ValueError(f"{name} needs a value")
            value = nxt
        if found.get(name, value) != value:
            raise ValueError(f"{name} given twice with different values "
                             f"({found[name]!r}, {value!r})")
        found[name] = value
    return [x for name, value in found.items() for x in (name, value)], rest


def split_spark_options(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(spark-submit options, the rest)`` of a slate-spark command line: the Spark options
    (:data:`SPARK_VALUE_OPTIONS`, ``--opt VALUE`` or ``--opt=VALUE``) may come anywhere.

    Raises:
        ValueError: an option without its value, ``--spark-conf`` without ``=``, or a
            ``--deploy-mode`` other than client.
    """
    submit: list[str] = []
    rest: list[str] = []
    it = iter(args)
    for arg in it:
        name, eq, value = arg.partition("=")
        if name not in SPARK_VALUE_OPTIONS or arg == "--":
            rest.append(arg)
            continue
        if not eq:
            value = next(it, "")
            if not value or value.startswith("--"):
                raise ValueError(f"{name} needs a value")
        if name == "--spark-conf" and "=" not in value:
            raise ValueError(f"--spark-conf {value!r}: expected KEY=VALUE")
        if name == "--deploy-mode" and value != "client":
            raise ValueError(f"--deploy-mode {value}: slate-spark runs the driver here "
                             "(client mode); submit with spark-submit for cluster mode")
        if name == "--executor-env":
            submit += ["--archives", f"{value}#env",
                       "--conf", "spark.pyspark.python=./env/bin/python"]
        else:
            submit += [str(SPARK_VALUE_OPTIONS[name]), value]
    return submit, rest


def prepare_environment(environ: dict[str, str] | None = None) -> None:
    """Make Spark run this interpreter on the driver and the executors (unless
    ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` say otherwise)."""
    env = os.environ if environ is None else environ
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE + "\n" + (__doc__ or "").split("\n\n", 2)[2])
        return 0 if args else 2
    if args[0] == "--version":
        sys.stdout.write(f"slate-spark {_version()}\n")
        return 0
    try:
        submit, args = split_spark_options(args)
        global_opts, args = hoist_global_options(args)
    except ValueError as exc:
        sys.stderr.write(f"slate-spark: {exc}\n{USAGE}")
        return 2
    if not args:
        sys.stderr.write(f"slate-spark: no job given\n{USAGE}")
        return 2
    job, rest = args[0], args[1:]
    module = JOBS.get(job)
    if module is None:
        sys.stderr.write(f"slate-spark: unknown job {job!r} (expected one of "
                         f"{', '.join(JOBS)})\n{USAGE}")
        return 2
    prepare_environment()
    if submit:
        os.environ[SUBMIT_ARGS_ENV] = shlex.join(submit)
    main_fn = importlib.import_module(module).main
    code: int = main_fn(rest + global_opts)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
