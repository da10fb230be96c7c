"""The compaction DAG: compiles, imports nothing from slatelib (nor anything but Airflow and
the standard library), and renders a spark-submit command that ``jobs/compact.py`` accepts.

The project's virtualenv has no Airflow (it lives in .venv-airflow), so these fast tests
provide the names the DAG file uses (``DAG`` as a context manager, ``BashOperator``) and
render the command with Jinja; tests/dags/test_real_airflow.py loads the same file in real
Airflow.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest

from jobs.compact import build_parser
from tests.dags.fake_airflow import ROOT, FakeDag, load_dag
from tests.dags.fake_airflow import render as render_job

pytestmark = pytest.mark.dags

DAG_FILE = ROOT / "airflow_dags" / "compaction.py"


@pytest.fixture
def dag(monkeypatch: pytest.MonkeyPatch) -> FakeDag:
    return load_dag(monkeypatch, DAG_FILE)


def render(dag: FakeDag, **overrides: Any) -> list[str]:
    return render_job(dag, "jobs/compact.py", **overrides)


def test_dag_file_compiles_and_imports_only_airflow_and_the_standard_library() -> None:
    tree = ast.parse(DAG_FILE.read_text(), str(DAG_FILE))
    compile(tree, str(DAG_FILE), "exec")
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "datetime", "airflow", "slatelib_dag_common"}, imported


def test_dag_has_one_spark_submit_task_and_runs_one_at_a_time(dag: FakeDag) -> None:
    assert dag.dag_id == "compaction" and [t.task_id for t in dag.tasks] == ["compact"]
    assert dag.kwargs["max_active_runs"] == 1 and dag.kwargs["catchup"] is False
    assert "spark-submit" in dag.tasks[0].bash_command


def test_rendered_command_is_accepted_by_the_job(dag: FakeDag) -> None:
    argv = render(dag, databases=["s3://bucket/a", "s3://bucket/b"],
                  conf_files=["conf/base.toml", "conf/prod.toml"])
    args = build_parser().parse_args(argv)
    assert args.db == ["s3://bucket/a", "s3://bucket/b"]
    assert args.conf == ["conf/base.toml", "conf/prod.toml"]
    assert args.policy == "size-tiered"  # a DAG left at its defaults keeps sorted runs bounded
    assert args.max_sst_size is None and not args.dry_run
    assert args.report == "/var/log/slatelib/compaction-20260101T000000.json"


@pytest.mark.parametrize(("policy", "expected"), [("l0", "l0"), ("full", "full"), ("", None)])
def test_policy_l0_and_full_stay_explicit_choices(dag: FakeDag, policy: str,
                                                  expected: str | None) -> None:
    """``""`` leaves the policy to the conf files' ``[compaction] policy``."""
    args = build_parser().parse_args(render(dag, databases=["s3://bucket/a"], policy=policy))
    assert args.policy == expected


def test_run_conf_overrides_reach_the_job(dag: FakeDag) -> None:
    argv = render(dag, discover="s3://bucket/tenants/", policy="full", max_sst_size="128MiB",
                  parallelism="16", dry_run=True)
    args = build_parser().parse_args(argv)
    assert (args.discover, args.policy, args.max_sst_size, args.parallelism) == \
        ("s3://bucket/tenants/", "full", "128MiB", "16")
    assert args.dry_run
