"""Databases for the cluster tier, written and read by official SlateDB 0.17 on the
cluster's S3 host (the oracle side: nothing here goes through slatelib's reader)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from tests.cluster.harness import ACCESS_KEY, REGION, SECRET_KEY, Cluster
from tests.interop.official import (
    DbSettings,
    Delete,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    run,
    s3_store,
)


def official_store(cluster: Cluster, bucket: str) -> Any:
    return s3_store(bucket, endpoint=cluster.s3_endpoint, region=REGION,
                    access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY)


@dataclass
class Db:
    """A database on the cluster's S3 host and what a reader must see in it."""

    cluster: Cluster
    bucket: str
    path: str
    model: Model

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.path}"

    def official(self) -> Any:
        return official_store(self.cluster, self.bucket)

    def read(self, path: str | None = None) -> dict[bytes, bytes]:
        """Every row, as the official reader sees it (of ``path``, default this one)."""
        with OfficialReader.open(self.official(), path or self.path) as r:
            return dict(r.scan())

    def manifest(self, path: str | None = None) -> Any:
        return OfficialAdmin(self.official(), path or self.path).manifest()

    def store(self) -> Any:
        """slatelib's store at the bucket."""
        return self.cluster.open_store(f"s3://{self.bucket}")


def write_official(cluster: Cluster, *, path: str = "db", l0s: int = 4, rows: int = 400,
                   keys: int = 1500, seed: int = 7, bucket: str | None = None,
                   settings: DbSettings | None = None) -> Db:
    """A database written by official 0.17 (its compactor off): ``l0s`` L0 SSTs of puts,
    overwrites and deletes in random key order, then rows left only in the WAL."""
    bucket = bucket or cluster.new_bucket()
    rng = random.Random(seed)
    model = Model()
    store = official_store(cluster, bucket)
    with OfficialDb.open(store, path, settings or DbSettings(compactor=False),
                         model=model) as db:
        for n in range(l0s + 1):
            ops: list[Any] = []
            for i in range(rows):
                k = b"key:%06d" % rng.randrange(keys)
                if rng.random() < 0.1:
                    ops.append(Delete(k))
                else:
                    ops.append(Put(k, b"v%d.%d." % (n, i) + bytes(rng.randrange(40))))
            for chunk in range(0, len(ops), 100):
                db.write(ops[chunk:chunk + 100])
            if n < l0s:
                db.flush_memtable()
            else:
                db.flush_wal()  # the last batch stays in the WAL only
    return Db(cluster, bucket, path, model)


def l0_count(db: Db, path: str | None = None) -> int:
    return len(db.manifest(path).l0)


def sorted_runs(db: Db, path: str | None = None) -> list[Any]:
    return list(db.manifest(path).compacted)


def run_official(coro: Any) -> Any:
    return run(coro)
