"""Airflow DAG, scheduled garbage collection of SlateDB databases (``dag_id`` ``slatelib_gc``):
``spark-submit jobs/gc.py``.

Nothing from slatelib is imported here; what the DAGs share is in ``slatelib_dag_common``.
Dry run until flipped in conf: the job deletes only when ``[gc] dry_run = false`` is set in
one of the ``conf_files`` (``conf/base.toml`` keeps ``dry_run = true``), or when a run is
triggered with ``{"dry_run": false}``; ``{"dry_run": true}`` forces a dry run whatever the
conf says (``null``, the default, leaves it to the conf).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from slatelib_dag_common import Param, common_params, job_dag


def gc_args(params: dict[str, Any]) -> list[str]:
    """The job's own flags from the params."""
    argv: list[str] = []
    if params.get("min_age"):
        argv += ["--min-age", params["min_age"]]
    if params.get("dry_run") is True:
        argv.append("--dry-run")
    elif params.get("dry_run") is False:
        argv.append("--no-dry-run")
    return argv


dag = job_dag(
    "slatelib_gc",
    job="gc",
    task_id="gc",
    own_args=gc_args,
    report_name="gc",
    timeout=timedelta(hours=2),
    description="Garbage-collect SlateDB databases (dry run until [gc] dry_run = false)",
    schedule=timedelta(hours=1),
    default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
    params=common_params(
        selection=True,
        min_age=Param("", type="string",
                      description="only older objects may go (e.g. 10min); empty: the conf's"),
        dry_run=Param(None, type=["null", "boolean"],
                      description="null: [gc] dry_run of the conf files (true in base.toml)"),
    ),
    tags=["slatelib", "gc"],
)
