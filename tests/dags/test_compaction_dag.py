"""The compaction DAG: compiles, imports nothing from slatelib (nor anything but the
standard library and the DAGs' common module), and plans arguments that ``jobs/compact.py``
accepts; a run without databases skips, one without a project directory fails clearly.

The project's virtualenv has no Airflow (it lives in .venv-airflow), so these fast tests
run the file against a stand-in (tests/dags/fake_airflow.py); tests/dags/test_real_airflow.py
runs it on real Airflow 3.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slatelib.jobs.compact import build_parser
from tests.dags.fake_airflow import ROOT, FailRun, SkipRun, job_argv, load_dag, plan

pytestmark = pytest.mark.dags

DAG_FILE = ROOT / "airflow_dags" / "compaction.py"


def args_for(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str] | None = None,
             **overrides: Any) -> Any:
    """The job's arguments as a run with ``overrides`` as its conf plans them."""
    dag, common, module = load_dag(monkeypatch, DAG_FILE, variables)
    planned = plan(dag, common, module.compact_args, job="compact", **overrides)
    return build_parser().parse_args(job_argv(planned))


@pytest.mark.parametrize("path", [DAG_FILE, ROOT / "airflow_dags" / "slatelib_dag_common.py"])
def test_dag_files_import_nothing_from_slatelib(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    compile(tree, str(path), "exec")
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom)}
    assert not imported & {"slatelib", "jobs"}, imported
    if path == DAG_FILE:
        assert imported <= {"__future__", "datetime", "typing", "slatelib_dag_common"}, imported


def test_dag_is_namespaced_and_runs_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    dag, _, _ = load_dag(monkeypatch, DAG_FILE)
    assert dag.dag_id == "slatelib_compaction"
    assert [t.task_id for t in dag.tasks] == ["plan", "compact"]  # no Spark provider here
    assert dag.kwargs["max_active_runs"] == 1 and dag.kwargs["catchup"] is False
    params = dag.kwargs["params"]
    assert params["runner"].value == "bash" and params["runner"].schema["enum"] == ["bash"]
    assert params["policy"].value == "size-tiered"  # keeps sorted runs bounded


def test_planned_arguments_are_accepted_by_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for(monkeypatch, databases=["s3://bucket/a", "s3://bucket/b"],
                    conf_files=["conf/base.toml", "/etc/slatelib/prod.toml"])
    assert args.db == ["s3://bucket/a", "s3://bucket/b"]
    assert args.conf == [str(ROOT / "conf/base.toml"), "/etc/slatelib/prod.toml"]
    assert args.policy == "size-tiered" and args.max_sst_size is None and not args.dry_run


@pytest.mark.parametrize(("policy", "expected"), [("l0", "l0"), ("full", "full"), ("", None)])
def test_policy_l0_and_full_stay_explicit_choices(monkeypatch: pytest.MonkeyPatch,
                                                  policy: str, expected: str | None) -> None:
    args = args_for(monkeypatch, databases=["s3://bucket/a"], policy=policy)
    assert args.policy == expected


def test_run_conf_overrides_reach_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for(monkeypatch, discover="s3://bucket/tenants/", policy="full",
                    max_sst_size="128MiB", parallelism=16, dry_run=True, store_root="s3://bucket")
    assert (args.discover, args.policy, args.max_sst_size, args.parallelism) == \
        ("s3://bucket/tenants/", "full", "128MiB", "16")
    assert args.dry_run and args.store_root == "s3://bucket"


def test_databases_come_from_the_variable_as_json_or_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    as_json = args_for(monkeypatch, {"slatelib_databases": '["s3://b/x", "s3://b/y"]'})
    assert as_json.db == ["s3://b/x", "s3://b/y"]
    as_lines = args_for(monkeypatch, {"slatelib_databases": "# tenants\ns3://b/x\n\ns3://b/z\n",
                                      "slatelib_dbs_file": "conf/dbs.txt"})
    assert as_lines.db == ["s3://b/x", "s3://b/z"] and as_lines.dbs_file == str(ROOT / "conf/dbs.txt")
    run_wins = args_for(monkeypatch, {"slatelib_databases": '["s3://b/x"]'}, databases=["s3://b/q"])
    assert run_wins.db == ["s3://b/q"]


def test_a_database_entry_names_its_wal_store_and_the_job_resolves_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slatelib.jobs._common import resolve_targets

    own = {"db": "s3://b/x", "wal_store": "s3://express--x"}
    args = args_for(monkeypatch, databases=["s3://b/plain", own, {"db": "s3://b/none",
                                                                  "wal_store": ""}],
                    wal_store="s3://fleet-wal")
    assert args.wal_store == "s3://fleet-wal"
    got = {t.name: t.wal_store for t in resolve_targets(args)}
    assert got == {"s3://b/plain": "s3://fleet-wal", "s3://b/x": "s3://express--x",
                   "s3://b/none": ""}
    lines = args_for(monkeypatch, {"slatelib_databases":
                                   '# fleet\ns3://b/a\n{"db": "s3://b/x", "wal_store": "s3://w"}\n'})
    assert {t.name: t.wal_store for t in resolve_targets(lines)} == {"s3://b/a": "",
                                                                    "s3://b/x": "s3://w"}
    as_json = args_for(monkeypatch, {"slatelib_databases": json.dumps(["s3://b/a", own])})
    assert {t.name: t.wal_store for t in resolve_targets(as_json)}["s3://b/x"] == "s3://express--x"
    with pytest.raises(FailRun, match="a database is a URL or"):
        args_for(monkeypatch, databases=[{"db": "s3://b/x", "wal": "s3://w"}])


def test_no_database_skips_and_a_wrong_project_fails_clearly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SkipRun, match="slatelib_databases"):
        args_for(monkeypatch)
    project = args_for(monkeypatch, {"slatelib_project_dir": str(ROOT)}, databases=["s3://b/x"],
                       project_dir="")
    assert project.db == ["s3://b/x"]
    with pytest.raises(FailRun, match="no jobs/"):
        args_for(monkeypatch, databases=["s3://b/x"], project_dir="/")
    with pytest.raises(FailRun, match="make package-executor-env"):
        args_for(monkeypatch, databases=["s3://b/x"], executor_env="dist/absent.tar.gz")


def installed_plan(monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> dict[str, Any]:
    """The plan of a run with neither the Variable slatelib_project_dir nor the param."""
    dag, common, module = load_dag(monkeypatch, DAG_FILE)
    return plan(dag, common, module.compact_args, job="compact",
                **{"project_dir": "", "executor_env": EXECUTOR_ENV_DEFAULT, **overrides})


EXECUTOR_ENV_DEFAULT = "dist/slatelib-executor-env.tar.gz"


def test_without_a_project_the_installed_package_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """No slatelib_project_dir: the job module of the slatelib this Python has installed
    (here the one on sys.path), run by this interpreter, with the code's default settings;
    the default executor env (relative to a checkout) is dropped; absolute paths apply."""
    import slatelib.jobs.compact as installed

    planned = installed_plan(monkeypatch, databases=["s3://b/x"])
    assert planned["project_dir"] == ""
    assert planned["application"] == str(Path(installed.__file__).resolve())
    assert planned["application"] != str(ROOT / "jobs" / "compact.py")
    assert planned["python"] == sys.executable and planned["executor_env"] == ""
    assert planned["jars"] == [] and planned["packages"] == []
    args = build_parser().parse_args(job_argv(planned))
    assert args.db == ["s3://b/x"] and args.conf == []  # conf/base.toml: the code defaults
    env = ROOT / "dist" / "for-test.tar.gz"
    given = installed_plan(monkeypatch, databases=["s3://b/x"],
                           conf_files=["conf/base.toml", "/etc/slatelib/prod.toml"],
                           executor_env=str(ROOT / "pyproject.toml"))
    assert build_parser().parse_args(job_argv(given)).conf == ["/etc/slatelib/prod.toml"]
    assert given["executor_env"] == str(ROOT / "pyproject.toml")
    for bad in ({"conf_files": ["conf/prod.toml"]}, {"env_files": ["creds.env"]},
                {"dbs_file": "dbs.txt", "databases": []}, {"executor_env": "env.tar.gz"}):
        with pytest.raises(FailRun, match="is relative, and no slatelib project directory"):
            installed_plan(monkeypatch, **{"databases": ["s3://b/x"], **bad})
    with pytest.raises(FailRun, match="make package-executor-env"):
        installed_plan(monkeypatch, databases=["s3://b/x"], executor_env=str(env))


def test_without_a_project_a_python_without_slatelib_fails_clearly(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The python param's interpreter is asked where its slatelib is (a subprocess); one
    that has none fails the run at once, naming both ways out."""
    bare = tmp_path / "python"
    bare.write_text("#!/bin/sh\nexec " + sys.executable + " -I -S \"$@\"\n")
    bare.chmod(0o755)
    with pytest.raises(FailRun, match=r"slatelib is not installed for .*slatelib_project_dir"):
        installed_plan(monkeypatch, databases=["s3://b/x"], python=str(bare))
    # the same interpreter through the subprocess path finds the package this test imports
    shim = tmp_path / "python-with"
    shim.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    planned = installed_plan(monkeypatch, databases=["s3://b/x"], python=str(shim))
    assert planned["application"] == str(ROOT / "slatelib" / "jobs" / "compact.py")
    assert planned["python"] == str(shim)


def test_a_run_without_a_project_executes_the_installed_job(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The planned command, as the bash runner starts it (the application is the installed
    module's file, run as a script), on a real database: a dry run (no Spark) that plans
    the compaction of its L0s and writes the report the task reads back."""
    from slatelib import Db

    with Db.open("db", f"file://{tmp_path}") as db:
        for i in range(3):
            db.put(f"k{i}".encode(), b"v")
            db.flush()
    planned = installed_plan(monkeypatch, databases=[f"file://{tmp_path}/db"], dry_run=True,
                             policy="l0")
    report = tmp_path / "report.json"
    done = subprocess.run([planned["python"], planned["application"],
                           *job_argv(planned, str(report))], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(report.read_text())
    assert got["job"] == "compact" and got["dry_run"] is True
    assert got["databases"][0]["db"] == f"file://{tmp_path}/db"
