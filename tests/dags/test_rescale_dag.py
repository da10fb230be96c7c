"""The rescale DAG: manual runs only, typed params, nothing from slatelib, and arguments
that ``jobs/rescale.py`` accepts for a split and for a merge (an argv list: keys and
templates need no shell quoting).

As for the other DAGs, these fast tests run the file against a stand-in for Airflow;
tests/dags/test_real_airflow.py loads it in real Airflow 3.
"""

from __future__ import annotations

from typing import Any

import pytest

from slatelib.jobs.rescale import build_parser
from tests.dags.fake_airflow import ROOT, FakeParam, job_argv, load_dag, plan

pytestmark = pytest.mark.dags

DAG_FILE = ROOT / "airflow_dags" / "rescale.py"


def args_for(monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> Any:
    dag, common, module = load_dag(monkeypatch, DAG_FILE)
    planned = plan(dag, common, module.rescale_args, job="rescale", selection=False,
                   **overrides)
    return build_parser().parse_args(job_argv(planned))


def test_dag_is_manual_one_run_at_a_time_with_typed_params(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dag, _, _ = load_dag(monkeypatch, DAG_FILE)
    assert dag.dag_id == "slatelib_rescale" and [t.task_id for t in dag.tasks] == \
        ["plan", "rescale"]
    assert dag.kwargs["schedule"] is None and dag.kwargs["max_active_runs"] == 1
    params = dag.kwargs["params"]
    assert isinstance(params["into"], FakeParam) and params["into"].schema["type"] == "integer"
    assert params["command"].schema["enum"] == ["split", "merge"]
    assert params["dry_run"].value is True  # the first trigger only plans
    assert "databases" not in params and params["conf_files"].value == ["conf/base.toml"]


def test_a_split_plans_arguments_the_job_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for(monkeypatch, db="s3://b/t/db", into=4, to="s3://b/t/db-{i}",
                    at="k1,hex:ff,it's", dry_run=False, fence_source=True,
                    live_window="10min", parallelism=8, store_root="s3://b")
    assert args.command == "split" and (args.db, args.into, args.to) == \
        ("s3://b/t/db", 4, "s3://b/t/db-{i}")
    assert args.at == "k1,hex:ff,it's"
    assert args.fence_source and not args.allow_live_source and not args.dry_run
    assert (args.live_window, args.parallelism, args.store_root) == ("10min", 8, "s3://b")


def test_the_default_run_is_a_dry_run_split(monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for(monkeypatch, db="s3://b/db", to="s3://b/db-{i}")
    assert args.command == "split" and args.dry_run and args.into == 2 and args.at is None
    assert args.conf == [str(ROOT / "conf/base.toml")]


def test_a_merge_plans_arguments_the_job_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for(monkeypatch, command="merge", sources=["s3://b/db-0", "s3://b/db-1"],
                    to="s3://b/db", dry_run=False, allow_live_source=True)
    assert args.command == "merge" and args.source == ["s3://b/db-0", "s3://b/db-1"]
    assert args.to == "s3://b/db" and args.allow_live_source and not args.dry_run
