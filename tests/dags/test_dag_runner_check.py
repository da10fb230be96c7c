"""The DAGs' ``plan`` checks that the runner's spark-submit can start (failing at once,
saying what to set), and a job's permanent failure is not retried (issue 27, "the first
hour")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.dags.fake_airflow import ROOT, FailRun, load_dag, param_values

pytestmark = pytest.mark.dags

DAG_FILE = ROOT / "airflow_dags" / "compaction.py"


class FakeTI:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def project(where: str) -> Path:
    """A project directory with the checkout's ``jobs/`` and ``conf/`` but no ``.venv`` (so
    no spark-submit of its own, as on a worker whose project has no venv)."""
    root = Path(where).parent / f"project-{Path(where).name}"
    root.mkdir(exist_ok=True)
    for name in ("jobs", "conf"):
        if not (root / name).exists():
            (root / name).symlink_to(ROOT / name)
    return root


def run_plan(monkeypatch: pytest.MonkeyPatch, path: str, **overrides: Any) -> str:
    """The ``plan`` task's callable, run with ``overrides`` as the run's conf and ``path``
    as the worker's PATH; returns the branch it picks."""
    dag, common, _ = load_dag(monkeypatch, DAG_FILE)
    monkeypatch.setenv("PATH", path)
    (task,) = [t for t in dag.tasks if t.task_id == "plan"]
    params = {**param_values(dag.kwargs["params"]), "project_dir": str(project(path)),
              "executor_env": "", "databases": ["s3://b/db"], **overrides}
    if overrides.get("runner") == "spark_submit_operator":
        monkeypatch.setattr(common, "SparkSubmitOperator", object)
    branch: str = task.kwargs["python_callable"](params=params, ti=FakeTI())
    return branch


def fake_spark_submit(where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    exe = where / "spark-submit"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return exe


def test_bash_runner_without_spark_submit_fails_at_plan_saying_what_to_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    with pytest.raises(FailRun) as err:
        run_plan(monkeypatch, str(tmp_path), runner="bash")
    text = str(err.value)
    assert "runner bash cannot start: 'spark-submit' is not on this worker's PATH" in text
    assert str(tmp_path) in text and '"spark_submit"' in text
    with pytest.raises(FailRun, match="is not an executable file"):
        run_plan(monkeypatch, str(tmp_path), runner="bash", spark_submit="/nope/spark-submit")
    exe = fake_spark_submit(tmp_path / "bin")
    assert run_plan(monkeypatch, str(exe.parent), runner="bash") == "compact"
    assert run_plan(monkeypatch, str(tmp_path), runner="bash", spark_submit=str(exe)) == "compact"


def test_operator_runner_without_spark_submit_on_path_fails_at_plan(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    with pytest.raises(FailRun) as err:
        run_plan(monkeypatch, str(tmp_path), runner="spark_submit_operator")
    text = str(err.value)
    assert "runner spark_submit_operator cannot start" in text
    assert "not on this worker's PATH" in text and '"runner": "bash"' in text
    exe = fake_spark_submit(tmp_path / "bin")
    assert run_plan(monkeypatch, str(exe.parent),
                    runner="spark_submit_operator") == "compact_spark"


@pytest.mark.parametrize("status, message, permanent", [
    ("invalid_input", "Bash command failed. The command returned a non-zero exit code 2.", True),
    (None, "Bash command failed. The command returned a non-zero exit code 2.", True),
    (None, "Cannot execute: spark-submit ... Error code is: 3.", True),
    ("data_error", "anything", True),
    ("io_failure", "Bash command failed. The command returned a non-zero exit code 6.", False),
    (None, "Bash command failed. The command returned a non-zero exit code 1.", False),
    (None, "no code here", False),
])
def test_permanent_job_failures_are_not_retried(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, status: str | None, message: str,
    permanent: bool,
) -> None:
    _, common, _ = load_dag(monkeypatch, DAG_FILE)
    report = tmp_path / "r.json"
    if status is not None:
        report.write_text(json.dumps({"job": "compact", "status": status}))
    exc = RuntimeError(message)
    if permanent:
        with pytest.raises(FailRun, match="a retry cannot fix it"):
            common.fail_if_permanent(exc, str(report))
    else:
        common.fail_if_permanent(exc, str(report))  # returns: the task retries
    with pytest.raises(FailRun, match="spark-submit cannot start"):
        common.fail_if_permanent(FileNotFoundError(2, "No such file", "spark-submit"),
                                 os.devnull)


def test_the_spark_operator_names_the_app_for_its_job_and_fails_permanent_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    """With a stand-in SparkSubmitOperator (whose default app name is the provider's
    ``arrow-spark``): the run is named ``slatelib-<job>``, and a job that exits 2 fails
    without retry."""
    import importlib.util
    import sys
    import types

    from tests.dags.fake_airflow import FakeOperator

    load_dag(monkeypatch, DAG_FILE)
    calls: list[str] = []

    class FakeSparkSubmit(FakeOperator):
        def __init__(self, *, application: str = "", name: str = "arrow-spark",
                     **kwargs: Any) -> None:
            self.name = name
            self.conf: dict[str, str] = {}
            self.env_vars: dict[str, str] = {}
            self.log = types.SimpleNamespace(warning=lambda *a: None, info=lambda *a: None)
            super().__init__(**kwargs)

        def execute(self, context: Any) -> None:
            calls.append(self.name)
            raise RuntimeError("Cannot execute: spark-submit ... Error code is: 2.")

    provider = types.ModuleType("airflow.providers.apache.spark.operators.spark_submit")
    provider.SparkSubmitOperator = FakeSparkSubmit  # type: ignore[attr-defined]
    for name in ("airflow.providers.apache", "airflow.providers.apache.spark",
                 "airflow.providers.apache.spark.operators"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, provider.__name__, provider)
    path = ROOT / "airflow_dags" / "slatelib_dag_common.py"
    spec = importlib.util.spec_from_file_location("slatelib_dag_common_with_spark", path)
    assert spec is not None and spec.loader is not None
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    with common.DAG("d"):
        task = common.SlatelibSparkSubmitOperator(task_id="compact_spark", report_name="r")
    plan = {"application": "/x/jobs/compact.py", "argv": [], "python": "",
            "executor_env": "", "jars": []}

    class TI:
        def xcom_pull(self, **kwargs: Any) -> Any:
            return plan

        def xcom_push(self, **kwargs: Any) -> None:
            pass

    context = {"ti": TI(), "params": {"report_dir": str(tmp_path)}, "ts_nodash": "t"}
    with pytest.raises(FailRun, match="exit code 2 \\(invalid_input\\)"):
        task.execute(context)
    assert calls == ["slatelib-compact"]
