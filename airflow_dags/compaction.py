"""Scheduled compaction of SlateDB databases: ``spark-submit jobs/compact.py``.

No logic here and nothing from slatelib is imported (the command and params shared by
the DAGs are in ``slatelib_dag_common``): the DAG renders one spark-submit
command from its params (override them per run with ``dag_run.conf``, e.g.
``{"policy": "full"}`` for a weekly full compaction, or ``{"dry_run": true}`` to see the
plan). The policy is ``size-tiered`` (0.17's scheduler, with the ``[compaction]`` options
``min_compaction_sources``, ``max_compaction_sources`` and ``include_size_threshold`` of the
``conf_files``): it merges sorted runs, so runs left at the defaults keep their number
bounded. ``l0`` (every L0 into a new sorted run, which adds a run on every run) and ``full``
are explicit choices; ``""`` takes ``[compaction] policy`` from the ``conf_files``.
``max_sst_size`` and ``parallelism`` are passed only when set. Every run writes its JSON
report next to the logs. One run at a time: a second compaction of the same database would
only fence the first.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from slatelib_dag_common import job_command, job_params

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator

COMPACT_COMMAND = job_command("compact", (
    "{% if params.policy %}  --policy {{ params.policy }} "
    "{% endif %}{% if params.max_sst_size %}  --max-sst-size {{ params.max_sst_size }} "
    "{% endif %}{% if params.parallelism %}  --parallelism {{ params.parallelism }} "
    "{% endif %}{% if params.dry_run is sameas true %}  --dry-run "
    "{% endif %}"
), "compaction")

with DAG(
    dag_id="compaction",
    description="Compact SlateDB databases on Spark (one manifest CAS per database)",
    start_date=datetime(2026, 1, 1),
    schedule=timedelta(minutes=30),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
    params=job_params(policy="size-tiered", max_sst_size="", parallelism="", dry_run=False),
    tags=["slatelib", "compaction"],
) as dag:
    BashOperator(task_id="compact", bash_command=COMPACT_COMMAND,
                 execution_timeout=timedelta(hours=4))
