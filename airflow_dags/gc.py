"""Airflow DAG, scheduled garbage collection of SlateDB databases (``dag_id`` ``slatelib_gc``):
``spark-submit jobs/gc.py``.

Nothing from slatelib is imported here; what the DAGs share is in ``slatelib_dag_common``.
Dry run until flipped in conf: the job deletes only when ``[gc] dry_run = false`` (or a
directory's own ``dry_run = false``, ``[gc.wal_options]``) is set in one of the
``conf_files`` (``conf/base.toml`` keeps ``dry_run = true``), or when a run is
triggered with ``{"dry_run": false}``; ``{"dry_run": true}`` forces a dry run whatever the
conf says (``null``, the default, leaves it to the conf).

Per directory (``manifest``, ``wal``, ``wal_fence``, ``compacted``, ``compactions``), as
0.17's ``GarbageCollectorOptions``: ``min_ages`` (``{"wal": "1h"}``) and ``dry_runs``
(``{"wal_fence": false}``) become ``--<dir>-min-age`` / ``--[no-]<dir>-dry-run``, and
``boundary_files`` (``false``: 0.17's ``disable_boundary_files``) ``--no-boundary-files``;
``{}`` and ``null`` leave them to the conf (``[gc.<dir>_options]``).
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
    for kind, age in sorted((params.get("min_ages") or {}).items()):
        if age:
            argv += [f"--{_flag(kind)}-min-age", str(age)]
    for kind, dry in sorted((params.get("dry_runs") or {}).items()):
        if dry is not None:
            argv.append(f"--{_flag(kind)}-dry-run" if dry else f"--no-{_flag(kind)}-dry-run")
    if params.get("boundary_files") is not None:
        argv.append("--boundary-files" if params["boundary_files"] else "--no-boundary-files")
    return argv


DIRECTORIES = ("manifest", "wal", "wal_fence", "compacted", "compactions")


def _flag(kind: str) -> str:
    if kind not in DIRECTORIES:
        raise ValueError(f"gc params: no directory {kind!r} (known: {', '.join(DIRECTORIES)})")
    return kind.replace("_", "-")


_DIR_KEYS = {"type": "object", "propertyNames": {"enum": list(DIRECTORIES)}}


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
        min_ages=Param({}, **_DIR_KEYS, additionalProperties={"type": "string"},
                       description='per directory, e.g. {"wal": "1h"}; missing: the conf\'s'),
        dry_runs=Param({}, **_DIR_KEYS, additionalProperties={"type": "boolean"},
                       description='per directory, e.g. {"wal_fence": false}; missing: the '
                                   "conf's"),
        boundary_files=Param(None, type=["null", "boolean"],
                             description="false: no gc/*.boundary (stores without If-Match); "
                                         "null: [gc] boundary_files_enabled of the conf"),
    ),
    tags=["slatelib", "gc"],
)
