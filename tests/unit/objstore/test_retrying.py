"""RetryingObjectStore over FlakyObjectStore over a memory store (no wall-clock sleeps)."""

from __future__ import annotations

import random

import pytest

from slatelib.errors import (
    AlreadyExistsError,
    CommitStateUnknownError,
    ConflictError,
    InvalidArgumentError,
    ObjectMissingError,
    StorageError,
    UnavailableError,
)
from slatelib.objstore import ObjectStore, RetryingObjectStore
from slatelib.testing.faulty import FlakyObjectStore


class FakeSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleep() -> FakeSleep:
    return FakeSleep()


@pytest.fixture
def flaky(memory_store: ObjectStore) -> FlakyObjectStore:
    return FlakyObjectStore(memory_store)


def retrying(flaky: FlakyObjectStore, sleep: FakeSleep, **kw: object) -> RetryingObjectStore:
    return RetryingObjectStore(
        flaky, max_attempts=4, base_delay_s=0.1, max_delay_s=1.0, sleep=sleep,
        rng=random.Random(7), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_transient_failures_are_retried_until_success(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    flaky.inner.put("k", b"v")
    flaky.fail_before("get", times=3)
    assert retrying(flaky, sleep).get("k") == b"v"
    assert flaky.calls["get"] == 4
    assert len(sleep.delays) == 3


def test_gives_up_after_max_attempts(flaky: FlakyObjectStore, sleep: FakeSleep) -> None:
    flaky.fail_before("head", times=None)
    with pytest.raises(UnavailableError):
        retrying(flaky, sleep).head("k")
    assert flaky.calls["head"] == 4
    assert len(sleep.delays) == 3


def test_backoff_is_exponential_full_jitter_and_capped(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    store = RetryingObjectStore(
        flaky, max_attempts=8, base_delay_s=0.1, max_delay_s=0.5, sleep=sleep, rng=random.Random(1)
    )
    flaky.fail_before("get", times=None)
    with pytest.raises(UnavailableError):
        store.get("k")
    caps = [0.1, 0.2, 0.4, 0.5, 0.5, 0.5, 0.5]
    assert len(sleep.delays) == 7
    assert all(0.0 <= d <= cap for d, cap in zip(sleep.delays, caps, strict=True))
    expected_rng = random.Random(1)
    assert sleep.delays == [expected_rng.uniform(0.0, cap) for cap in caps]


@pytest.mark.parametrize(
    "error",
    [ConflictError("c"), AlreadyExistsError("a"), ObjectMissingError("m"), StorageError("s")],
)
def test_non_transient_errors_are_never_retried(
    flaky: FlakyObjectStore, sleep: FakeSleep, error: Exception
) -> None:
    flaky.fail_before("put", error=lambda: error)
    with pytest.raises(type(error)):
        retrying(flaky, sleep).put("k", b"v")
    assert flaky.calls["put"] == 1
    assert sleep.delays == []


def test_missing_object_is_not_retried(flaky: FlakyObjectStore, sleep: FakeSleep) -> None:
    with pytest.raises(ObjectMissingError):
        retrying(flaky, sleep).get("absent")
    assert flaky.calls["get"] == 1


def test_put_if_absent_lost_response_resolves_as_success(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    flaky.fail_after("put_if_absent")  # the first attempt lands but its response is lost
    retrying(flaky, sleep).put_if_absent("m/1", b"ours")
    assert flaky.inner.get("m/1") == b"ours"
    assert flaky.calls["put_if_absent"] == 2
    assert flaky.calls["get_with_meta"] == 1


def test_put_if_absent_lost_race_after_transient_error_is_already_exists(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    class RivalWinsDuringBackoff(FakeSleep):
        def __call__(self, seconds: float) -> None:
            super().__call__(seconds)
            flaky.inner.put("m/1", b"theirs")

    flaky.fail_before("put_if_absent")
    rival = RivalWinsDuringBackoff()
    with pytest.raises(AlreadyExistsError):
        retrying(flaky, rival).put_if_absent("m/1", b"ours")
    assert flaky.inner.get("m/1") == b"theirs"


def test_put_if_absent_without_transient_error_does_not_read_back(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    flaky.inner.put("m/1", b"ours")
    with pytest.raises(AlreadyExistsError):
        retrying(flaky, sleep).put_if_absent("m/1", b"ours")
    assert flaky.calls["get_with_meta"] == 0


def test_put_if_absent_read_back_failure_is_commit_state_unknown(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    flaky.fail_after("put_if_absent")
    flaky.fail_before("get_with_meta", times=None)
    with pytest.raises(CommitStateUnknownError):
        retrying(flaky, sleep).put_if_absent("m/1", b"ours")


def test_put_if_absent_exhausted_is_commit_state_unknown(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    flaky.fail_before("put_if_absent", times=None)
    with pytest.raises(CommitStateUnknownError) as info:
        retrying(flaky, sleep).put_if_absent("m/1", b"ours")
    assert isinstance(info.value.__cause__, UnavailableError)
    assert flaky.calls["put_if_absent"] == 4


def test_resolve_by_content_off_reports_unknown(flaky: FlakyObjectStore, sleep: FakeSleep) -> None:
    flaky.fail_after("put_if_absent")
    with pytest.raises(CommitStateUnknownError):
        retrying(flaky, sleep, resolve_by_content=False).put_if_absent("m/1", b"ours")
    assert flaky.calls["get_with_meta"] == 0


def test_put_if_match_lost_response_returns_current_etag(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    e1 = flaky.inner.put_if_match("gc/b", b"v1", None)
    flaky.fail_after("put_if_match")
    e2 = retrying(flaky, sleep).put_if_match("gc/b", b"v2", e1)
    assert flaky.inner.get("gc/b") == b"v2"
    assert e2 == flaky.inner.head("gc/b").e_tag != e1


def test_put_if_match_real_conflict_after_transient_error(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    e1 = flaky.inner.put_if_match("gc/b", b"v1", None)

    class RivalUpdates(FakeSleep):
        def __call__(self, seconds: float) -> None:
            flaky.inner.put("gc/b", b"rival")

    flaky.fail_before("put_if_match")
    with pytest.raises(ConflictError):
        retrying(flaky, RivalUpdates()).put_if_match("gc/b", b"v2", e1)


def test_put_if_match_conflict_without_transient_error_passes_through(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    flaky.inner.put("gc/b", b"v1")
    with pytest.raises(ConflictError):
        retrying(flaky, sleep).put_if_match("gc/b", b"v2", '"stale"')
    assert flaky.calls["put_if_match"] == 1


def test_list_resumes_after_partial_failure_without_duplicates(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    names = [f"p/{i:03d}" for i in range(20)]
    for n in names:
        flaky.inner.put(n, b"")
    flaky.fail_before("list", after_items=7)
    flaky.fail_before("list", after_items=5, skip=1)
    got = [m.path for m in retrying(flaky, sleep).list("p", end_before="p/015")]
    assert got == names[:15]
    assert flaky.calls["list"] == 3


def test_list_gives_up_after_consecutive_failures(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    flaky.inner.put("p/1", b"")
    flaky.fail_before("list", times=None)
    with pytest.raises(UnavailableError):
        list(retrying(flaky, sleep).list("p"))
    assert flaky.calls["list"] == 4


def test_delete_many_and_put_are_retried(flaky: FlakyObjectStore, sleep: FakeSleep) -> None:
    store = retrying(flaky, sleep)
    flaky.fail_after("put")
    store.put("a", b"1")
    flaky.fail_before("delete_many")
    store.delete_many(["a", "b"])
    assert list(flaky.inner.list("")) == []
    with pytest.raises(InvalidArgumentError):
        store.delete_many("a")


def test_constructor_validates_settings(memory_store: ObjectStore) -> None:
    with pytest.raises(InvalidArgumentError):
        RetryingObjectStore(memory_store, max_attempts=0)
    with pytest.raises(InvalidArgumentError):
        RetryingObjectStore(memory_store, base_delay_s=2.0, max_delay_s=1.0)


def test_wrapper_exposes_spec_and_url(memory_store: ObjectStore) -> None:
    wrapped = RetryingObjectStore(FlakyObjectStore(memory_store))
    assert wrapped.spec == memory_store.spec
    assert wrapped.url == memory_store.url


def test_list_validates_the_prefix_at_once(flaky: FlakyObjectStore, sleep: FakeSleep) -> None:
    with pytest.raises(InvalidArgumentError):
        retrying(flaky, sleep).list("a//b")


def test_list_that_fails_before_yielding_is_retried(
    flaky: FlakyObjectStore, sleep: FakeSleep
) -> None:
    flaky.inner.put("p/1", b"")
    flaky.fail_before("list", times=2)
    assert [m.path for m in retrying(flaky, sleep).list("p")] == ["p/1"]
    assert len(sleep.delays) == 2
