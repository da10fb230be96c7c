"""``store_requests`` in the reports of the jobs (compact, gc, rescale, export on Spark's
local mode) and of ``slate compact`` / ``slate gc``, checked against the test S3 server's
own count for the bucket: every kind exactly, and the object bytes within the bodies the
server saw (which also hold XML). Databases are copies of the official golden fixtures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slatelib.config import CompactionSettings, Settings
from tests.conftest import GOLDEN_DIR
from tests.export_s3_support import s3_settings
from tests.s3_server import S3Bucket, create_bucket

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture
def s3_env(spark: Any, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The S3 settings for this process and the session's Python workers."""
    with s3_settings(spark, moto_endpoint, monkeypatch):
        yield


def upload(bucket: S3Bucket, fixture: str, root: str) -> str:
    """The golden fixture ``fixture`` under ``root`` in ``bucket`` (then the bucket's count
    is zeroed); returns the database URL."""
    store = bucket.open()
    src = GOLDEN_DIR / fixture
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        store.put(f"{root}/{path.relative_to(src).as_posix()}", path.read_bytes())
    bucket.reset_requests()
    return f"{bucket.url}/{root}"


def check_against_server(report: dict[str, Any], bucket: S3Bucket) -> dict[str, Any]:
    """The report's ``store_requests`` equal the server's count for ``bucket``."""
    counted = report["store_requests"]
    served = bucket.requests()
    assert counted["requests"] == served["requests"], (counted, served)
    assert counted["total"] == sum(served["requests"].values())
    assert 0 <= counted["bytes_written"] <= served["bytes_in"]
    assert 0 < counted["bytes_read"] <= served["bytes_out"]
    for part in ("driver", "executors"):
        assert set(counted[part]) == {"requests", "total", "bytes_read", "bytes_written",
                                      "retries"}
    assert counted["driver"]["total"] + counted["executors"]["total"] == counted["total"]
    return counted


@pytest.fixture
def bucket(moto_endpoint: str) -> S3Bucket:
    return create_bucket(moto_endpoint)


@pytest.mark.usefixtures("s3_env")
def test_compact_job_reports_the_requests_the_server_counted(spark: Any,
                                                             bucket: S3Bucket) -> None:
    from slatelib.jobs.compact import build_parser, run

    db = upload(bucket, "basic", "tenant/db")
    args = build_parser().parse_args(["--db", db, "--policy", "full", "--parallelism", "2",
                                      "--takeover"])
    settings = Settings(compaction=CompactionSettings(min_range_bytes=1))
    report, code = run(spark, settings, args)
    assert code == 0, report
    assert report["databases"][0]["outcome"] == "committed"
    counted = check_against_server(report, bucket)
    # the key ranges ran on executors: they read the inputs and wrote the outputs
    executors = counted["executors"]["requests"]
    assert executors.get("ranged_get", 0) > 0
    assert executors.get("conditional_put", 0) > 0  # output SSTs are created, never overwritten
    assert counted["driver"]["requests"].get("conditional_put", 0) >= 2  # fence, commit


@pytest.mark.usefixtures("s3_env")
def test_gc_job_reports_the_requests_the_server_counted(spark: Any, bucket: S3Bucket,
                                                        tmp_path: Path) -> None:
    from slatelib.config import load_settings
    from slatelib.jobs.gc import build_parser, run

    db = upload(bucket, "gc_collected", "tenant/db")
    conf = tmp_path / "gc.toml"
    conf.write_text("[gc]\ndriver_listing_max = 0\nlist_partitions = 3\n")
    args = build_parser().parse_args(["--db", db, "--min-age", "0s", "--force",
                                      "--no-dry-run", "--conf", str(conf)])
    report, code = run(spark, load_settings(args.conf), args)
    assert code == 0, report
    deleted = sum(k.get("deleted", 0) for k in report["totals"]["kinds"].values())
    assert deleted > 0
    counted = check_against_server(report, bucket)
    assert counted["executors"]["requests"].get("multi_delete", 0) > 0  # deleted there
    # deletes go in DeleteObjects batches of up to 1000 keys
    assert counted["requests"].get("multi_delete", 0) <= deleted
    assert "delete" not in counted["requests"]


@pytest.mark.usefixtures("s3_env")
def test_rescale_job_reports_the_requests_the_server_counted(spark: Any,
                                                             bucket: S3Bucket) -> None:
    from slatelib.jobs.rescale import build_parser, run

    db = upload(bucket, "basic", "src")
    args = build_parser().parse_args(["split", "--db", db, "--into", "2", "--to",
                                      f"{bucket.url}/shard-{{i}}", "--store-root", bucket.url,
                                      "--fence-source"])
    report, code = run(spark, Settings(compaction=CompactionSettings(min_range_bytes=1)), args)
    assert code == 0, report
    counted = check_against_server(report, bucket)
    assert counted["executors"]["total"] > 0


@pytest.mark.usefixtures("s3_env")
def test_export_job_from_s3_reports_the_requests_the_server_counted(
        spark: Any, bucket: S3Bucket, tmp_path: Path) -> None:
    from slatelib.jobs.export import build_parser, run

    db = upload(bucket, "basic", "tenant/db")
    args = build_parser().parse_args(["--db", db, "--to", f"file://{tmp_path}/pq",
                                      "--format", "parquet", "--partitions", "2"])
    report, code = run(spark, Settings(), args)
    assert code == 0, report
    counted = check_against_server(report, bucket)
    assert counted["executors"]["requests"].get("ranged_get", 0) > 0  # the rows were read there


@pytest.mark.usefixtures("s3_env")
@pytest.mark.parametrize("command", [["gc", "--min-age", "0s", "--force", "--no-dry-run"],
                                     ["compact", "--policy", "full", "--takeover"]])
def test_slate_cli_reports_the_requests_the_server_counted(
        bucket: S3Bucket, command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from slatelib.cli import main as slate

    db = upload(bucket, "gc_collected" if command[0] == "gc" else "basic", "tenant/db")
    code = slate(["--db", db, *command])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    counted = check_against_server(report, bucket)
    assert counted["executors"]["total"] == 0  # everything ran in this process
    assert f"{counted['total']:,} store requests" in report["headline"]
