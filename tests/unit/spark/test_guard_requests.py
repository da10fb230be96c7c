"""Each guarded Spark task adds only its own store requests to the job's accumulator, also
when a reused Python worker ran other tasks before (docs/request-accounting.md)."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from slatelib.errors import ObjectMissingError
from slatelib.objstore import open_raw_store, reset_memory_stores
from slatelib.objstore.accounting import RequestCounts
from slatelib.spark import guard


class Accumulator:
    """What a Spark accumulator of int dicts does on the driver: sums every task's add."""

    def __init__(self) -> None:
        self.value: dict[str, int] = {}
        self.adds = 0

    def add(self, value: dict[str, int]) -> None:
        self.adds += 1
        guard.Counts().addInPlace(self.value, value)


def task(items: Iterator[str]) -> Iterator[int]:
    """A partition's work: reads each named object of the memory store ``acct``."""
    store = open_raw_store("memory://acct/")
    for path in items:
        yield len(store.get(path))


def test_each_task_adds_its_own_requests_however_many_ran_before_in_the_worker() -> None:
    reset_memory_stores()
    store = open_raw_store("memory://acct/")
    for name in ("a", "b", "c"):
        store.put(name, name.encode() * 10)
    acc = Accumulator()
    payload = pickle.dumps(task)
    # the same process (a reused worker) runs three tasks, with unrelated requests between
    for items in (["a"], ["b", "c"], []):
        store.get("a")  # not a guarded task's: never added
        fn = guard.GuardedIterator(guard.build(), payload, None, acc)
        assert list(fn(iter(items))) == [10] * len(items)
    assert acc.adds == 3
    assert RequestCounts.from_flat(acc.value) == RequestCounts(get=3, bytes_read=30)


def test_a_task_that_fails_part_way_still_adds_what_it_sent() -> None:
    reset_memory_stores()
    open_raw_store("memory://acct/").put("a", b"x")
    acc = Accumulator()
    fn: Any = guard.GuardedIterator(guard.build(), pickle.dumps(task), None, acc)
    out = fn(iter(["a", "missing"]))
    assert next(out) == 1
    with pytest.raises(ObjectMissingError):
        next(out)
    assert RequestCounts.from_flat(acc.value) == RequestCounts(get=2, bytes_read=1)
