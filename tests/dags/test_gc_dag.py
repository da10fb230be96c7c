"""The GC DAG: loads without Airflow internals or slatelib, plans arguments that
jobs/gc.py accepts, and stays a dry run unless conf flips it.

The project's virtualenv has no Airflow (it lives in .venv-airflow), so these fast tests run
the file against a stand-in (tests/dags/fake_airflow.py); tests/dags/test_real_airflow.py
runs it on real Airflow 3, where it really deletes.
"""

from __future__ import annotations

from typing import Any

import pytest

from slatelib.config import load_settings
from slatelib.jobs.gc import build_parser
from tests.dags.fake_airflow import ROOT, SkipRun, job_argv, load_dag, plan

pytestmark = pytest.mark.dags

DAG_FILE = ROOT / "airflow_dags" / "gc.py"


def args_for(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str] | None = None,
             **overrides: Any) -> Any:
    dag, common, module = load_dag(monkeypatch, DAG_FILE, variables)
    planned = plan(dag, common, module.gc_args, job="gc", **overrides)
    return build_parser().parse_args(job_argv(planned))


def test_dag_is_namespaced_and_never_overlaps_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    dag, _, _ = load_dag(monkeypatch, DAG_FILE)
    assert dag.dag_id == "slatelib_gc"
    assert [t.task_id for t in dag.tasks] == ["plan", "gc"]
    assert dag.kwargs["max_active_runs"] == 1 and dag.kwargs["catchup"] is False
    assert dag.kwargs["params"]["dry_run"].schema["type"] == ["null", "boolean"]


def test_default_run_is_a_dry_run_decided_by_conf(monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for(monkeypatch, {"slatelib_databases": "s3://b/t/a\ns3://b/t/b"})
    assert args.db == ["s3://b/t/a", "s3://b/t/b"] and args.dry_run is None
    settings = load_settings(args.conf)
    assert settings.gc.dry_run is True


def test_run_conf_can_force_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    assert args_for(monkeypatch, discover="s3://b/t/", dry_run=False).dry_run is False
    forced = args_for(monkeypatch, dbs_file="/etc/dbs.txt", dry_run=True, min_age="1h")
    assert (forced.dry_run, forced.dbs_file, forced.min_age) == (True, "/etc/dbs.txt", "1h")


def test_an_empty_database_list_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SkipRun):
        args_for(monkeypatch, {"slatelib_databases": "[]"})


def test_per_directory_params_become_the_jobs_per_directory_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = args_for(monkeypatch, discover="s3://b/t/", min_ages={"wal": "1h", "wal_fence": "30days"},
                    dry_runs={"compacted": True, "wal_fence": False}, boundary_files=False)
    assert (args.wal_min_age, args.wal_fence_min_age, args.manifest_min_age) == ("1h", "30days",
                                                                                  None)
    assert (args.compacted_dry_run, args.wal_fence_dry_run, args.wal_dry_run) == (True, False,
                                                                                  None)
    assert args.boundary_files is False and args.dry_run is None
    plain = args_for(monkeypatch, discover="s3://b/t/")
    assert (plain.wal_min_age, plain.wal_dry_run, plain.boundary_files) == (None, None, None)


def test_an_unknown_directory_param_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="no directory 'wals'"):
        args_for(monkeypatch, discover="s3://b/t/", min_ages={"wals": "1h"})
