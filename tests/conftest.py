"""Shared pytest fixtures: environment isolation, golden fixtures, temp roots."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent
GOLDEN_DIR = TESTS_DIR / "data" / "golden" / "0.17.0"

FIXTURE_NAMES = [
    "basic",
    "codec_snappy",
    "codec_zlib",
    "codec_lz4",
    "codec_zstd",
    "ckpt_src",
    "ckpt_clone",
    "ckpt_clone_proj",
    "ttl_merge",
    "segmented",
    "default_settings",
    "gc_collected",
    "seq_tracker",
]


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read a developer's SLATELIB_* configuration."""
    for name in list(os.environ):
        if name.startswith("SLATELIB_"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The read-only golden fixture folder (databases written by official 0.17.0)."""
    assert GOLDEN_DIR.is_dir(), f"golden fixtures missing at {GOLDEN_DIR}"
    return GOLDEN_DIR


def load_expected(name: str) -> dict[str, Any]:
    with open(GOLDEN_DIR / f"{name}.expected.json") as f:
        data: dict[str, Any] = json.load(f)
    return data


@pytest.fixture
def fixture_copy(tmp_path: Path) -> Iterator[Path]:
    """A writable copy of every golden fixture, side by side (clones need their source)."""
    dst = tmp_path / "fixtures"
    shutil.copytree(GOLDEN_DIR, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    yield dst


# -- objstore: S3 through a moto server subprocess (tests/s3_server.py) --------------------

from tests.s3_server import S3Bucket, create_bucket, start_moto_server  # noqa: E402


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """Endpoint URL (``http://127.0.0.1:<port>``) of a moto S3 server for this session."""
    server = start_moto_server()
    try:
        yield server.endpoint
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(moto_endpoint: str) -> S3Bucket:
    """A fresh, empty bucket: ``open_raw_store(s3_bucket.url, **s3_bucket.options)`` or
    ``s3_bucket.open()``."""
    return create_bucket(moto_endpoint)


from tests.pg_server import PgServer, start_pg  # noqa: E402


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL cluster for this session (two-phase CAS); a failure to start
    fails the tests that use it."""
    server = start_pg()
    try:
        yield server
    finally:
        server.close()


# -- Spark: the one session-scoped local SparkSession of the whole test run ----------------


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession for every test that needs Spark (tests/spark, and the
    data source's interop tests in tests/interop); never start another. It has the
    fetched Delta and S3A jars (make jars), as a job writing to an S3 target would."""
    from slatelib.spark.session import build_spark

    session = build_spark(
        "slatelib-tests",
        master="local[2]",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
        jars=("delta", "s3a"),
    )
    yield session
    session.stop()
