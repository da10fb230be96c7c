"""Compaction on an S3-compatible store (the tests' moto server): conditional puts for the
manifest and compactions CAS, ranged gets of blocks, executors reopening the store from the
task's ``StoreSpec`` (credentials and endpoint travel with it here)."""

from __future__ import annotations

import random

import pytest

from slatelib import DbReader
from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.row import TOMBSTONE, VALUE
from slatelib.errors import FencedError
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db
from tests.s3_server import S3Bucket

pytestmark = pytest.mark.integration

SETTINGS = Settings(sst=SstSettings(block_size=512, compression_codec="lz4", min_filter_keys=8),
                    compaction=CompactionSettings(policy="l0", min_range_bytes=1,
                                                  max_sst_size=4096))


def test_compaction_on_s3_reads_ranges_and_commits_with_conditional_puts(
    s3_bucket: S3Bucket,
) -> None:
    store = s3_bucket.open()
    new_db(store, "tenant/db")
    rng = random.Random(9)
    live: dict[bytes, bytes] = {}
    for seq in range(1, 5):
        rows = []
        for k in rng.sample(range(300), 100):
            key = b"k%04d" % k
            if rng.random() < 0.2:
                rows.append((key, seq, TOMBSTONE, b"", None, NOW_MS))
                live.pop(key, None)
            else:
                rows.append((key, seq, VALUE, b"v%d" % seq, None, NOW_MS))
                live[key] = b"v%d" % seq
        flush_l0(store, "tenant/db", rows)
    assert store.spec.options_dict()["endpoint"] == s3_bucket.endpoint
    report = run_compaction("tenant/db", store, settings=SETTINGS, parallelism=3,
                            runner=ThreadTaskRunner(3))  # tasks reopen S3 from the spec
    assert report.status == "committed" and report.tasks == 3
    assert len(report.outputs["ssts"]) == 3  # one per range
    with DbReader.open("tenant/db", store, mode="latest") as r:
        assert dict(r.scan()) == live
    m = ManifestStore(store, "tenant/db").read_latest().value
    assert m.l0 == () and m.compactor_epoch == 1
    assert CompactionsStore(store, "tenant/db").read_latest().value.compactor_epoch == 1


def test_two_jobs_on_s3_the_later_fences_the_earlier(s3_bucket: S3Bucket) -> None:
    store = s3_bucket.open()
    new_db(store, "db")
    for seq in (1, 2):
        flush_l0(store, "db", [(b"k%d" % i, seq, VALUE, b"x", None, NOW_MS) for i in range(50)])
    second: list[object] = []

    class SecondJobMeanwhile(ThreadTaskRunner):
        def __call__(self, tasks):  # type: ignore[no-untyped-def]
            out = super().__call__(tasks)
            second.append(run_compaction("db", store, settings=SETTINGS))
            return out

    with pytest.raises(FencedError):
        run_compaction("db", store, settings=SETTINGS, runner=SecondJobMeanwhile(2))
    assert second[0].status == "committed"  # type: ignore[attr-defined]
    assert ManifestStore(store, "db").read_latest().value.compactor_epoch == 2
