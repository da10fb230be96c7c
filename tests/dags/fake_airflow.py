"""A stand-in for the few Airflow names the DAG files use (``DAG`` as a context manager and
``BashOperator``), so the fast DAG tests run in the project's venv, which has no Airflow.
``tests/dags/test_real_airflow.py`` checks the same files against real Airflow."""

from __future__ import annotations

import importlib.util
import shlex
import sys
import types
from pathlib import Path
from typing import Any

import jinja2
import pytest

ROOT = Path(__file__).resolve().parents[2]
TS_NODASH = "20260101T000000"


class FakeDag:
    current: FakeDag | None = None

    def __init__(self, dag_id: str, **kwargs: Any) -> None:
        self.dag_id = dag_id
        self.kwargs = kwargs
        self.tasks: list[FakeBash] = []

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


def param_values(params: dict[str, Any]) -> dict[str, Any]:
    """The params' values as the templates see them (a ``Param`` by its default)."""
    return {k: v.value if isinstance(v, FakeParam) else v for k, v in params.items()}


class FakeBash:
    def __init__(self, *, task_id: str, bash_command: str, **kwargs: Any) -> None:
        self.task_id = task_id
        self.bash_command = bash_command
        self.kwargs = kwargs
        assert FakeDag.current is not None, "operator created outside a DAG"
        FakeDag.current.tasks.append(self)


def load_dag(monkeypatch: pytest.MonkeyPatch, dag_file: Path) -> FakeDag:
    """Execute ``dag_file`` (and ``slatelib_dag_common`` next to it) against the stand-in;
    fails if either imports slatelib."""
    airflow = types.ModuleType("airflow")
    airflow.DAG = FakeDag  # type: ignore[attr-defined]
    bash = types.ModuleType("airflow.providers.standard.operators.bash")
    bash.BashOperator = FakeBash  # type: ignore[attr-defined]
    sdk = types.ModuleType("airflow.sdk")
    sdk.Param = FakeParam  # type: ignore[attr-defined]
    for name, mod in {"airflow": airflow, "airflow.sdk": sdk,
                      "airflow.providers": types.ModuleType("p"),
                      "airflow.providers.standard": types.ModuleType("s"),
                      "airflow.providers.standard.operators": types.ModuleType("o"),
                      "airflow.providers.standard.operators.bash": bash}.items():
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
    return loaded


def render(dag: FakeDag, job: str, **overrides: Any) -> list[str]:
    """The job's arguments in the command the DAG's only task renders (Jinja, as Airflow)."""
    params = {**param_values(dag.kwargs["params"]), **overrides}
    text = jinja2.Template(dag.tasks[0].bash_command).render(params=params, ts_nodash=TS_NODASH)
    argv = shlex.split(text.replace("\\\n", " "))
    return argv[argv.index(job) + 1:]
