"""A stand-in for the few Airflow names the DAG files use (``DAG``, ``Param``, ``Variable``,
the skip/fail exceptions and the operators they subclass), so the fast DAG tests run in the
project's venv, which has no Airflow: they load a DAG file and turn its params into the
job's arguments with ``slatelib_dag_common.job_plan``, as the ``plan`` task does.
``tests/dags/test_real_airflow.py`` runs the same files on real Airflow 3."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


class FakeDag:
    current: FakeDag | None = None

    def __init__(self, dag_id: str, **kwargs: Any) -> None:
        self.dag_id = dag_id
        self.kwargs = kwargs
        self.tasks: list[FakeOperator] = []

    def __enter__(self) -> FakeDag:
        FakeDag.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        FakeDag.current = None


class FakeParam:
    """``Param(default, **schema)``: a typed param (Airflow validates it; this keeps it)."""

    def __init__(self, default: Any = None, **schema: Any) -> None:
        self.value = default
        self.schema = schema


class FakeVariable:
    values: dict[str, str] = {}

    @classmethod
    def get(cls, key: str, default: Any = None) -> Any:
        return cls.values.get(key, default)


class FakeOperator:
    def __init__(self, *, task_id: str, **kwargs: Any) -> None:
        self.task_id = task_id
        self.kwargs = kwargs
        self.downstream: list[FakeOperator] = []
        assert FakeDag.current is not None, "operator created outside a DAG"
        FakeDag.current.tasks.append(self)

    def __rshift__(self, other: FakeOperator) -> FakeOperator:
        self.downstream.append(other)
        return other


class SkipRun(Exception):
    pass


class FailRun(Exception):
    pass


def param_values(params: dict[str, Any]) -> dict[str, Any]:
    """The params' values as a run sees them (a ``Param`` by its default)."""
    return {k: v.value if isinstance(v, FakeParam) else v for k, v in params.items()}


def load_dag(monkeypatch: pytest.MonkeyPatch, dag_file: Path,
             variables: dict[str, str] | None = None,
             ) -> tuple[FakeDag, types.ModuleType, types.ModuleType]:
    """Execute ``dag_file`` (and ``slatelib_dag_common`` next to it) against the stand-in,
    without the Spark provider, with ``variables`` as the Airflow Variables; fails if either
    imports slatelib. Returns the DAG, the common module and the DAG file's module."""
    monkeypatch.setattr(FakeVariable, "values", dict(variables or {}))
    sdk = types.ModuleType("airflow.sdk")
    sdk.DAG, sdk.Param, sdk.Variable = FakeDag, FakeParam, FakeVariable  # type: ignore[attr-defined]
    exceptions = types.ModuleType("airflow.sdk.exceptions")
    exceptions.AirflowSkipException = SkipRun  # type: ignore[attr-defined]
    exceptions.AirflowFailException = FailRun  # type: ignore[attr-defined]
    bash = types.ModuleType("airflow.providers.standard.operators.bash")
    bash.BashOperator = FakeOperator  # type: ignore[attr-defined]
    python = types.ModuleType("airflow.providers.standard.operators.python")
    python.BranchPythonOperator = FakeOperator  # type: ignore[attr-defined]
    modules = {"airflow": types.ModuleType("airflow"), "airflow.sdk": sdk,
               "airflow.sdk.exceptions": exceptions,
               "airflow.providers": types.ModuleType("p"),
               "airflow.providers.standard": types.ModuleType("s"),
               "airflow.providers.standard.operators": types.ModuleType("o"),
               "airflow.providers.standard.operators.bash": bash,
               "airflow.providers.standard.operators.python": python,
               # no Spark provider: the DAGs keep their BashOperator runner only
               "airflow.providers.apache": None,
               "airflow.providers.apache.spark": None,
               "airflow.providers.apache.spark.operators": None,
               "airflow.providers.apache.spark.operators.spark_submit": None}
    for name, mod in modules.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.syspath_prepend(str(dag_file.parent))  # as Airflow does for its DAGs folder
    monkeypatch.delitem(sys.modules, "slatelib_dag_common", raising=False)
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location(f"{dag_file.stem}_dag_under_test", dag_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not {m for m in set(sys.modules) - before if m.split(".")[0] in ("slatelib", "jobs")}
    loaded: FakeDag = module.dag
    return loaded, sys.modules["slatelib_dag_common"], module


def plan(dag: FakeDag, common: types.ModuleType, own_args: Any, *, job: str,
         selection: bool = True, **overrides: Any) -> dict[str, Any]:
    """What the DAG's ``plan`` task pushes for a run with ``overrides`` as its conf (the
    project directory defaults to this checkout)."""
    params = {**param_values(dag.kwargs["params"]), "project_dir": str(ROOT), "executor_env": "",
              **overrides}
    result: dict[str, Any] = common.job_plan(job, params, own_args, selection=selection)
    return result


def job_argv(plan: dict[str, Any], report: str = "/tmp/r.json") -> list[str]:
    """The job's arguments as the run task passes them."""
    return [*plan["argv"], "--report", report]
