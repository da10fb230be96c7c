"""jobs/export.py with an S3 target: a database written by official SlateDB 0.17 in bucket A
of the moto server, exported to bucket B by Spark's own writers through S3A (Parquet, Delta
with delta-spark, Delta with the delta-rs fallback; full and incremental), with the same
S3 settings as the source. Each table is read back with Spark and with delta-rs (its own
storage options, not slatelib's) and compared with the official reader at the exported
checkpoint; the report's bytes and files with a boto3 listing of the bucket. The real entry
point runs once in a subprocess with the credentials in an ``--env-file`` only.

Needs the S3A and Delta jars on the session's class path (the test session has them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slatelib.config import Settings
from slatelib.errors import InvalidArgumentError
from slatelib.jobs.export import build_parser, main, run
from slatelib.ops.export.pin import EXPORT_CHECKPOINT_NAME
from slatelib.spark.jars import class_loadable
from slatelib.spark.s3a import configure_s3a_target, require_s3a
from tests.export_s3_support import (
    Source,
    all_keys,
    data_files,
    deltars_rows,
    env_vars,
    live_files_of,
    s3_settings,
)
from tests.interop.official import OfficialAdmin
from tests.s3_server import S3Bucket, create_bucket

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
MARKER = "secret-marker-5b7e0c"
"""A secret key only the env file has (the test server does not check signatures)."""


@pytest.fixture
def s3_env(spark: Any, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The source's S3 settings for this process and the session's Python workers (what
    ``--env-file`` gives a job's driver and, as ``spark.executorEnv.*``, its executors)."""
    with s3_settings(spark, moto_endpoint, monkeypatch):
        yield


@pytest.fixture
def target(moto_endpoint: str) -> S3Bucket:
    return create_bucket(moto_endpoint)


@pytest.fixture
def source(moto_endpoint: str) -> Source:
    src = Source(create_bucket(moto_endpoint))
    src.write(1)
    return src


def export(spark: Any, db: str, to: str, *argv: str) -> tuple[dict[str, Any], int]:
    args = build_parser().parse_args(["--db", db, "--to", to, "--partitions", "2", *argv])
    return run(spark, Settings(), args)


def spark_rows(spark: Any, uri: str, fmt: str) -> dict[bytes, bytes]:
    rows = spark.read.format(fmt).load(uri).collect()
    out = {bytes(r.key): bytes(r.value) for r in rows}
    assert len(out) == len(rows)
    return out


@pytest.mark.usefixtures("s3_env")
def test_parquet_export_to_s3a_with_spark_writer_matches_the_bucket(
        spark: Any, source: Source, target: S3Bucket) -> None:
    to = f"s3a://{target.name}/lake/pq"
    report, code = export(spark, source.url, to, "--format", "parquet")
    assert code == 0, report
    (entry,) = report["databases"]
    assert entry["writer"] == "spark-parquet"
    landed = data_files(target, "lake/pq")
    assert entry["files"] == len(landed) >= 1 and entry["bytes"] == sum(landed.values())
    expected = source.model.live()
    assert entry["rows"] == len(expected) > 0
    assert spark_rows(spark, to, "parquet") == expected
    assert spark_rows(spark, f"s3://{target.name}/lake/pq", "parquet") == expected
    # a Parquet export keeps no checkpoint, and nothing landed in the source's bucket
    admin = OfficialAdmin(source.official(), "tenant/db").manifest()
    assert not [c for c in admin.checkpoints if c.name == EXPORT_CHECKPOINT_NAME]
    assert not [k for k in all_keys(source.bucket) if "lake" in k]


@pytest.mark.usefixtures("s3_env")
@pytest.mark.parametrize("writer", ["delta-spark", "delta-rs"])
def test_delta_full_then_incremental_export_to_s3(
        spark: Any, source: Source, target: S3Bucket, writer: str) -> None:
    to = f"s3://{target.name}/lake/t"
    report, code = export(spark, source.url, to, "--format", "delta", "--delta-writer", writer)
    assert code == 0, report
    (full,) = report["databases"]
    assert full["writer"] == writer and full["delta_version"] == 0
    first = source.at(full["checkpoint"]["id"])
    assert first == source.model.live() and full["rows"] == len(first)
    assert deltars_rows(target, "lake/t") == first == spark_rows(spark, to, "delta")
    landed = data_files(target, "lake/t")
    assert set(landed) == live_files_of(target, "lake/t")
    assert full["files"] == len(landed) and full["bytes"] == sum(landed.values())
    # the writer changes the database; the next export applies only the changes
    source.write(2)
    report, code = export(spark, source.url, to, "--format", "delta", "--mode", "incremental",
                          "--delta-writer", writer)
    assert code == 0, report
    (inc,) = report["databases"]
    assert inc["since"] == full["checkpoint"]["id"] and inc["delta_version"] == 1
    second = source.at(inc["checkpoint"]["id"])
    assert second == source.model.live() != first
    assert deltars_rows(target, "lake/t") == second == spark_rows(spark, to, "delta")
    assert inc["previous_checkpoint"] == {"id": full["checkpoint"]["id"], "released": True}
    # no staged changes left behind (delta-rs stages them in a hidden folder)
    assert not [k for k in all_keys(target) if "_slatelib-changes-" in k]


@pytest.mark.usefixtures("s3_env")
def test_a_missing_target_bucket_is_refused_before_anything_is_written(
        spark: Any, source: Source) -> None:
    before = all_keys(source.bucket)
    report, code = export(spark, source.url, "s3://no-such-bucket-here/lake/t", "--format",
                          "delta")
    assert code == 2, report
    (entry,) = report["databases"]
    assert entry["error"]["type"] == "InvalidArgumentError"
    assert "bucket 'no-such-bucket-here' does not exist" in entry["error"]["message"]
    assert all_keys(source.bucket) == before  # no checkpoint was made


def test_malformed_s3_settings_exit_2_before_spark_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    env = tmp_path / "bad.env"
    env.write_text("SLATELIB_S3_ENDPOINT=localhost:9000\n")
    monkeypatch.delenv("SLATELIB_S3_ENDPOINT", raising=False)  # what the env file sets
    monkeypatch.setattr("slatelib.config._loaded_from_files", {})
    code = main(["--db", "file:///nowhere/db", "--to", "s3://b/t", "--format", "delta",
                 "--env-file", str(env)])
    assert code == 2
    assert "SLATELIB_S3_ENDPOINT" in capsys.readouterr().err


def test_the_job_with_credentials_in_an_env_file_only(
        source: Source, target: S3Bucket, tmp_path: Path) -> None:
    """``python jobs/export.py`` as a new process: its S3 settings (for the source, S3A and
    delta-rs alike) come from ``--env-file`` alone."""
    env_file = tmp_path / "s3.env"
    variables = {**env_vars(source.bucket.endpoint), "SLATELIB_S3_SECRET_ACCESS_KEY": MARKER}
    env_file.write_text("".join(f"{k}={v}\n" for k, v in variables.items()))
    report_file = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLATELIB_", "AWS_"))}
    env.update(PYTHONPATH=str(ROOT), MASTER="local[2]", PYSPARK_PYTHON=sys.executable)
    to = f"s3://{target.name}/lake/job"
    done = subprocess.run(
        [sys.executable, str(ROOT / "jobs" / "export.py"), "--db", source.url, "--to", to,
         "--format", "delta", "--partitions", "2", "--env-file", str(env_file),
         "--report", str(report_file)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-6000:]
    report = json.loads(report_file.read_text())
    assert json.loads(done.stdout) == report
    (entry,) = report["databases"]
    assert entry["writer"] == "delta-spark"
    expected = source.at(entry["checkpoint"]["id"])
    assert deltars_rows(target, "lake/job") == expected and entry["rows"] == len(expected)
    landed = data_files(target, "lake/job")
    assert entry["files"] == len(landed) and entry["bytes"] == sum(landed.values())
    assert MARKER not in done.stdout + done.stderr  # the secret is never printed


def test_s3a_is_found_in_the_session_and_a_missing_class_is_refused_naming_the_jars(
        spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    require_s3a(lambda name: class_loadable(jvm, name), "s3://lake/t")  # the session has them
    with pytest.raises(InvalidArgumentError, match=r"not on the driver's class path.*--jars"):
        require_s3a(lambda name: class_loadable(jvm, name + "Missing"), "s3://lake/t")


@pytest.mark.usefixtures("s3_env")
def test_what_the_session_already_sets_for_s3a_wins_over_the_derived_properties(
        spark: Any, moto_endpoint: str) -> None:
    bucket = f"given-{uuid.uuid4().hex[:8]}"
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    hconf.set(f"fs.s3a.bucket.{bucket}.endpoint", "http://given.example:9000")
    hconf.set(f"fs.s3a.bucket.{bucket}.aws.credentials.provider", "given.Provider")
    shown = configure_s3a_target(spark, f"s3a://{bucket}/t")
    assert hconf.get(f"fs.s3a.bucket.{bucket}.endpoint") == "http://given.example:9000"
    assert hconf.get(f"fs.s3a.bucket.{bucket}.aws.credentials.provider") == "given.Provider"
    assert hconf.get(f"fs.s3a.bucket.{bucket}.access.key") is None  # credentials: a group
    # Hadoop's own defaults (core-default.xml: path.style.access false) do not count as given
    assert hconf.get(f"fs.s3a.bucket.{bucket}.path.style.access") == "true"
    assert hconf.get(f"fs.s3a.bucket.{bucket}.endpoint.region") == "us-east-1"
    assert set(shown) == {f"fs.s3a.bucket.{bucket}.{o}" for o in (
        "connection.ssl.enabled", "path.style.access", "endpoint.region")} | {
        k for k in ("fs.s3.impl", "fs.AbstractFileSystem.s3.impl") if k in shown}
    assert configure_s3a_target(spark, "file:///tmp/t") == {}
