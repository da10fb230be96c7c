"""Scheduled garbage collection of SlateDB databases: ``spark-submit jobs/gc.py``.

No logic here and nothing from slatelib is imported: the DAG renders one spark-submit
command from its params (override them per run with ``dag_run.conf``).

Dry run until flipped in conf: the job deletes only when ``[gc] dry_run = false`` is set in
one of the ``conf_files`` (``conf/base.toml`` keeps ``dry_run = true``), or when a run is
triggered with ``{"dry_run": false}``. ``{"dry_run": true}`` forces a dry run whatever the
conf says. Every run writes its JSON report next to the logs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator

GC_COMMAND = """\
cd {{ params.project_dir }} && \
spark-submit {{ params.spark_submit_args }} \
  --py-files {{ params.py_files }} \
  jobs/gc.py \
{% for db in params.databases %}  --db {{ db }} \
{% endfor %}{% if params.dbs_file %}  --dbs-file {{ params.dbs_file }} \
{% endif %}{% if params.discover %}  --discover {{ params.discover }} \
{% endif %}{% if params.store_root %}  --store-root {{ params.store_root }} \
{% endif %}{% for conf in params.conf_files %}  --conf {{ conf }} \
{% endfor %}{% if params.min_age %}  --min-age {{ params.min_age }} \
{% endif %}{% if params.dry_run is sameas true %}  --dry-run \
{% elif params.dry_run is sameas false %}  --no-dry-run \
{% endif %}  --report {{ params.report_dir }}/gc-{{ ts_nodash }}.json"""

with DAG(
    dag_id="gc",
    description="Garbage-collect SlateDB databases (dry run until [gc] dry_run = false)",
    start_date=datetime(2026, 1, 1),
    schedule=timedelta(hours=1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
    params={
        "project_dir": "/opt/slatelib",
        "spark_submit_args": "--master yarn --deploy-mode client",
        "py_files": "dist/slatelib-0.1.0-py3-none-any.whl",
        "databases": [],
        "dbs_file": "",
        "discover": "",
        "store_root": "",
        "conf_files": ["conf/base.toml"],
        "min_age": "",
        "dry_run": None,
        "report_dir": "/var/log/slatelib",
    },
    tags=["slatelib", "gc"],
) as dag:
    BashOperator(task_id="gc", bash_command=GC_COMMAND, execution_timeout=timedelta(hours=2))
