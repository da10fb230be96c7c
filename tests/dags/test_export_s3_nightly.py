"""The nightly export DAG against S3, as a reviewer would run it: a database in one bucket of
the moto server that an official SlateDB 0.17 writer keeps changing between runs, the Delta
table in another bucket, the credentials in an env file (the DAG's ``env_files``).

Three nights: the first two are planned by the DAG file (against the stand-in of
tests/dags/fake_airflow.py) and run as its bash runner runs them (``spark-submit`` with the
plan's ``--jars``, which carry the S3A jars for the S3 target); the third runs on real
Airflow 3. After each night the table, read with delta-spark and with delta-rs, must equal
the official reader's view of the checkpoint that night exported (a full export the first
night, only the changes since the previous night's checkpoint after), and the Delta log must
have one more version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slatelib.spark.jars import select
from tests.dags.airflow_env import probe
from tests.dags.fake_airflow import ROOT, load_dag, plan
from tests.export_s3_support import Source, data_files, deltars_rows, env_vars, live_files_of
from tests.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Bucket, create_bucket

pytestmark = [pytest.mark.dags, pytest.mark.spark, pytest.mark.integration]

DAG_FILE = ROOT / "airflow_dags" / "slatelib_export.py"


def night_plan(monkeypatch: pytest.MonkeyPatch, **conf: Any) -> dict[str, Any]:
    dag, common, module = load_dag(monkeypatch, DAG_FILE)
    planned: dict[str, Any] = plan(dag, common, module.export_args, job="export",
                                   selection=False, **conf)
    return planned


def run_like_the_bash_runner(planned: dict[str, Any], report: Path) -> dict[str, Any]:
    """``spark-submit`` of the plan as the DAG's bash runner builds it (local master), with
    nothing of the S3 settings in the environment: they come from the env file."""
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    if planned["jars"]:
        cmd += ["--jars", ",".join(planned["jars"])]
    cmd += [planned["application"], *planned["argv"], "--report", str(report)]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLATELIB_", "AWS_", "PYSPARK_"))}
    env.update(PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
                          check=False)
    assert done.returncode == 0, done.stderr[-6000:]
    got: dict[str, Any] = json.loads(report.read_text())
    return got


def read_with_delta_spark(spark: Any, lake: S3Bucket, uri: str) -> dict[bytes, bytes]:
    """The table as delta-spark reads it in the test session, its S3A settings for the
    lake's bucket written out here."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in {"endpoint": lake.endpoint, "path.style.access": "true",
                       "connection.ssl.enabled": "false", "endpoint.region": REGION,
                       "access.key": ACCESS_KEY, "secret.key": SECRET_KEY,
                       "aws.credentials.provider":
                           "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"}.items():
        conf.set(f"fs.s3a.bucket.{lake.name}.{key}", value)
    rows = spark.read.format("delta").load(uri.replace("s3://", "s3a://", 1)).collect()
    out = {bytes(r.key): bytes(r.value) for r in rows}
    assert len(out) == len(rows)
    return out


def check_night(spark: Any, source: Source, lake: S3Bucket, uri: str, report: dict[str, Any],
                night: int, previous: str | None) -> str:
    """Check one night's report and table; returns the checkpoint it exported."""
    assert report["status"] == "success", report
    (entry,) = report["databases"]
    assert entry["mode"] == ("overwrite" if night == 1 else "incremental"), entry
    assert entry["delta_version"] == night - 1
    expected = source.at(entry["checkpoint"]["id"])
    assert expected == source.model.live()  # what the writer had written by then
    assert deltars_rows(lake, "lake/t") == expected
    assert read_with_delta_spark(spark, lake, uri) == expected
    if night == 1:  # a full export: the report's files are the table's, as listed
        landed = {k: v for k, v in data_files(lake, "lake/t").items()
                  if k in live_files_of(lake, "lake/t")}
        assert entry["files"] == len(landed) and entry["bytes"] == sum(landed.values())
    else:  # only the changes since the previous night's checkpoint, which is released
        assert entry["since"] == previous
        assert entry["previous_checkpoint"] == {"id": previous, "released": True}
    return str(entry["checkpoint"]["id"])


@pytest.mark.timeout(1500)  # three Spark applications with the AWS bundle, and Airflow
def test_three_nights_keep_the_s3_delta_table_equal_to_the_changing_database(
        spark: Any, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    source = Source(create_bucket(moto_endpoint))
    lake = create_bucket(moto_endpoint)
    env_file = tmp_path / "s3.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env_vars(moto_endpoint).items()))
    uri = f"s3://{lake.name}/lake/t"
    conf = {"db": source.url, "to": uri, "env_files": [str(env_file)], "partitions": 2}
    s3a_jars = {str(ROOT / "build" / "jars" / j.filename) for j in select(["s3a"])}
    previous: str | None = None
    for night in (1, 2):
        source.write(night)
        planned = night_plan(monkeypatch, **conf)
        assert s3a_jars <= set(planned["jars"])  # the S3 target brings the S3A jars
        report = run_like_the_bash_runner(planned, tmp_path / f"night-{night}.json")
        previous = check_night(spark, source, lake, uri, report, night, previous)
    # the third night on real Airflow 3: its plan task, its bash runner, the report in XCom
    source.write(3)
    result = probe(tmp_path / "airflow", [{"dag_id": "slatelib_export", "conf": {
        **conf, "runner": "bash", "executor_env": "", "spark_submit_args": "--master local[2]",
        "spark_conf": {"spark.ui.enabled": "false"}}}],
        env={"PYTHONPATH": str(ROOT)}, slatelib_project_dir=str(ROOT))
    (run,) = result["runs"]
    assert run["state"] == "success", run["tasks"]
    check_night(spark, source, lake, uri, run["xcom"]["export"]["return_value"], 3, previous)
