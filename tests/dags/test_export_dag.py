"""The nightly export DAG: loads without Airflow internals or slatelib, and plans arguments
that jobs/export.py accepts (incremental once the table exists: ``--mode auto``).

As tests/dags/test_gc_dag.py: against the stand-in of tests/dags/fake_airflow.py;
tests/dags/test_real_airflow.py runs it on real Airflow 3."""

from __future__ import annotations

from typing import Any

import pytest

from slatelib.jobs.export import build_parser, export_args
from tests.dags.fake_airflow import ROOT, SkipRun, job_argv, load_dag, plan

pytestmark = pytest.mark.dags

DAG_FILE = ROOT / "airflow_dags" / "slatelib_export.py"


def args_for(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str] | None = None,
             **overrides: Any) -> Any:
    dag, common, module = load_dag(monkeypatch, DAG_FILE, variables)
    planned = plan(dag, common, module.export_args, job="export", selection=False, **overrides)
    assert planned["application"] == str(ROOT / "jobs" / "export.py")
    return build_parser().parse_args(job_argv(planned))


def test_dag_is_nightly_namespaced_and_never_overlaps_itself(
        monkeypatch: pytest.MonkeyPatch) -> None:
    dag, _, _ = load_dag(monkeypatch, DAG_FILE)
    assert dag.dag_id == "slatelib_export"
    assert [t.task_id for t in dag.tasks] == ["plan", "export"]
    assert dag.kwargs["schedule"] == "0 2 * * *"
    assert dag.kwargs["max_active_runs"] == 1 and dag.kwargs["catchup"] is False
    params = dag.kwargs["params"]
    assert params["mode"].value == "auto" and params["format"].value == "delta"
    assert "databases" not in params


def test_default_run_is_an_incremental_delta_export(monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for(monkeypatch, db="s3://b/t/db", to="s3://lake/t")
    assert (args.db, args.to, args.format, args.mode) == ("s3://b/t/db", "s3://lake/t",
                                                          "delta", "auto")
    assert args.checkpoint_lifetime == "7days" and args.report == "/tmp/r.json"
    assert export_args(args).mode == "auto"


def test_run_conf_reaches_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for(monkeypatch, db="file:///d/db", to="file:///t", mode="overwrite",
                    columns="value,seq", merge_operator="concat", partitions=4,
                    store_root="file:///d")
    a = export_args(args)
    assert (a.mode, a.columns, a.merge_operator, a.partitions, a.store_root) == (
        "overwrite", ("key", "value", "seq"), "concat", 4, "file:///d")


def test_database_and_target_from_variables_else_a_clean_skip(
        monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for(monkeypatch, {"slatelib_export_db": "s3://b/db",
                                  "slatelib_export_to": "s3://lake/t"})
    assert (args.db, args.to) == ("s3://b/db", "s3://lake/t")
    with pytest.raises(SkipRun, match="slatelib_export_db"):
        args_for(monkeypatch)
    with pytest.raises(SkipRun):
        args_for(monkeypatch, db="s3://b/db")


def _plan(monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> tuple[dict[str, Any], Any]:
    dag, common, module = load_dag(monkeypatch, DAG_FILE)
    return plan(dag, common, module.export_args, job="export", selection=False,
                **overrides), common


def test_spark_submit_gets_the_fetched_delta_jars_and_s3a_only_for_an_s3_target(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.spark import jars

    local, _ = _plan(monkeypatch, db="file:///d/db", to="file:///t")
    delta = [str(ROOT / "build" / "jars" / j.filename) for j in jars.select(["delta"])]
    assert local["jars"] == delta and all(ROOT.joinpath(p).is_file() for p in delta)
    on_s3, _ = _plan(monkeypatch, db="s3://b/db", to="s3a://lake/t")
    assert on_s3["jars"] == [str(ROOT / "build" / "jars" / j.filename)
                             for j in jars.select(["delta", "s3a"])]
    none, _ = _plan(monkeypatch, db="file:///d/db", to="file:///t", jars="")
    assert none["jars"] == []
    given, _ = _plan(monkeypatch, db="file:///d/db", to="file:///t", jars="/a.jar, /b.jar")
    assert given["jars"] == ["/a.jar", "/b.jar"]


def test_a_jar_not_fetched_fails_the_plan_saying_make_jars(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "export.py").write_text("")
    (tmp_path / "slatelib" / "spark").mkdir(parents=True)
    (tmp_path / "slatelib" / "spark" / "jars.lock").write_text(
        (ROOT / "slatelib" / "spark" / "jars.lock").read_text())
    with pytest.raises(Exception, match="is missing: run `make jars`"):
        _plan(monkeypatch, db="file:///d/db", to="file:///t", project_dir=str(tmp_path))
