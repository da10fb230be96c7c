"""``slate-spark``: run a job of the installed package on Spark from a plain shell.

    slate-spark compact --db URL [options of jobs/compact.py]
    slate-spark gc      --db URL [options of jobs/gc.py]
    slate-spark rescale ...      [options of jobs/rescale.py]
    slate-spark export  --db URL --to URL --format parquet|delta [options of jobs/export.py]

It runs the job module in this process, with this interpreter (the venv's Python, where
slatelib, PySpark and obstore are installed) as the driver and the executors' Python, and
PySpark's own bundled Spark: no ``SPARK_HOME``, ``spark-submit`` or activated venv needed.
The master is ``[spark] master`` (``--conf FILE``), ``SLATELIB_SPARK_MASTER`` or
``local[*]``; everything else is as for ``spark-submit jobs/JOB.py`` (same options, report
on stdout, headline on stderr, exit codes).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

JOBS = {
    "compact": "jobs.compact",
    "gc": "jobs.gc",
    "rescale": "jobs.rescale",
    "export": "jobs.export",
}
"""Subcommand -> job module."""

USAGE = (
    "usage: slate-spark {compact,gc,rescale,export} [JOB OPTIONS ...]\n"
    "       slate-spark JOB --help      (the job's options)\n"
)


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("slatelib")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


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
    job, rest = args[0], args[1:]
    module = JOBS.get(job)
    if module is None:
        sys.stderr.write(f"slate-spark: unknown job {job!r} (expected one of "
                         f"{', '.join(JOBS)})\n{USAGE}")
        return 2
    prepare_environment()
    main_fn = importlib.import_module(module).main
    code: int = main_fn(rest)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
