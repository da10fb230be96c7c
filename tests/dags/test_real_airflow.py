"""The DAGs loaded by real Apache Airflow (2.10.5, in its own venv ``.venv-airflow`` that
``make test`` builds from ``tests/dags/airflow-requirements.txt``): a DagBag without
import errors, the schedule and limits as Airflow reads them, and the commands rendered by
Airflow's own template engine from the DAG params plus run-conf overrides, parsed by the
jobs' argument parsers.

The other DAG tests import the DAG files against a stand-in; this one proves the stand-in
tells the truth. Without the Airflow venv it fails and says how to make it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from jobs.compact import build_parser as compact_parser
from jobs.gc import build_parser as gc_parser
from jobs.rescale import build_parser as rescale_parser

pytestmark = pytest.mark.dags

ROOT = Path(__file__).resolve().parents[2]
TS = "20260101T000000"

# Runs inside the Airflow venv: loads the DagBag, renders each task's command for every
# override set read from stdin, prints one JSON document.
_PROBE = r"""
import json, sys
from airflow.models import DagBag

bag = DagBag(dag_folder=sys.argv[1], include_examples=False)
overrides = json.load(sys.stdin)
out = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()},
       "dag_ids": sorted(bag.dag_ids), "dags": {}}
for dag_id, dag in bag.dags.items():
    info = {"schedule": str(dag.schedule_interval), "max_active_runs": dag.max_active_runs,
            "catchup": dag.catchup, "tags": sorted(dag.tags), "tasks": [], "rendered": []}
    for t in dag.tasks:
        info["tasks"].append({"task_id": t.task_id, "operator": type(t).__name__,
                              "timeout_s": t.execution_timeout.total_seconds(),
                              "retries": t.retries})
        for extra in overrides.get(dag_id, []):
            params = dag.params.dump()
            params.update(extra)
            info["rendered"].append(t.render_template(
                t.bash_command, {"params": params, "ts_nodash": sys.argv[2]},
                jinja_env=dag.get_template_env()))
    out["dags"][dag_id] = info
print(json.dumps(out))
"""


def airflow_python() -> str:
    path = os.environ.get("SLATELIB_AIRFLOW_PYTHON") or str(ROOT / ".venv-airflow/bin/python")
    assert Path(path).is_file(), (
        f"no Airflow interpreter at {path}: run `make test-dags` (or `make test`), which "
        "builds .venv-airflow, or point SLATELIB_AIRFLOW_PYTHON at a Python with "
        "apache-airflow installed")
    return path


def load(overrides: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    home = ROOT / "var" / "airflow-home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "airflow_dags"),  # on sys.path, as deployed
           "AIRFLOW__CORE__UNIT_TEST_MODE": "True"}
    done = subprocess.run(
        [airflow_python(), "-c", _PROBE, str(ROOT / "airflow_dags"), TS],
        input=json.dumps(overrides), capture_output=True, text=True, env=env, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def job_argv(command: str, job: str) -> list[str]:
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[:3] == ["cd", "/opt/slatelib", "&&"] and argv[3] == "spark-submit", argv
    return argv[argv.index(job) + 1:]


@pytest.fixture(scope="module")
def bag() -> dict[str, Any]:
    return load({
        "gc": [{}, {"databases": ["s3://b/db1", "s3://b/db2"], "dry_run": False},
               {"discover": "s3://b/tenants/", "min_age": "10min", "dry_run": True,
                "store_root": "s3://b"}],
        "compaction": [{}, {"dbs_file": "/etc/slatelib/dbs.txt", "policy": "full",
                            "parallelism": "16", "dry_run": True}],
        "rescale": [{"db": "s3://b/db", "to": "s3://b/db-{i}"},
                    {"db": "s3://b/db", "into": 3, "at": "k1,it's", "to": "s3://b/db-{i}",
                     "dry_run": False, "fence_source": True, "parallelism": 4},
                    {"command": "merge", "sources": ["s3://b/db-0", "s3://b/db-1"],
                     "to": "s3://b/db", "dry_run": False}],
    })


def test_airflow_loads_every_dag_without_import_errors(bag: dict[str, Any]) -> None:
    assert bag["import_errors"] == {}
    assert bag["dag_ids"] == ["compaction", "gc", "rescale"]


def test_schedules_and_limits_are_what_airflow_reads(bag: dict[str, Any]) -> None:
    gc, compaction = bag["dags"]["gc"], bag["dags"]["compaction"]
    assert (gc["schedule"], gc["max_active_runs"], gc["catchup"]) == ("1:00:00", 1, False)
    assert (compaction["schedule"], compaction["max_active_runs"], compaction["catchup"]) == \
        ("0:30:00", 1, False)
    assert gc["tasks"] == [{"task_id": "gc", "operator": "BashOperator",
                            "timeout_s": 7200.0, "retries": 1}]
    assert compaction["tasks"] == [{"task_id": "compact", "operator": "BashOperator",
                                    "timeout_s": 14400.0, "retries": 1}]


def test_gc_commands_rendered_by_airflow_are_accepted_by_the_job(bag: dict[str, Any]) -> None:
    default, listed, discovered = (gc_parser().parse_args(job_argv(c, "jobs/gc.py"))
                                   for c in bag["dags"]["gc"]["rendered"])
    assert default.db == [] and default.dry_run is None  # the conf decides: dry run in base
    assert default.conf == ["conf/base.toml"]
    assert default.report == f"/var/log/slatelib/gc-{TS}.json"
    assert listed.db == ["s3://b/db1", "s3://b/db2"] and listed.dry_run is False
    assert (discovered.discover, discovered.min_age, discovered.dry_run) == \
        ("s3://b/tenants/", "10min", True)
    assert default.store_root is None and discovered.store_root == "s3://b"


def test_compaction_commands_rendered_by_airflow_are_accepted_by_the_job(
    bag: dict[str, Any],
) -> None:
    default, overridden = (compact_parser().parse_args(job_argv(c, "jobs/compact.py"))
                           for c in bag["dags"]["compaction"]["rendered"])
    assert default.db == [] and not default.dry_run and default.policy == "size-tiered"
    assert default.report == f"/var/log/slatelib/compaction-{TS}.json"
    assert (overridden.dbs_file, overridden.policy, overridden.parallelism) == \
        ("/etc/slatelib/dbs.txt", "full", "16")
    assert overridden.dry_run


def test_rescale_is_manual_and_its_commands_are_accepted_by_the_job(bag: dict[str, Any],
                                                                   ) -> None:
    rescale = bag["dags"]["rescale"]
    assert (rescale["schedule"], rescale["max_active_runs"], rescale["catchup"]) == \
        ("None", 1, False)
    assert rescale["tasks"] == [{"task_id": "rescale", "operator": "BashOperator",
                                 "timeout_s": 43200.0, "retries": 0}]
    default, split, merge = (rescale_parser().parse_args(job_argv(c, "jobs/rescale.py"))
                             for c in rescale["rendered"])
    assert (default.command, default.into, default.dry_run) == ("split", 2, True)
    assert default.report == f"/var/log/slatelib/rescale-split-{TS}.json"
    assert (split.into, split.at, split.to) == (3, "k1,it's", "s3://b/db-{i}")
    assert split.fence_source and not split.dry_run and split.parallelism == 4
    assert merge.command == "merge" and merge.source == ["s3://b/db-0", "s3://b/db-1"]
    assert merge.to == "s3://b/db" and not merge.dry_run
