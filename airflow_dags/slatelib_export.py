"""Airflow DAG, nightly export of a SlateDB database to Delta (``dag_id`` ``slatelib_export``):
``spark-submit jobs/export.py``.

Nothing from slatelib is imported here; what the DAGs share is in ``slatelib_dag_common``.
Each run exports the database ``db`` to the table ``to`` (params, else the Airflow Variables
``slatelib_export_db`` and ``slatelib_export_to``; a run with neither is skipped cleanly,
as the other DAGs skip without databases). The default
``mode`` is ``auto``: the first run writes the table (a full export), every later run applies
only the changes since the previous run's checkpoint with a merge. The job refuses (and the
run fails without retry) when that cannot be exact, e.g. when the previous checkpoint
expired because no run succeeded within ``checkpoint_lifetime``: trigger a run with
``{"mode": "overwrite"}`` then.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from slatelib_dag_common import (
    AirflowSkipException,
    Param,
    common_params,
    get_variable,
    job_dag,
)

VAR_EXPORT_DB = "slatelib_export_db"
VAR_EXPORT_TO = "slatelib_export_to"


def export_args(params: dict[str, Any]) -> list[str]:
    """The job's flags from the params (an argv list: no shell quoting); skips the run when
    no database or no target is configured."""
    db = params.get("db") or get_variable(VAR_EXPORT_DB) or ""
    to = params.get("to") or get_variable(VAR_EXPORT_TO) or ""
    if not db.strip() or not to.strip():
        raise AirflowSkipException(
            f"nothing to export: set the Airflow Variables {VAR_EXPORT_DB} and {VAR_EXPORT_TO} "
            '(or trigger with {"db": URL, "to": URL})')
    argv = ["--db", db.strip(), "--to", to.strip(), "--format", params["format"],
            "--mode", params["mode"]]
    if params.get("checkpoint_lifetime"):
        argv += ["--checkpoint-lifetime", params["checkpoint_lifetime"]]
    if params.get("columns"):
        argv += ["--columns", params["columns"]]
    if params.get("merge_operator"):
        argv += ["--merge-operator", params["merge_operator"]]
    if params.get("partitions"):
        argv += ["--partitions", str(params["partitions"])]
    return argv


dag = job_dag(
    "slatelib_export",
    job="export",
    task_id="export",
    own_args=export_args,
    report_name="export",
    timeout=timedelta(hours=6),
    selection=False,
    description="Export a SlateDB database to Delta every night (incremental after the first)",
    schedule="0 2 * * *",
    default_args={"retries": 1, "retry_delay": timedelta(minutes=15)},
    params=common_params(
        selection=False,
        db=Param("", type="string",
                 description=f"the database URL; empty: Variable {VAR_EXPORT_DB}"),
        to=Param("", type="string",
                 description=f"the Delta table URL; empty: Variable {VAR_EXPORT_TO}"),
        format=Param("delta", type="string", enum=["delta", "parquet"],
                     description="delta (default) or parquet (mode overwrite or append)"),
        mode=Param("auto", type="string",
                   enum=["auto", "incremental", "overwrite", "append"],
                   description="auto: incremental once the table exists, else overwrite"),
        checkpoint_lifetime=Param("7days", type="string", description=(
            "how long the export's checkpoint pins the database: the next run must "
            "succeed before")),
        columns=Param("", type="string",
                      description="key,value (default), any of seq, expire_ts, create_ts"),
        merge_operator=Param("", type="string",
                             description="concat or package.module:attr; empty: none"),
        partitions=Param(None, type=["null", "integer"], minimum=1,
                         description="key ranges read in parallel; null: Spark's default"),
    ),
    tags=["slatelib", "export"],
)
