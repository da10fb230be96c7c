"""Store request accounting against the test S3 server's own count (tests/s3_server.py):
the requests slatelib records for each call are exactly the requests the server receives,
kind by kind, and a memory store records the same numbers for the same calls."""

from __future__ import annotations

import pytest

from slatelib.objstore import accounting
from slatelib.objstore.accounting import RequestCounts
from tests.objstore_request_scenario import (
    EXPECTED,
    EXPECTED_BYTES_READ,
    EXPECTED_BYTES_WRITTEN,
    run_scenario,
)
from tests.s3_server import S3Bucket

pytestmark = pytest.mark.integration


def test_recorded_requests_equal_the_servers_count(s3_bucket: S3Bucket) -> None:
    store = s3_bucket.open("root")
    before: list[RequestCounts] = []

    def seed(keys: list[str]) -> None:
        s3_bucket.seed([f"root/{k}" for k in keys])
        s3_bucket.reset_requests()
        before.append(accounting.snapshot())

    run_scenario(store, seed)
    delta = accounting.snapshot() - before[0]
    served = s3_bucket.requests()
    assert delta.to_dict()["requests"] == served["requests"] == EXPECTED
    assert delta.bytes_written == EXPECTED_BYTES_WRITTEN <= served["bytes_in"]
    assert delta.bytes_read == EXPECTED_BYTES_READ <= served["bytes_out"]


def test_gc_sized_delete_takes_one_request_per_thousand_keys(s3_bucket: S3Bucket) -> None:
    keys = [f"db/wal/{i:020d}.sst" for i in range(4321)]
    s3_bucket.seed(keys)
    s3_bucket.reset_requests()
    with accounting.measure() as m:
        s3_bucket.open().delete_many(keys)
    assert s3_bucket.requests()["requests"] == {"multi_delete": 5}
    assert m.delta == RequestCounts(multi_delete=5)
    assert list(s3_bucket.open().list("db")) == []
