"""Manifest store and CAS loop: create-if-absent versions, GC boundaries, fencing, lost
responses, and no fallback to an older manifest."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slatelib.core.invariants import check_writer_epoch
from slatelib.core.manifest import Manifest
from slatelib.errors import (
    CommitStateUnknownError,
    ConflictError,
    CorruptObjectError,
    FencedError,
    ManifestMissingError,
)
from slatelib.format.manifest_codec import encode_manifest
from slatelib.objstore import ObjectStore, RetryingObjectStore, open_raw_store
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore
from slatelib.txn import update_versioned


@pytest.fixture
def store() -> ObjectStore:
    import uuid

    return open_raw_store(f"memory://{uuid.uuid4().hex}/")


def test_write_next_raises_conflict_when_version_exists(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    ms.write(1, Manifest.initial())
    with pytest.raises(ConflictError):
        ms.write(1, replace(Manifest.initial(), writer_epoch=5))
    assert ms.read_latest().value.writer_epoch == 0


def test_latest_ignores_versions_at_or_below_the_gc_boundary(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    for i in range(1, 4):
        ms.write(i, replace(Manifest.initial(), writer_epoch=i))
    store.put("db/gc/manifest.boundary", b"2")
    # a stalled writer resurrects id 2 after GC deleted it: ignored, and its write is void
    store.delete("db/manifest/00000000000000000002.manifest")
    with pytest.raises(ConflictError, match="boundary"):
        ms.write(2, replace(Manifest.initial(), writer_epoch=99))
    assert ms.read_latest().id == 3


def test_only_versions_below_boundary_is_an_error_not_an_old_manifest(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    ms.write(1, Manifest.initial())
    store.put("db/gc/manifest.boundary", b"5")
    with pytest.raises(ManifestMissingError):
        ms.read_latest()


def test_truncated_latest_manifest_is_typed_and_never_falls_back(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    ms.write(1, Manifest.initial())
    data = encode_manifest(replace(Manifest.initial(), writer_epoch=7))
    store.put("db/manifest/00000000000000000002.manifest", data[: len(data) // 2])
    with pytest.raises(CorruptObjectError, match="00000000000000000002.manifest"):
        ms.read_latest()


def test_update_retries_conflicts_and_keeps_the_other_writers_change(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    ms.write(1, Manifest.initial())
    other = ManifestStore(store, "db")
    calls = []

    def mutate(cur):  # type: ignore[no-untyped-def]
        calls.append(cur.id)
        if len(calls) == 1:  # a competing writer lands first
            other.write(cur.id + 1, replace(cur.value, compactor_epoch=9))
        return replace(cur.value, last_l0_seq=cur.value.last_l0_seq + 1)

    out = update_versioned(ms, mutate, clock=FakeClock())
    assert calls == [1, 2]
    assert out.id == 3 and out.value.compactor_epoch == 9 and out.value.last_l0_seq == 1


def test_fenced_error_is_never_retried(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    ms.write(1, replace(Manifest.initial(), writer_epoch=3))
    calls = 0

    def mutate(cur):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        check_writer_epoch(cur.value, 2)
        return cur.value

    with pytest.raises(FencedError):
        update_versioned(ms, mutate, clock=FakeClock())
    assert calls == 1


def test_lost_response_is_resolved_by_rereading(store: ObjectStore) -> None:
    flaky = FlakyObjectStore(store, sleep=lambda s: None)
    retrying = RetryingObjectStore(flaky, sleep=lambda s: None, resolve_by_content=False)
    ms = ManifestStore(retrying, "db")
    ms.write(1, Manifest.initial())
    flaky.fail_after("put_if_absent", "manifest/00000000000000000002")
    seen: list[int] = []

    def mutate(cur):  # type: ignore[no-untyped-def]
        seen.append(cur.id)
        if cur.value.last_l0_seq >= 1:  # idempotent: our change already landed
            return None
        return replace(cur.value, last_l0_seq=1)

    out = update_versioned(ms, mutate, clock=FakeClock())
    assert seen == [1, 2]
    assert out.id == 2 and out.value.last_l0_seq == 1
    assert ManifestStore(store, "db").list_ids() == [1, 2]


def test_unknown_outcome_surfaces_from_the_store(store: ObjectStore) -> None:
    flaky = FlakyObjectStore(store, sleep=lambda s: None)
    retrying = RetryingObjectStore(flaky, sleep=lambda s: None, resolve_by_content=False)
    flaky.fail_after("put_if_absent", "x/obj")
    with pytest.raises(CommitStateUnknownError):
        retrying.put_if_absent("x/obj", b"1")


def test_a_lost_response_on_the_last_attempt_is_resolved_by_rereading(store: ObjectStore) -> None:
    flaky = FlakyObjectStore(store, sleep=lambda s: None)
    retrying = RetryingObjectStore(flaky, sleep=lambda s: None, resolve_by_content=False)
    ms = ManifestStore(retrying, "db")
    ms.write(1, Manifest.initial())
    flaky.fail_after("put_if_absent", "manifest/00000000000000000002")

    def mutate(cur):  # type: ignore[no-untyped-def]
        if cur.value.last_l0_seq >= 1:  # idempotent: our change already landed
            return None
        return replace(cur.value, last_l0_seq=1)

    out = update_versioned(ms, mutate, clock=FakeClock(), max_attempts=1)
    assert out.id == 2 and out.value.last_l0_seq == 1


def test_a_lost_response_on_the_last_attempt_that_did_not_land_stays_unknown(
    store: ObjectStore,
) -> None:
    flaky = FlakyObjectStore(store, sleep=lambda s: None)
    retrying = RetryingObjectStore(flaky, sleep=lambda s: None, resolve_by_content=False)
    ms = ManifestStore(retrying, "db")
    ms.write(1, Manifest.initial())
    flaky.fail_before("put_if_absent", "manifest/", times=None,
                      error=lambda: CommitStateUnknownError("lost"))

    with pytest.raises(CommitStateUnknownError):
        update_versioned(ms, lambda cur: replace(cur.value, last_l0_seq=1), clock=FakeClock(),
                         max_attempts=2)


def test_latest_from_a_known_version_lists_from_it_and_skips_the_get_when_unchanged(
        store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    for i in range(1, 6):
        ms.write(i, replace(Manifest.initial(), writer_epoch=i))
    known = ms.read_latest()
    counted = FlakyObjectStore(store)
    polled = ManifestStore(counted, "db")
    assert polled.try_read_latest(known) is known
    assert counted.calls["get"] == 0 and counted.calls["list"] == 1
    ms.write(6, replace(Manifest.initial(), writer_epoch=6))
    newer = polled.try_read_latest(known)
    assert newer is not None and (newer.id, newer.value.writer_epoch) == (6, 6)


def test_latest_from_a_known_version_respects_the_gc_boundary(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    for i in range(1, 4):
        ms.write(i, replace(Manifest.initial(), writer_epoch=i))
    known = ms.read(2)
    store.put("db/gc/manifest.boundary", b"2")
    got = ms.try_read_latest(known)
    assert got is not None and got.id == 3


def test_latest_from_a_vanished_known_version_lists_everything_again(store: ObjectStore) -> None:
    ms = ManifestStore(store, "db")
    for i in range(1, 4):
        ms.write(i, replace(Manifest.initial(), writer_epoch=i))
    known = ms.read_latest()
    for i in range(1, 4):  # destroyed, then created again with lower ids
        store.delete(ms.path(i))
    ms.write(1, replace(Manifest.initial(), writer_epoch=42))
    got = ms.try_read_latest(known)
    assert got is not None and (got.id, got.value.writer_epoch) == (1, 42)
