"""The GC DAG: loads without Airflow internals or slatelib, renders a command that
jobs/gc.py accepts, and stays a dry run unless conf flips it.

The project's virtualenv has no Airflow (it lives in .venv-airflow), so these fast tests
provide the names the DAG file uses (``DAG`` as a context manager, ``BashOperator``) and
render the command with Jinja; tests/dags/test_real_airflow.py loads the same file in real
Airflow.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from jobs.gc import build_parser
from slatelib.config import load_settings
from tests.dags.fake_airflow import ROOT, FakeDag, load_dag
from tests.dags.fake_airflow import render as render_job

pytestmark = pytest.mark.dags

DAG_FILE = ROOT / "airflow_dags" / "gc.py"


@pytest.fixture
def dag(monkeypatch: pytest.MonkeyPatch) -> FakeDag:
    return load_dag(monkeypatch, DAG_FILE)


def render(dag: FakeDag, **overrides: Any) -> list[str]:
    return render_job(dag, "jobs/gc.py", **overrides)


@pytest.mark.parametrize("path", [DAG_FILE, ROOT / "airflow_dags" / "slatelib_dag_common.py"])
def test_dag_files_import_nothing_from_slatelib(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m.split(".")[0] in ("slatelib", "jobs") for m in imported), imported


def test_dag_is_named_after_its_file_and_never_overlaps_itself(dag: FakeDag) -> None:
    assert dag.dag_id == DAG_FILE.stem == "gc"
    assert [t.task_id for t in dag.tasks] == ["gc"]
    assert dag.kwargs["max_active_runs"] == 1 and dag.kwargs["catchup"] is False


def test_default_run_is_a_dry_run_decided_by_conf(dag: FakeDag) -> None:
    args = build_parser().parse_args(render(dag, databases=["s3://b/t/a", "s3://b/t/b"]))
    assert args.db == ["s3://b/t/a", "s3://b/t/b"] and args.dry_run is None
    assert args.report == "/var/log/slatelib/gc-20260101T000000.json"
    settings = load_settings([ROOT / c for c in args.conf])
    assert settings.gc.dry_run is True


def test_run_conf_can_force_either_way(dag: FakeDag) -> None:
    parser = build_parser()
    assert parser.parse_args(render(dag, discover="s3://b/t/", dry_run=False)).dry_run is False
    forced = parser.parse_args(render(dag, dbs_file="/etc/dbs.txt", dry_run=True, min_age="1h"))
    assert (forced.dry_run, forced.dbs_file, forced.min_age) == (True, "/etc/dbs.txt", "1h")
