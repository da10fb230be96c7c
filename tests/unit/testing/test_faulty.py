"""FlakyObjectStore: rule matching, before/after semantics, counters, latency, crashes."""

from __future__ import annotations

import re

import pytest

from slatelib.errors import StorageError, UnavailableError
from slatelib.objstore import ObjectStore
from slatelib.testing.faulty import FaultRule, FlakyObjectStore, SimulatedCrash


@pytest.fixture
def flaky(memory_store: ObjectStore) -> FlakyObjectStore:
    return FlakyObjectStore(memory_store)


def test_fail_before_has_no_effect_on_storage(flaky: FlakyObjectStore) -> None:
    flaky.fail_before("put")
    with pytest.raises(UnavailableError, match="before put 'k'"):
        flaky.put("k", b"v")
    assert list(flaky.inner.list("")) == []
    flaky.put("k", b"v")  # times=1: the next call goes through
    assert flaky.get("k") == b"v"


def test_fail_after_lands_then_loses_the_response(flaky: FlakyObjectStore) -> None:
    flaky.fail_after("put_if_absent")
    with pytest.raises(UnavailableError):
        flaky.put_if_absent("m/1", b"v")
    assert flaky.inner.get("m/1") == b"v"


def test_rules_match_op_and_path_substring_or_regex(flaky: FlakyObjectStore) -> None:
    flaky.fail_before("put", path="manifest/", times=None)
    flaky.fail_before(None, path=re.compile(r"\.sst$"), times=None)
    flaky.put("db/wal/1.log", b"")
    with pytest.raises(UnavailableError):
        flaky.put("db/manifest/1", b"")
    with pytest.raises(UnavailableError):
        flaky.head("db/wal/1.sst")
    flaky.get("db/wal/1.log")
    assert flaky.calls["put"] == 2 and flaky.calls["head"] == 1 and flaky.calls["get"] == 1


def test_skip_then_fail_the_next_k(flaky: FlakyObjectStore) -> None:
    rule = flaky.fail_before("put", skip=2, times=2)
    outcomes = []
    for i in range(6):
        try:
            flaky.put(f"k{i}", b"")
            outcomes.append("ok")
        except UnavailableError:
            outcomes.append("fail")
    assert outcomes == ["ok", "ok", "fail", "fail", "ok", "ok"]
    assert (rule.seen, rule.fired) == (6, 2)


def test_custom_error_and_crash(flaky: FlakyObjectStore) -> None:
    flaky.fail_before("get", error=lambda: StorageError("denied"))
    flaky.inner.put("k", b"v")
    with pytest.raises(StorageError, match="denied"):
        flaky.get("k")
    flaky.crash("put", path="wal/")
    with pytest.raises(SimulatedCrash):
        try:
            flaky.put("db/wal/1.sst", b"x")
        except Exception:  # a crash is not an Exception: nothing can swallow it
            pytest.fail("SimulatedCrash was caught as an Exception")
    assert flaky.inner.get("db/wal/1.sst") == b"x"  # crashed after the write landed


def test_latency_uses_the_injected_sleep(memory_store: ObjectStore) -> None:
    slept: list[float] = []
    flaky = FlakyObjectStore(memory_store, sleep=slept.append)
    flaky.delay("get", seconds=0.25, times=2)
    memory_store.put("k", b"v")
    for _ in range(3):
        assert flaky.get("k") == b"v"
    assert slept == [0.25, 0.25]


def test_list_faults_before_after_items_and_after_completion(flaky: FlakyObjectStore) -> None:
    for i in range(5):
        flaky.inner.put(f"p/{i}", b"")
    flaky.fail_before("list", after_items=2)
    seen = []
    with pytest.raises(UnavailableError):
        for meta in flaky.list("p"):
            seen.append(meta.path)
    assert seen == ["p/0", "p/1"]
    flaky.fail_after("list")
    seen = []
    with pytest.raises(UnavailableError):
        for meta in flaky.list("p"):
            seen.append(meta.path)
    assert len(seen) == 5


def test_delete_many_matches_any_path_and_log_records_calls(flaky: FlakyObjectStore) -> None:
    flaky.inner.put("a", b"")
    flaky.inner.put("b", b"")
    flaky.fail_after("delete_many", path="b")
    with pytest.raises(UnavailableError):
        flaky.delete_many(["a", "b"])
    assert list(flaky.inner.list("")) == []
    assert flaky.log == [("delete_many", "a,b")]


def test_one_failure_per_call_and_clear(flaky: FlakyObjectStore) -> None:
    first = flaky.fail_before("head")
    second = flaky.add_rule(FaultRule(op="head", error=lambda: StorageError("second")))
    with pytest.raises(UnavailableError):
        flaky.head("x")
    with pytest.raises(StorageError):
        flaky.head("x")
    assert (first.fired, second.fired) == (1, 1)
    flaky.clear()
    flaky.inner.put("x", b"")
    assert flaky.head("x").path == "x"


def test_wraps_spec_and_url(memory_store: ObjectStore) -> None:
    flaky = FlakyObjectStore(memory_store)
    assert (flaky.spec, flaky.url) == (memory_store.spec, memory_store.url)
