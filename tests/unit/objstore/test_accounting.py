"""Store request accounting: the counter, the report shape, and the requests that memory and
local stores record (what S3 would bill for the same calls)."""

from __future__ import annotations

import threading

import pytest

from slatelib.objstore import ObjectStore, RetryingObjectStore, accounting
from slatelib.objstore.accounting import (
    JobRequests,
    RequestCounter,
    RequestCounts,
    list_pages,
    multipart_requests,
    requests_report,
)
from slatelib.testing.faulty import FlakyObjectStore
from tests.objstore_request_scenario import (
    EXPECTED,
    EXPECTED_BYTES_READ,
    EXPECTED_BYTES_WRITTEN,
    run_scenario,
)


def test_counts_add_subtract_and_total() -> None:
    a = RequestCounts(get=2, list=1, bytes_read=10, retries=1)
    b = RequestCounts(get=1, multi_delete=3, bytes_written=5)
    assert (a + b).total == 7
    assert (a + b - b) == a
    assert RequestCounts.from_flat((a + b).as_flat()) == a + b
    assert RequestCounts.from_flat({"get": 1, "unknown": 9}) == RequestCounts(get=1)


def test_report_shape_sums_driver_and_executors_and_omits_zero_kinds() -> None:
    report = requests_report(RequestCounts(get=2, bytes_read=7),
                             RequestCounts(ranged_get=3, put=1, bytes_written=4, retries=2))
    assert report == {
        "requests": {"get": 2, "ranged_get": 3, "put": 1}, "total": 6, "bytes_read": 7,
        "bytes_written": 4, "retries": 2,
        "driver": {"requests": {"get": 2}, "total": 2, "bytes_read": 7, "bytes_written": 0,
                   "retries": 0},
        "executors": {"requests": {"ranged_get": 3, "put": 1}, "total": 4, "bytes_read": 0,
                      "bytes_written": 4, "retries": 2},
    }


@pytest.mark.parametrize(("listed", "pages"), [(0, 1), (1, 1), (999, 1), (1000, 1),
                                               (1001, 2), (2500, 3), (3000, 3)])
def test_list_pages_follow_s3_pages_of_1000_keys(listed: int, pages: int) -> None:
    assert list_pages(listed) == pages


def test_multipart_upload_is_create_parts_and_complete() -> None:
    assert multipart_requests(17, 16) == 4
    assert multipart_requests(32, 16) == 4
    assert multipart_requests(33, 16) == 5


def test_counter_is_thread_safe() -> None:
    counter = RequestCounter()

    def work() -> None:
        for _ in range(2000):
            counter.record("get", bytes_read=3)
            counter.record_retry()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.snapshot() == RequestCounts(get=16000, bytes_read=48000, retries=16000)


@pytest.mark.parametrize("which", ["memory_store", "local_store"])
def test_memory_and_local_stores_count_what_s3_would_bill(
        which: str, request: pytest.FixtureRequest) -> None:
    store: ObjectStore = request.getfixturevalue(which)

    def seed(keys: list[str]) -> None:
        for k in keys:
            store.put(k, b"")

    before: list[RequestCounts] = []
    run_scenario(store, lambda keys: (seed(keys), before.append(accounting.snapshot())))
    delta = accounting.snapshot() - before[0]
    assert delta.to_dict()["requests"] == EXPECTED
    assert delta.bytes_written == EXPECTED_BYTES_WRITTEN
    assert delta.bytes_read == EXPECTED_BYTES_READ


def test_retried_attempts_count_as_requests_and_as_retries(memory_store: ObjectStore) -> None:
    memory_store.put("x", b"data")
    flaky = FlakyObjectStore(memory_store)
    with accounting.measure() as m:
        # the fault is injected above the bare store: the failed attempt sent nothing
        flaky.fail_before("get", times=2)
        store = RetryingObjectStore(flaky, sleep=lambda _: None)
        assert store.get("x") == b"data"
    assert m.delta == RequestCounts(get=1, bytes_read=4, retries=2)
    # below the retry layer, every attempt that reaches the store is a request
    raw_flaky = FlakyObjectStore(memory_store)
    raw_flaky.fail_after("put", times=1)
    with accounting.measure() as m2:
        RetryingObjectStore(raw_flaky, sleep=lambda _: None).put("y", b"12345")
    assert m2.delta == RequestCounts(put=2, bytes_written=10, retries=1)


def test_job_requests_split_driver_and_executors(memory_store: ObjectStore) -> None:
    executors = [RequestCounts(put=5)]
    job = JobRequests(lambda: executors[0])
    memory_store.put("k", b"abc")
    memory_store.get("k")
    executors[0] = RequestCounts(put=7, ranged_get=4)
    report = job.report()
    assert report["driver"]["requests"] == {"get": 1, "put": 1}
    assert report["executors"]["requests"] == {"put": 2, "ranged_get": 4}
    assert report["total"] == 8


def test_headlines_end_with_the_request_total_when_counted() -> None:
    from slatelib.ops.job_report import compact_report, gc_report

    counted = requests_report(RequestCounts(get=1200, list=34))
    gc = gc_report(0, [], seconds=1.0, dry_run=False, min_age_s=0, store_requests=counted)
    assert gc["store_requests"]["total"] == 1234
    assert gc["headline"].endswith("; 1,234 store requests; 1.0 s")
    compact = compact_report(0, [], seconds=2.0, dry_run=False)
    assert "store_requests" not in compact and "store request" not in compact["headline"]
