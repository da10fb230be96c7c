"""Scheduled garbage collection of SlateDB databases: ``spark-submit jobs/gc.py``.

No logic here and nothing from slatelib is imported (the command and params shared by
the DAGs are in ``slatelib_dag_common``): the DAG renders one spark-submit
command from its params (override them per run with ``dag_run.conf``).

Dry run until flipped in conf: the job deletes only when ``[gc] dry_run = false`` is set in
one of the ``conf_files`` (``conf/base.toml`` keeps ``dry_run = true``), or when a run is
triggered with ``{"dry_run": false}``. ``{"dry_run": true}`` forces a dry run whatever the
conf says. Every run writes its JSON report next to the logs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from slatelib_dag_common import job_command, job_params

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator

GC_COMMAND = job_command("gc", (
    "{% if params.min_age %}  --min-age {{ params.min_age }} "
    "{% endif %}{% if params.dry_run is sameas true %}  --dry-run "
    "{% elif params.dry_run is sameas false %}  --no-dry-run "
    "{% endif %}"
), "gc")

with DAG(
    dag_id="gc",
    description="Garbage-collect SlateDB databases (dry run until [gc] dry_run = false)",
    start_date=datetime(2026, 1, 1),
    schedule=timedelta(hours=1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
    params=job_params(min_age="", dry_run=None),
    tags=["slatelib", "gc"],
) as dag:
    BashOperator(task_id="gc", bash_command=GC_COMMAND, execution_timeout=timedelta(hours=2))
