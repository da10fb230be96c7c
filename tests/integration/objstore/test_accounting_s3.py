"""Store request accounting against the test S3 server's own count (tests/s3_server.py):
the requests slatelib records for each call are exactly the requests the server receives,
kind by kind, and a memory store records the same numbers for the same calls."""

from __future__ import annotations

import pytest

from slatelib.objstore import accounting, open_raw_store
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


def test_slate_gc_collects_thousands_of_objects_in_one_request_per_thousand(
        s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``slate gc`` on S3 deletes with DeleteObjects: 2,500 dead WAL SSTs and 1,200 dead
    compacted SSTs take ceil(n / 1000) requests per directory, as the server counts them."""
    import json

    from slatelib.cli import main as slate
    from slatelib.clock import SYSTEM_CLOCK
    from slatelib.core.compactions import CompactionStatus
    from tests.export_s3_support import env_vars
    from tests.unit.gc_support import HOUR, DbWriter, compactions, manifest, ulid_at

    for name, value in env_vars(s3_bucket.endpoint).items():
        monkeypatch.setenv(name, value)
    n_wal, n_sst = 2500, 1200
    store = s3_bucket.open()
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, "tenant/db")
    l0 = ulid_at(t0 - HOUR)
    w.sst(l0)
    w.compactions(1, compactions((ulid_at(t0 - HOUR), CompactionStatus.COMPLETED)))
    w.manifests_upto(1, manifest(l0=[l0], replay_after=n_wal + 1, last_seen=n_wal + 1))
    w.wal(n_wal + 1)
    garbage = [w.paths.wal(i) for i in range(1, n_wal + 1)]
    garbage += [w.paths.compacted(ulid_at(t0 - 3 * HOUR - i * 1000)) for i in range(n_sst)]
    s3_bucket.seed(garbage, b"x")
    s3_bucket.reset_requests()
    code = slate(["--db", f"{s3_bucket.url}/tenant/db", "gc", "--min-age", "0s", "--force",
                  "--no-dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    kinds = report["totals"]["kinds"]
    assert (kinds["wal"]["deleted"], kinds["compacted"]["deleted"]) == (n_wal, n_sst)
    served = s3_bucket.requests()["requests"]
    assert served["multi_delete"] == 3 + 2
    assert report["store_requests"]["requests"] == served
    assert not {m.path for m in store.list("tenant/db")} & set(garbage)


def test_a_store_without_multi_object_delete_falls_back_to_one_delete_per_object(
        moto_endpoint: str) -> None:
    from tests.s3_server import create_bucket

    bucket = create_bucket(moto_endpoint, bulk_delete=False)
    keys = [f"db/wal/{i:020d}.sst" for i in range(30)]
    bucket.seed(keys)
    bucket.reset_requests()
    # obstore's own retries of the 501 would reach the server unseen (docs/request-accounting.md)
    store = open_raw_store(bucket.url, **bucket.options, max_retries=0)
    with accounting.measure() as m:
        store.delete_many(keys[:20])  # refused once, then one DELETE per object
        store.delete_many(keys[20:])  # straight to one DELETE per object
        store.delete("db/wal/missing")
    served = bucket.requests()["requests"]
    assert served == {"multi_delete": 1, "delete": 31}
    assert m.delta.to_dict()["requests"] == served
    assert list(store.list("db")) == []


def test_obstores_own_retries_of_a_failed_request_are_counted(moto_endpoint: str) -> None:
    """obstore retries the 501 of a refused DeleteObjects internally; its error says how
    often, and the count includes those requests."""
    from tests.s3_server import create_bucket

    bucket = create_bucket(moto_endpoint, bulk_delete=False)
    bucket.seed(["a", "b"])
    bucket.reset_requests()
    store = open_raw_store(bucket.url, **bucket.options, max_retries=2, retry_timeout_s=30)
    with accounting.measure() as m:
        store.delete_many(["a", "b"])
    served = bucket.requests()["requests"]
    assert served == {"multi_delete": 3, "delete": 2}
    assert m.delta.to_dict()["requests"] == served
