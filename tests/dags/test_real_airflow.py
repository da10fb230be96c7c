"""The DAGs on real Apache Airflow 3 (3.3.2 with the Spark provider, in its own venv
``.venv-airflow`` that ``make test`` builds from ``tests/dags/airflow-requirements.txt``):
loaded into a DagBag without import errors, then each run with ``dag.test()`` against a local
database that the project's slatelib wrote, so a compaction (``BashOperator`` runner:
spark-submit in a shell) and a GC (``SparkSubmitOperator`` runner, Spark connection
``spark_default`` pointing at ``local[2]``) really happen, and their reports reach XCom.
Also: a DAG without databases skips cleanly, and one without a project directory fails at
once (no retry) with a message naming the Variable.

The probe (``airflow_probe.py``) runs in the Airflow venv; the database is written and read
here, with slatelib. Without the Airflow venv the tests fail and say how to make it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slatelib.objstore import open_store, split_db_url
from slatelib.store.manifest_store import ManifestStore
from tests.dags.airflow_env import probe

pytestmark = [pytest.mark.dags, pytest.mark.timeout(1200)]  # the fixture runs 8 DAG runs

ROOT = Path(__file__).resolve().parents[2]


def write_db(url: str, tmp: Path, *, rows: int = 4000, l0s: int = 4) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts/compaction_demo.py"), "write",
                    "--db", url, "--rows", str(rows), "--l0s", str(l0s),
                    "--model", str(tmp / "model.jsonl")], check=True, capture_output=True)


def write_wal_store_db(url: str, wal_store: str) -> None:
    """A database whose WAL (with a WAL-only tail) lives in ``wal_store``."""
    from slatelib import Db

    store_url, path = split_db_url(url)
    with Db.open(path, store_url, wal_store=wal_store) as db:
        db.put(b"a", b"1")
        db.flush()
        db.put(b"b", b"2")
        db.close(flush="wal")


def installed_python(where: Path) -> str:
    """A Python that has this checkout's slatelib installed, as a wheel install would (the
    project venv's, with the checkout first on its path), and its venv's spark-submit
    beside it: what a worker venv with ``pip install 'slatelib[spark]'`` holds."""
    where.mkdir(parents=True, exist_ok=True)
    python = where / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    (where / "spark-submit").symlink_to(Path(sys.executable).parent / "spark-submit")
    return str(python)


def manifest(url: str) -> Any:
    store_url, path = split_db_url(url)
    return ManifestStore(open_store(store_url), path).read_latest().value


def objects(url: str, kind: str) -> int:
    return sum(1 for _ in Path(url.removeprefix("file://"), kind).iterdir())


LOCAL = {"executor_env": "", "spark_conf": {"spark.ui.enabled": "false"}}
"""local[2] runs: executors use the driver's Python (the project's venv), nothing packed."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("dags")
    url = f"file://{tmp}/db"
    write_db(url, tmp)
    before = manifest(url)
    counts = {"manifest": objects(url, "manifest"), "wal": objects(url, "wal")}
    wal_db, wal_store = f"file://{tmp}/main/db", f"file://{tmp}/wal"
    write_wal_store_db(wal_db, wal_store)
    gc_conf = tmp / "gc-now.toml"  # so that the just-compacted L0s' siblings may go at once
    gc_conf.write_text('[gc]\nmin_age = "0s"\nmin_age_floor = "0s"\n')
    result = probe(tmp, [
        {"dag_id": "slatelib_compaction",
         "conf": {**LOCAL, "runner": "bash", "policy": "l0",
                  "spark_submit_args": "--master local[2]", "report_dir": str(tmp / "reports")}},
        {"dag_id": "slatelib_gc",
         "conf": {**LOCAL, "runner": "spark_submit_operator", "dry_run": False,
                  "conf_files": ["conf/base.toml", str(gc_conf)]}},
        # the databases and the project from the Variables; the default runner
        {"dag_id": "slatelib_compaction", "conf": LOCAL},
        # the nightly export: its first run writes the Delta table
        {"dag_id": "slatelib_export",
         "conf": {**LOCAL, "runner": "bash", "db": url, "to": f"{tmp}/lake/t",
                  "spark_submit_args": "--master local[2]"}},
        # a database whose WAL is in its own store, named by its entry in the list
        {"dag_id": "slatelib_gc",
         "conf": {**LOCAL, "runner": "bash", "spark_submit_args": "--master local[2]",
                  "databases": [{"db": wal_db, "wal_store": wal_store}]}},
    ], slatelib_project_dir=str(ROOT), slatelib_databases=json.dumps([url]))
    # Same DAGs, no project directory and no databases at all (the defaults of a new setup);
    # then no project directory, and a python param naming a venv with slatelib installed
    # (this checkout's, through a shim: what `pip install slatelib` would give).
    bare = probe(tmp / "bare", [{"dag_id": "slatelib_gc", "conf": {}},
                                {"dag_id": "slatelib_gc", "conf": {"databases": [url]}},
                                {"dag_id": "slatelib_gc", "conf": {
                                    **LOCAL, "runner": "bash", "databases": [url],
                                    "python": installed_python(tmp / "installed"),
                                    "spark_submit_args": "--master local[2]"}}])
    return {"url": url, "tmp": tmp, "before": before, "after": manifest(url), "counts": counts,
            "result": result, "bare": bare}


def test_airflow_3_loads_every_dag_with_namespaced_ids(runs: dict[str, Any]) -> None:
    result = runs["result"]
    assert result["import_errors"] == {}
    assert sorted(result["dags"]) == ["slatelib_compaction", "slatelib_export", "slatelib_gc",
                                      "slatelib_rescale"]
    gc, compaction, rescale = (result["dags"][f"slatelib_{n}"]
                               for n in ("gc", "compaction", "rescale"))
    assert (gc["schedule"], gc["max_active_runs"], gc["catchup"]) == ("1:00:00", 1, False)
    assert (compaction["schedule"], compaction["max_active_runs"]) == ("0:30:00", 1)
    assert rescale["schedule"] == "None"
    assert compaction["tasks"]["plan"]["downstream"] == ["compact", "compact_spark"]
    assert compaction["tasks"]["compact"]["operator"] == "SlatelibBashOperator"
    assert compaction["tasks"]["compact_spark"]["operator"] == "SlatelibSparkSubmitOperator"
    assert compaction["tasks"]["compact"]["timeout_s"] == 14400.0
    assert gc["tasks"]["plan"]["retries"] == 0 and gc["tasks"]["gc"]["retries"] == 1
    assert rescale["tasks"]["rescale"]["retries"] == 0


def test_params_are_typed_and_name_what_make_builds(runs: dict[str, Any]) -> None:
    dags = runs["result"]["dags"]
    gc, compaction = dags["slatelib_gc"]["params"], dags["slatelib_compaction"]["params"]
    assert compaction["databases"]["schema"]["type"] == "array"
    assert compaction["databases"]["value"] == [] and compaction["project_dir"]["value"] == ""
    assert compaction["policy"]["value"] == "size-tiered"
    assert compaction["parallelism"]["schema"]["type"] == ["null", "integer"]
    assert gc["dry_run"]["value"] is None and gc["dry_run"]["schema"]["type"] == ["null", "boolean"]
    assert gc["runner"]["value"] == "spark_submit_operator"
    assert gc["spark_conn_id"]["value"] == "spark_default"
    makefile = (ROOT / "Makefile").read_text()
    default_env = gc["executor_env"]["value"]
    assert f"EXECUTOR_ENV := {default_env}" in makefile, default_env
    rescale = dags["slatelib_rescale"]["params"]
    assert rescale["into"]["schema"] == {"type": "integer", "minimum": 2}
    assert rescale["command"]["schema"]["enum"] == ["split", "merge"]
    assert rescale["dry_run"]["value"] is True and "databases" not in rescale


def test_compaction_dag_compacts_and_pushes_its_report(runs: dict[str, Any]) -> None:
    run = runs["result"]["runs"][0]
    assert run["state"] == "success", run["tasks"]
    assert run["tasks"]["compact"]["state"] == "success"
    assert run["tasks"]["compact_spark"]["state"] == "skipped"
    report = run["xcom"]["compact"]["return_value"]
    assert report["job"] == "compact" and report["status"] == "success"
    assert run["xcom"]["compact"]["headline"] == report["headline"]
    assert report["headline"].startswith("compacted 4 L0")
    (db,) = report["databases"]
    assert db["outcome"] == "committed" and db["db"] == runs["url"]
    before, after = runs["before"], runs["after"]
    assert len(before.l0) == 4 and not after.l0 and len(after.compacted) == 1
    kept = list((runs["tmp"] / "reports").glob("compaction-*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == report


def test_gc_dag_deletes_through_spark_submit_operator(runs: dict[str, Any]) -> None:
    run = runs["result"]["runs"][1]
    assert run["state"] == "success", run["tasks"]
    assert run["tasks"]["gc_spark"]["state"] == "success"
    assert run["tasks"]["gc"]["state"] == "skipped"
    report = run["xcom"]["gc_spark"]["return_value"]
    assert report["job"] == "gc" and report["status"] == "success"
    assert report["dry_run"] is False and report["totals"]["deleted"] > 0
    assert run["xcom"]["gc_spark"]["headline"].startswith(
        f"deleted {report['totals']['deleted']} objects")
    deleted = report["databases"][0]["kinds"]
    assert deleted["manifest"]["deleted"] > 0 and deleted["wal"]["deleted"] > 0
    for kind in ("manifest", "wal"):  # gone from the disk, not only from the report
        assert objects(runs["url"], kind) < runs["counts"][kind]


def test_databases_and_project_come_from_variables(runs: dict[str, Any]) -> None:
    run = runs["result"]["runs"][2]
    assert run["state"] == "success", run["tasks"]
    assert run["tasks"]["compact_spark"]["state"] == "success"  # the default runner
    plan = run["xcom"]["plan"]["plan"]
    argv = plan["argv"]
    assert plan["project_dir"] == str(ROOT) and argv[argv.index("--db") + 1] == runs["url"]
    assert argv[argv.index("--policy") + 1] == "size-tiered"
    report = run["xcom"]["compact_spark"]["return_value"]
    assert report["status"] == "success"  # one sorted run left: nothing to do
    assert report["databases"][0]["outcome"] == "nothing_to_do"


def test_new_setup_skips_without_databases_and_fails_clearly_without_project(
    runs: dict[str, Any],
) -> None:
    # the second run has no project and Airflow's own Python has no slatelib (the third,
    # with a python param that has it: the next test)
    nothing, no_project = runs["bare"]["runs"][:2]
    assert nothing["state"] == "success"  # a skipped run is not a failed one
    assert {t: s["state"] for t, s in nothing["tasks"].items()} == \
        {"plan": "skipped", "gc": "skipped", "gc_spark": "skipped"}
    assert nothing["tasks"]["plan"]["try_number"] == 1
    assert no_project["state"] == "failed"
    assert no_project["tasks"]["plan"]["state"] == "failed"
    assert no_project["tasks"]["plan"]["try_number"] == 1  # no retry


def test_without_a_project_the_dag_runs_the_installed_package(runs: dict[str, Any]) -> None:
    """No slatelib_project_dir: Airflow's own Python has no slatelib (the run above fails
    at plan), the python param's has it: the plan finds that package's job module, and
    spark-submit (the one beside that Python) runs it; the report reaches XCom."""
    run = runs["bare"]["runs"][2]
    assert run["state"] == "success", run["tasks"]
    plan = run["xcom"]["plan"]["plan"]
    assert plan["project_dir"] == ""
    assert plan["application"] == str(ROOT / "slatelib" / "jobs" / "gc.py")
    assert "--conf" not in plan["argv"]  # the code's defaults: no checkout conf/
    assert plan["python"].endswith("/installed/python")
    report = run["xcom"]["gc"]["return_value"]
    assert report["job"] == "gc" and report["status"] == "success"
    assert report["dry_run"] is True and report["databases"][0]["db"] == runs["url"]


def test_a_database_entry_with_its_wal_store_reaches_the_job(runs: dict[str, Any]) -> None:
    run = runs["result"]["runs"][4]
    assert run["state"] == "success", run["tasks"]
    argv = run["xcom"]["plan"]["plan"]["argv"]
    entry = json.loads(argv[argv.index("--db") + 1])
    assert entry == {"db": f"file://{runs['tmp']}/main/db", "wal_store": f"file://{runs['tmp']}/wal"}
    report = run["xcom"]["gc"]["return_value"]
    (db,) = report["databases"]
    assert db["status"] == "success" and db["wal_store"] == f"file://{runs['tmp']}/wal"
    assert db["kinds"]["wal"]["listed"] > 0  # listed in the WAL store


def test_export_dag_writes_the_delta_table_and_pushes_its_report(runs: dict[str, Any]) -> None:
    from deltalake import DeltaTable

    from slatelib import DbReader

    run = runs["result"]["runs"][3]
    assert run["state"] == "success", run["tasks"]
    report = run["xcom"]["export"]["return_value"]
    assert report["job"] == "export" and report["status"] == "success"
    (db,) = report["databases"]
    # auto: the first run; the DAG's spark-submit has the fetched Delta jars (its jars param)
    assert db["mode"] == "overwrite" and db["writer"] == "delta-spark"
    assert run["xcom"]["export"]["headline"] == report["headline"]
    table = DeltaTable(f"{runs['tmp']}/lake/t").to_pyarrow_table().to_pylist()
    store_url, path = split_db_url(runs["url"])
    with DbReader.open(path, store_url, checkpoint=db["checkpoint"]["id"]) as r:
        assert sorted((x["key"], x["value"]) for x in table) == list(r.scan())
    assert db["rows"] == len(table) > 0
