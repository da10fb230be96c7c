"""Rescaling a SlateDB database on demand: ``spark-submit jobs/rescale.py split|merge``.

Manually triggered (no schedule), one run at a time. No logic here and nothing from slatelib
is imported (the spark-submit command and the shared params are in ``slatelib_dag_common``).
Trigger with a ``dag_run.conf``, e.g.::

    {"command": "split", "db": "s3://bucket/tenants/db", "into": 4,
     "to": "s3://bucket/tenants/db-{i}", "dry_run": false, "fence_source": true}
    {"command": "merge", "sources": ["s3://bucket/t/db-0", "s3://bucket/t/db-1"],
     "to": "s3://bucket/t/db", "dry_run": false}

``dry_run`` is true unless the run says otherwise: the first trigger shows the split keys,
the estimated bytes and rows per shard and the objects the job would write. Retrying a
failed run resumes the same job (the job's record under the source); the task is not
retried automatically, since most failures (a live writer, a target that exists) need a
person. See README, "Rescaling", for the cut-over.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from slatelib_dag_common import spark_submit, submit_params

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator
try:  # Airflow 3
    from airflow.sdk import Param
except ImportError:  # Airflow 2
    from airflow.models.param import Param

_QUOTED = "'{{ %s | replace(\"'\", \"'\\\\''\") }}'"
"""A param in single quotes for the shell (keys and templates may hold anything)."""


def _q(expr: str) -> str:
    return _QUOTED % expr


RESCALE_COMMAND = spark_submit("rescale", (
    "{{ params.command }} "
    "{% if params.command == 'split' %}  --db " + _q("params.db") + " "
    "  --into {{ params.into }} "
    "{% if params.at %}  --at " + _q("params.at") + " {% endif %}"
    "{% if params.checkpoint %}  --checkpoint {{ params.checkpoint }} {% endif %}"
    "{% else %}{% for source in params.sources %}  --source " + _q("source") + " "
    "{% endfor %}{% endif %}"
    "  --to " + _q("params.to") + " "
    "{% if params.store_root %}  --store-root {{ params.store_root }} "
    "{% endif %}{% for conf in params.conf_files %}  --conf {{ conf }} "
    "{% endfor %}{% if params.dry_run %}  --dry-run "
    "{% endif %}{% if params.fence_source %}  --fence-source "
    "{% endif %}{% if params.allow_live_source %}  --allow-live-source "
    "{% endif %}{% if params.live_window %}  --live-window {{ params.live_window }} "
    "{% endif %}{% if params.parallelism %}  --parallelism {{ params.parallelism }} "
    "{% endif %}"
), "rescale-{{ params.command }}")

with DAG(
    dag_id="rescale",
    description="Split a SlateDB database by key range, or merge shards (manual runs only)",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 0},
    params=submit_params(
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
) as dag:
    BashOperator(task_id="rescale", bash_command=RESCALE_COMMAND,
                 execution_timeout=timedelta(hours=12))
