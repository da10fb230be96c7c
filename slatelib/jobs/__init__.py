"""The Spark maintenance jobs (compact, gc, rescale, export) and ``slate-spark``'s launcher:
argument parsing and the entry-point shell (report, exit code) over :mod:`slatelib.ops` and
:mod:`slatelib.spark`.

Run one with ``slate-spark JOB ...`` (:mod:`slatelib.jobs.launcher`), ``python -m
slatelib.jobs.JOB ...``, or ``spark-submit`` on the module's file (the checkout's
``jobs/JOB.py`` entry scripts call these modules' ``main``; :func:`job_script` gives the
installed file's path, for ``spark-submit`` without a checkout).
"""

from __future__ import annotations

from pathlib import Path

JOB_NAMES = ("compact", "gc", "rescale", "export")
"""The jobs, each a module ``slatelib.jobs.<name>`` with ``main(argv) -> int``."""


def job_script(name: str) -> Path:
    """The file of the installed job module ``slatelib.jobs.<name>`` (``spark-submit`` runs
    it as a script: each job module calls its ``main`` when run as ``__main__``).

    Raises:
        ValueError: ``name`` is not one of :data:`JOB_NAMES`.
    """
    if name not in JOB_NAMES:
        raise ValueError(f"unknown job {name!r} (expected one of {', '.join(JOB_NAMES)})")
    return Path(__file__).resolve().parent / f"{name}.py"
