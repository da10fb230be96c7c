"""The rescale DAG: manual runs only, typed params, nothing from slatelib, and a command
that ``jobs/rescale.py`` accepts for a split and for a merge (keys and templates quoted for
the shell).

As for the other DAGs, these fast tests run the file against a stand-in for Airflow;
tests/dags/test_real_airflow.py loads it in real Airflow.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest

from jobs.rescale import build_parser
from tests.dags.fake_airflow import ROOT, FakeDag, FakeParam, load_dag
from tests.dags.fake_airflow import render as render_job

pytestmark = pytest.mark.dags

DAG_FILE = ROOT / "airflow_dags" / "rescale.py"


@pytest.fixture
def dag(monkeypatch: pytest.MonkeyPatch) -> FakeDag:
    return load_dag(monkeypatch, DAG_FILE)


def render(dag: FakeDag, **overrides: Any) -> list[str]:
    return render_job(dag, "jobs/rescale.py", **overrides)


def test_dag_file_imports_only_airflow_and_the_standard_library() -> None:
    tree = ast.parse(DAG_FILE.read_text(), str(DAG_FILE))
    compile(tree, str(DAG_FILE), "exec")
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "datetime", "airflow", "slatelib_dag_common"}, imported


def test_dag_is_manual_one_run_at_a_time_with_typed_params(dag: FakeDag) -> None:
    assert dag.dag_id == "rescale" and [t.task_id for t in dag.tasks] == ["rescale"]
    assert dag.kwargs["schedule"] is None and dag.kwargs["max_active_runs"] == 1
    params = dag.kwargs["params"]
    assert isinstance(params["into"], FakeParam) and params["into"].schema["type"] == "integer"
    assert params["command"].schema["enum"] == ["split", "merge"]
    assert params["dry_run"].value is True  # the first trigger only plans
    assert "databases" not in params and params["conf_files"] == ["conf/base.toml"]


def test_a_split_renders_a_command_the_job_accepts(dag: FakeDag) -> None:
    argv = render(dag, db="s3://b/t/db", into=4, to="s3://b/t/db-{i}", at="k1,hex:ff,it's",
                  dry_run=False, fence_source=True, live_window="10min", parallelism=8,
                  store_root="s3://b")
    args = build_parser().parse_args(argv)
    assert args.command == "split" and (args.db, args.into, args.to) == \
        ("s3://b/t/db", 4, "s3://b/t/db-{i}")
    assert args.at == "k1,hex:ff,it's"
    assert args.fence_source and not args.allow_live_source and not args.dry_run
    assert (args.live_window, args.parallelism, args.store_root) == ("10min", 8, "s3://b")
    assert args.report == "/var/log/slatelib/rescale-split-20260101T000000.json"


def test_the_default_run_is_a_dry_run_split(dag: FakeDag) -> None:
    args = build_parser().parse_args(render(dag, db="s3://b/db", to="s3://b/db-{i}"))
    assert args.command == "split" and args.dry_run and args.into == 2 and args.at is None
    assert args.conf == ["conf/base.toml"]


def test_a_merge_renders_a_command_the_job_accepts(dag: FakeDag) -> None:
    argv = render(dag, command="merge", sources=["s3://b/db-0", "s3://b/db-1"],
                  to="s3://b/db", dry_run=False, allow_live_source=True)
    args = build_parser().parse_args(argv)
    assert args.command == "merge" and args.source == ["s3://b/db-0", "s3://b/db-1"]
    assert args.to == "s3://b/db" and args.allow_live_source and not args.dry_run
    assert args.report == "/var/log/slatelib/rescale-merge-20260101T000000.json"
