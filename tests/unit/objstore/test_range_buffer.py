"""``read_range_buffer``: a ranged get without the copy into ``bytes`` (what a compaction
task's block checks read), equal to ``get_range`` and never bypassing a wrapper's reads."""

from __future__ import annotations

import random

import pytest

from slatelib.errors import ObjectMissingError, UnavailableError
from slatelib.objstore import ForwardingStore, ObjectStore, RetryingObjectStore, open_store
from slatelib.objstore.forwarding import read_range_buffer
from slatelib.testing.faulty import FlakyObjectStore


@pytest.fixture
def store() -> ObjectStore:
    s = open_store(f"memory://range-buffer-{random.random()}/")
    s.put("a/obj", bytes(range(256)) * 40)
    return s


def test_equals_get_range_without_a_copy(store: ObjectStore) -> None:
    data = bytes(range(256)) * 40
    for start, end in [(0, 1), (0, len(data)), (100, 4000), (len(data) - 5, len(data)),
                       (len(data) - 5, len(data) + 50), (7, 7)]:
        got = read_range_buffer(store, "a/obj", start, end)
        assert bytes(got) == store.get_range("a/obj", start, end) == data[start:end]
    view = read_range_buffer(store, "a/obj", 10, 2000)
    assert isinstance(view, memoryview) and view.readonly  # the fetched buffer, in place


def test_missing_object_raises(store: ObjectStore) -> None:
    with pytest.raises(ObjectMissingError):
        read_range_buffer(store, "a/none", 0, 10)


class _Shifted(ForwardingStore):
    """A wrapper whose reads differ from its inner store's (as a routing wrapper may)."""

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self.inner.get_range(path, start + 1, end + 1)


def test_a_wrapper_with_its_own_reads_is_not_bypassed(store: ObjectStore) -> None:
    wrapped = RetryingObjectStore(_Shifted(store), max_attempts=2, sleep=lambda s: None)
    assert bytes(read_range_buffer(wrapped, "a/obj", 0, 10)) == store.get_range("a/obj", 1, 11)


def test_retried_like_get_range(store: ObjectStore) -> None:
    flaky = FlakyObjectStore(store)
    flaky.fail_before("get_range", times=2)
    retrying = RetryingObjectStore(flaky, max_attempts=4, sleep=lambda s: None,
                                   rng=random.Random(1))
    assert bytes(read_range_buffer(retrying, "a/obj", 0, 300)) == store.get_range("a/obj", 0, 300)
    assert flaky.calls["get_range"] == 3


def test_gives_up_like_get_range(store: ObjectStore) -> None:
    flaky = FlakyObjectStore(store)
    flaky.fail_before("get_range", times=None)
    retrying = RetryingObjectStore(flaky, max_attempts=2, sleep=lambda s: None)
    with pytest.raises(UnavailableError):
        read_range_buffer(retrying, "a/obj", 0, 300)
