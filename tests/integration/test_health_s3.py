"""What reading a database's health numbers costs on S3, counted by the test server: one
LIST page, a handful of GETs (the latest manifest, one probe past it, the compactions file,
each manifest a live checkpoint pins), no HEAD and no write."""

from __future__ import annotations

import pytest

from slatelib.ops.db_stats import collect_db_stats
from tests.s3_server import S3Bucket
from tests.unit.ops.test_db_stats import ROOT, write_db

pytestmark = pytest.mark.integration


def test_health_of_a_database_costs_one_list_and_a_few_gets(s3_bucket: S3Bucket) -> None:
    store = s3_bucket.open()
    w, t0 = write_db(store)  # manifests 1..5, a live checkpoint pinning 4, an expired one
    s3_bucket.reset_requests()
    stats = collect_db_stats(store, ROOT, now_ms=t0)
    counted = s3_bucket.requests()
    assert counted["requests"] == {"list": 1, "get": 4}, counted
    assert (stats.manifest_versions, stats.checkpoints, stats.objects) == (5, 1, len(
        w.listing()))
