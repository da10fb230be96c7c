"""Airflow DAG, scheduled compaction of SlateDB databases (``dag_id`` ``slatelib_compaction``):
``spark-submit jobs/compact.py``.

Nothing from slatelib is imported here; what the DAGs share (the ``plan`` task, the two
runners, the report in XCom, the Variables) is in ``slatelib_dag_common``. The policy is
``size-tiered`` (0.17's scheduler, with the ``[compaction]`` options of the ``conf_files``):
it merges sorted runs, so runs left at the defaults keep their number bounded. ``l0`` (every
L0 into a new sorted run) and ``full`` are explicit choices; ``""`` takes ``[compaction]
policy`` from the ``conf_files``. Override per run with ``dag_run.conf``, e.g.
``{"policy": "full"}`` or ``{"dry_run": true}`` to see the plan. One run at a time: a
second compaction of the same database would only fence the first.

``mode`` runs the standing modes instead (docs/rfcs/0009-compaction-worker.md): ``worker``
executes the compactions that official 0.17 coordinators schedule, ``service`` compacts
databases that have no compactor; each for ``run_for`` (e.g. ``"55m"`` for an hourly
schedule) or ``until_idle``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from slatelib_dag_common import Param, common_params, job_dag


def compact_args(params: dict[str, Any]) -> list[str]:
    """The job's own flags from the params."""
    mode = params.get("mode") or ""
    if mode in ("worker", "service"):
        argv = [f"--{mode}"]
        if params.get("run_for"):
            argv += ["--run-for", str(params["run_for"])]
        if params.get("until_idle") is True:
            argv.append("--until-idle")
        return argv
    argv = []
    if params.get("policy"):
        argv += ["--policy", params["policy"]]
    if params.get("max_sst_size"):
        argv += ["--max-sst-size", str(params["max_sst_size"])]
    if params.get("parallelism"):
        argv += ["--parallelism", str(params["parallelism"])]
    if params.get("dry_run") is True:
        argv.append("--dry-run")
    return argv


dag = job_dag(
    "slatelib_compaction",
    job="compact",
    task_id="compact",
    own_args=compact_args,
    report_name="compaction",
    timeout=timedelta(hours=4),
    description="Compact SlateDB databases on Spark (one manifest CAS per database)",
    schedule=timedelta(minutes=30),
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
    params=common_params(
        selection=True,
        policy=Param("size-tiered", type="string", enum=["size-tiered", "l0", "full", ""],
                     description='"": [compaction] policy of the conf files'),
        max_sst_size=Param("", type="string", description="e.g. 128MiB; empty: the conf's"),
        parallelism=Param(None, type=["null", "integer"], minimum=1,
                          description="key ranges per compaction; empty: the conf's"),
        dry_run=Param(False, type="boolean", description="plan only; write nothing"),
        mode=Param("", type="string", enum=["", "worker", "service"], description=(
            '"": one compaction per database; worker: execute what official coordinators '
            "schedule (--worker); service: a standing size-tiered compactor (--service); "
            "both stop after run_for or, with until_idle, once nothing is left to do")),
        run_for=Param("", type="string", description="worker/service: stop after this long, "
                      "e.g. 10m"),
        until_idle=Param(False, type="boolean",
                         description="worker/service: stop once nothing is scheduled"),
    ),
    tags=["slatelib", "compaction"],
)
