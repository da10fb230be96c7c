"""Airflow DAG, rescaling a SlateDB database on demand (``dag_id`` ``slatelib_rescale``):
``spark-submit jobs/rescale.py split|merge``.

Manually triggered (no schedule), one run at a time. Nothing from slatelib is imported here;
what the DAGs share is in ``slatelib_dag_common``. Trigger with a ``dag_run.conf``, e.g.::

    {"command": "split", "db": "s3://bucket/tenants/db", "into": 4,
     "to": "s3://bucket/tenants/db-{i}", "dry_run": false, "fence_source": true}
    {"command": "merge", "sources": ["s3://bucket/t/db-0", "s3://bucket/t/db-1"],
     "to": "s3://bucket/t/db", "dry_run": false}

``dry_run`` is true unless the run says otherwise: the first trigger shows the split keys,
the estimated bytes and rows per shard and the objects the job would write. Retrying a
failed run resumes the same job (the job's record under the source); the task is not
retried automatically, since most failures (a live writer, a target that exists) need a
person. See docs/guides/rescaling.md for the cut-over.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from slatelib_dag_common import Param, common_params, job_dag


def rescale_args(params: dict[str, Any]) -> list[str]:
    """The job's subcommand and flags from the params (an argv list: no shell quoting)."""
    argv = [params["command"]]
    if params["command"] == "split":
        argv += ["--db", params["db"], "--into", str(params["into"])]
        if params.get("at"):
            argv += ["--at", params["at"]]
        if params.get("checkpoint"):
            argv += ["--checkpoint", params["checkpoint"]]
    else:
        for source in params.get("sources") or []:
            argv += ["--source", source]
    argv += ["--to", params["to"]]
    for flag in ("dry_run", "fence_source", "allow_live_source"):
        if params.get(flag):
            argv.append("--" + flag.replace("_", "-"))
    if params.get("live_window"):
        argv += ["--live-window", params["live_window"]]
    if params.get("parallelism"):
        argv += ["--parallelism", str(params["parallelism"])]
    return argv


dag = job_dag(
    "slatelib_rescale",
    job="rescale",
    task_id="rescale",
    own_args=rescale_args,
    report_name=lambda params: f"rescale-{params['command']}",
    timeout=timedelta(hours=12),
    selection=False,
    description="Split a SlateDB database by key range, or merge shards (manual runs only)",
    schedule=None,
    default_args={"retries": 0},
    params=common_params(
        selection=False,
        command=Param("split", type="string", enum=["split", "merge"],
                      description="split one database, or merge several"),
        db=Param("", type="string", description="split: the database URL"),
        into=Param(2, type="integer", minimum=2, description="split: number of shards"),
        at=Param("", type="string",
                 description="split: N-1 ascending keys (text or hex:...); empty: balanced"),
        checkpoint=Param("", type="string",
                         description="split: clone from this checkpoint UUID of the source"),
        sources=Param([], type="array", items={"type": "string"},
                      description="merge: the database URLs"),
        to=Param("", type="string", minLength=1,
                 description="split: a URL template with {i}; merge: the new database URL"),
        dry_run=Param(True, type="boolean", description="plan only; write nothing"),
        fence_source=Param(False, type="boolean",
                           description="fence the source's writer first"),
        allow_live_source=Param(False, type="boolean",
                                description="go on although a writer may be live (its "
                                            "later writes are not in the result)"),
        live_window=Param("", type="string",
                          description="recent writes that mean a live writer (e.g. 5min)"),
        parallelism=Param(None, type=["null", "integer"], minimum=1,
                          description="key ranges per target compaction"),
    ),
    tags=["slatelib", "rescale"],
)
