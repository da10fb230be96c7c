"""Shared by the S3-target export tests (tests/spark/test_export_s3.py, the nightly DAG
of tests/dags/test_export_s3_nightly.py): a database that official SlateDB 0.17 writes in
a bucket of the moto server, and what landed in the target bucket, read with boto3 and with
delta-rs (storage options written out here, not slatelib's)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from deltalake import DeltaTable

from tests.interop.official import (
    DbSettings,
    Delete,
    Model,
    OfficialDb,
    OfficialReader,
    Put,
    s3_store,
)
from tests.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Bucket


def env_vars(endpoint: str) -> dict[str, str]:
    return {"SLATELIB_S3_ENDPOINT": endpoint, "SLATELIB_S3_REGION": REGION,
            "SLATELIB_S3_ACCESS_KEY_ID": ACCESS_KEY, "SLATELIB_S3_SECRET_ACCESS_KEY": SECRET_KEY}


@contextmanager
def s3_settings(spark: Any, endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test server's S3 settings (:func:`env_vars`) for this process and the session's
    Python workers (what ``--env-file`` gives a job's driver and, as
    ``spark.executorEnv.*``, its executors); the workers' own are restored on exit."""
    added = env_vars(endpoint)
    for name, value in added.items():
        monkeypatch.setenv(name, value)
    workers = spark.sparkContext.environment
    saved = {k: workers.get(k) for k in added}
    workers.update(added)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                workers.pop(k, None)
            else:
                workers[k] = v


class Source:
    """A database written by official 0.17 in its own bucket, and its expected content."""

    def __init__(self, bucket: S3Bucket) -> None:
        self.bucket, self.model = bucket, Model()
        self.url = f"s3://{bucket.name}/tenant/db"

    def official(self) -> Any:
        return s3_store(self.bucket.name, endpoint=self.bucket.endpoint)

    def write(self, round_: int, *, keys: int = 300) -> None:
        """Puts, overwrites and deletes: one L0, then rows left in the WAL only."""
        with OfficialDb.open(self.official(), "tenant/db", DbSettings(compactor=False),
                             model=self.model) as db:
            ops: list[Any] = [Put(b"key:%05d" % i, b"r%d.%d" % (round_, i))
                              for i in range(round_, keys, 1 + round_)]
            ops += [Delete(b"key:%05d" % i) for i in range(round_ * 7, keys, 11)]
            db.write(ops[: len(ops) // 2])
            db.flush_memtable()
            db.write(ops[len(ops) // 2:])
            db.flush_wal()

    def at(self, checkpoint: str) -> dict[bytes, bytes]:
        """The official reader's view of ``checkpoint``."""
        with OfficialReader.open(self.official(), "tenant/db", checkpoint=checkpoint) as r:
            return dict(r.scan())


def client(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)


def data_files(bucket: S3Bucket, prefix: str) -> dict[str, int]:
    """Every visible ``*.parquet`` object below ``prefix`` (as readers see the data: no
    ``_delta_log/``, no hidden folder), by key, with its size, from a boto3 listing."""
    out: dict[str, int] = {}
    pages = client(bucket.endpoint).get_paginator("list_objects_v2").paginate(
        Bucket=bucket.name, Prefix=prefix.rstrip("/") + "/")
    for page in pages:
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix.rstrip("/")) + 1:]
            if rel.endswith(".parquet") and not any(
                    p.startswith(("_", ".")) for p in rel.split("/")):
                out[rel] = int(obj["Size"])
    return out


def all_keys(bucket: S3Bucket) -> list[str]:
    pages = client(bucket.endpoint).get_paginator("list_objects_v2").paginate(Bucket=bucket.name)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def deltars_rows(bucket: S3Bucket, path: str) -> dict[bytes, bytes]:
    """The table as delta-rs reads it, with storage options written out here."""
    options = {"AWS_ENDPOINT_URL": bucket.endpoint, "AWS_ALLOW_HTTP": "true",
               "AWS_REGION": REGION, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    rows = DeltaTable(f"s3://{bucket.name}/{path}", storage_options=options
                      ).to_pyarrow_table().to_pylist()
    out = {r["key"]: r["value"] for r in rows}
    assert len(out) == len(rows)
    return out


def live_files_of(bucket: S3Bucket, path: str) -> set[str]:
    options = {"AWS_ENDPOINT_URL": bucket.endpoint, "AWS_ALLOW_HTTP": "true",
               "AWS_REGION": REGION, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    base = f"s3://{bucket.name}/{path}/"
    uris = DeltaTable(base.rstrip("/"), storage_options=options).file_uris()
    assert all(u.startswith(base) for u in uris), uris
    return {u[len(base):] for u in uris}
