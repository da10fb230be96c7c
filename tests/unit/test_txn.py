""":func:`slatelib.txn.transact`: fence, deadline and "did it land" around the CAS loop,
and the successor rule asked of the store (no ``isinstance`` in the loop)."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from slatelib.core.invariants import check_writer_epoch
from slatelib.core.manifest import Manifest
from slatelib.errors import ConflictError, FencedError, InternalError
from slatelib.objstore import ObjectStore, RetryingObjectStore, open_raw_store
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sequenced import Versioned
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore
from slatelib.txn import Deadline, UpdateTimeoutError, transact, update_versioned


@pytest.fixture
def store() -> ObjectStore:
    return open_raw_store(f"memory://{uuid.uuid4().hex}/")


def seq(n: int):  # type: ignore[no-untyped-def]
    def step(cur: Versioned[Manifest]) -> Manifest | None:
        return replace(cur.value, last_l0_seq=n)
    return step


def landed_at(n: int):  # type: ignore[no-untyped-def]
    return lambda m: m.last_l0_seq >= n


def test_a_lost_response_is_recognised_by_landed_even_past_the_deadline(
        store: ObjectStore) -> None:
    flaky = FlakyObjectStore(store, sleep=lambda s: None)
    retrying = RetryingObjectStore(flaky, sleep=lambda s: None, resolve_by_content=False)
    ms = ManifestStore(retrying, "db")
    ms.write(1, Manifest.initial())
    flaky.fail_after("put_if_absent", "manifest/00000000000000000002")
    clock = FakeClock()
    deadline = Deadline.starting_now(clock, 0.0, "test")  # passed by the first backoff
    steps: list[int] = []

    def step(cur: Versioned[Manifest]) -> Manifest | None:
        steps.append(cur.id)
        return replace(cur.value, last_l0_seq=1)

    out = transact(ms, step, clock=clock, landed=landed_at(1), deadline=deadline)
    assert clock.monotonic_s() > 0.0  # the retry came after the deadline
    assert steps == [1] and out.id == 2  # the re-read found it landed: no second write
    assert ManifestStore(store, "db").list_ids() == [1, 2]


def test_past_the_deadline_writing_again_is_refused(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    ms.write(1, Manifest.initial())
    clock = FakeClock()
    deadline = Deadline(clock, 1.0, "late write", clock.monotonic_s() - 2.0)
    with pytest.raises(UpdateTimeoutError, match="late write"):
        transact(ms, seq(1), clock=clock, landed=landed_at(1), deadline=deadline)
    assert ms.list_ids() == [1]


def test_the_fence_stops_before_the_step(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    ms.write(1, replace(Manifest.initial(), writer_epoch=2))
    called: list[int] = []

    def step(cur: Versioned[Manifest]) -> Manifest | None:
        called.append(cur.id)
        return cur.value

    with pytest.raises(FencedError):
        transact(ms, step, clock=FakeClock(), fence=lambda m: check_writer_epoch(m, 1))
    assert called == []


def test_a_result_without_the_change_is_not_taken_as_landed(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    ms.write(1, Manifest.initial())
    with pytest.raises(ConflictError, match="did not land"):
        transact(ms, lambda cur: None, clock=FakeClock(), landed=landed_at(5), what="x")


def test_the_successor_rule_is_the_stores(store: ObjectStore) -> None:
    """The loop asks the store for its rule: a manifest store refuses a version that
    breaks an invariant (an epoch going back), nothing is written."""
    ms = ManifestStore(store, "db")
    ms.write(1, replace(Manifest.initial(), writer_epoch=3))
    with pytest.raises(InternalError):
        update_versioned(ms, lambda cur: replace(cur.value, writer_epoch=1), clock=FakeClock())
    assert ms.list_ids() == [1]
