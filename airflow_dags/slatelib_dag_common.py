"""What the slatelib DAGs share: the spark-submit command around a job's own options, and
the params that choose the databases. Airflow puts the DAGs folder on ``sys.path``, so the
DAG files import this module by name. It holds no DAG and imports nothing from slatelib."""

from __future__ import annotations

from typing import Any


def job_command(job: str, options: str, report_name: str) -> str:
    """The Jinja template of ``spark-submit jobs/<job>.py`` (one line): the database
    selection and conf files from the params, then ``options`` (the job's own flags, each
    followed by a space), then ``--report`` into ``report_dir`` as
    ``<report_name>-<ts_nodash>.json``."""
    return spark_submit(job, (
        "{% for db in params.databases %}  --db {{ db }} "
        "{% endfor %}{% if params.dbs_file %}  --dbs-file {{ params.dbs_file }} "
        "{% endif %}{% if params.discover %}  --discover {{ params.discover }} "
        "{% endif %}{% if params.store_root %}  --store-root {{ params.store_root }} "
        "{% endif %}{% for conf in params.conf_files %}  --conf {{ conf }} "
        "{% endfor %}"
        + options
    ), report_name)


def spark_submit(job: str, arguments: str, report_name: str) -> str:
    """The Jinja template of ``spark-submit jobs/<job>.py <arguments>`` from the project
    directory, with ``--report`` into ``report_dir`` as ``<report_name>-<ts_nodash>.json``
    (``arguments``: each followed by a space)."""
    return (
        "cd {{ params.project_dir }} && "
        "spark-submit {{ params.spark_submit_args }} "
        "  --py-files {{ params.py_files }} "
        f"  jobs/{job}.py "
        + arguments
        + "  --report {{ params.report_dir }}/" + report_name + "-{{ ts_nodash }}.json"
    )


def submit_params(**own: Any) -> dict[str, Any]:
    """Where the project and Spark are, the conf files and the report directory (every
    DAG's), plus the job's ``own``."""
    common = job_params(**own)
    for name in ("databases", "dbs_file", "discover"):
        common.pop(name)
    return common


def job_params(**own: Any) -> dict[str, Any]:
    """The params every slatelib DAG takes (override per run with ``dag_run.conf``), plus
    the job's ``own``."""
    return {
        "project_dir": "/opt/slatelib",
        "spark_submit_args": "--master yarn --deploy-mode client",
        "py_files": "dist/slatelib-0.1.0-py3-none-any.whl",
        "databases": [],
        "dbs_file": "",
        "discover": "",
        "store_root": "",
        "conf_files": ["conf/base.toml"],
        **own,
        "report_dir": "/var/log/slatelib",
    }
