"""Checkpoints (design doc 'checkpoints and clones'): create from the manifest or a source, refresh,
delete, list."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from slatelib import (
    Db,
    create_checkpoint,
    delete_checkpoint,
    destroy,
    list_checkpoints,
    refresh_checkpoint,
)
from slatelib.core.manifest import Manifest
from slatelib.errors import InvalidArgumentError, InvalidDbStateError, ManifestMissingError
from slatelib.objstore import ObjectStore, RetryingObjectStore, open_raw_store
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore
from tests.unit.writer.support import memory_store, writer_settings

PATH = "db"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_750_000_000_000)


@pytest.fixture
def store(clock: FakeClock) -> ObjectStore:
    s = memory_store()
    Db.open(PATH, s, writer_settings(), clock=clock).close()
    return s


def now_s(clock: FakeClock) -> int:
    return clock.now_ms() // 1000


def test_a_checkpoint_of_the_manifest_pins_the_version_that_first_contains_it(
    store: ObjectStore, clock: FakeClock
) -> None:
    latest = ManifestStore(store, PATH).read_latest().id
    cp = create_checkpoint(PATH, store, lifetime="7days 30min 10s", name="nightly", clock=clock)
    assert cp.manifest_id == latest + 1 == ManifestStore(store, PATH).read_latest().id
    assert cp.expire_time_s == now_s(clock) + 7 * 86400 + 1810
    assert cp.create_time_s == now_s(clock) and cp.name == "nightly" and cp.writer_epoch is None


def test_a_checkpoint_from_a_source_copies_its_manifest_id(store: ObjectStore, clock: FakeClock) -> None:
    src = create_checkpoint(PATH, store, clock=clock)
    create_checkpoint(PATH, store, clock=clock)  # moves the latest manifest on
    cp = create_checkpoint(PATH, store, source=str(src.id), lifetime=30, clock=clock)
    assert cp.manifest_id == src.manifest_id and cp.id != src.id
    assert src.expire_time_s is None and cp.expire_time_s == now_s(clock) + 30


def test_checkpoint_errors_named_by_the_design_doc(store: ObjectStore, clock: FakeClock) -> None:
    with pytest.raises(InvalidDbStateError, match="not found"):
        create_checkpoint(PATH, store, source=uuid.uuid4(), clock=clock)
    short = create_checkpoint(PATH, store, lifetime="1s", clock=clock)
    clock.advance(2)
    with pytest.raises(InvalidDbStateError, match="expired"):
        create_checkpoint(PATH, store, source=short.id, clock=clock)
    with pytest.raises(ManifestMissingError):
        create_checkpoint("nope", store, clock=clock)
    with pytest.raises(InvalidArgumentError, match="parsecs"):
        create_checkpoint(PATH, store, lifetime="3 parsecs", clock=clock)
    with pytest.raises(InvalidArgumentError, match="UUID"):
        create_checkpoint(PATH, store, source="not-a-uuid", clock=clock)


@pytest.mark.parametrize("lifetime", ["inf", "infinity", "nan", "1e400"])
def test_lifetimes_that_are_not_finite_are_refused(store: ObjectStore, clock: FakeClock, lifetime: str) -> None:
    with pytest.raises(InvalidArgumentError, match="lifetime"):
        create_checkpoint(PATH, store, lifetime=lifetime, clock=clock)


def test_the_writer_checkpoint_name_is_reserved(store: ObjectStore, clock: FakeClock) -> None:
    """A checkpoint named like the writer's would be dropped by the next writer and would
    not stop a hard destroy."""
    with pytest.raises(InvalidArgumentError, match="slatelib-writer"):
        create_checkpoint(PATH, store, name="slatelib-writer", clock=clock)
    assert list_checkpoints(PATH, store, name="slatelib-writer") == []


def test_uninitialized_and_destroyed_databases_refuse_checkpoints(store: ObjectStore, clock: FakeClock) -> None:
    ms = ManifestStore(store, "clone")
    ms.write(1, replace(Manifest(), initialized=False))
    with pytest.raises(InvalidDbStateError, match="not initialized"):
        create_checkpoint("clone", store, clock=clock)
    src = create_checkpoint(PATH, store, clock=clock)
    destroy(PATH, store, clock=clock)
    for source in (None, src.id):
        with pytest.raises(InvalidDbStateError, match="destroyed"):
            create_checkpoint(PATH, store, source=source, clock=clock)


def test_refresh_sets_a_new_expiry_or_none(store: ObjectStore, clock: FakeClock) -> None:
    cp = create_checkpoint(PATH, store, lifetime=10, clock=clock)
    clock.advance(100)
    assert refresh_checkpoint(PATH, store, cp.id, lifetime="1h", clock=clock).expire_time_s == \
        now_s(clock) + 3600
    assert refresh_checkpoint(PATH, store, str(cp.id), clock=clock).expire_time_s is None
    with pytest.raises(InvalidDbStateError, match="not found"):
        refresh_checkpoint(PATH, store, uuid.uuid4(), clock=clock)


def test_delete_reports_whether_the_checkpoint_existed(store: ObjectStore, clock: FakeClock) -> None:
    cp = create_checkpoint(PATH, store, clock=clock)
    ids = ManifestStore(store, PATH).list_ids()
    assert delete_checkpoint(PATH, store, cp.id, clock=clock) is True
    assert delete_checkpoint(PATH, store, cp.id, clock=clock) is False
    assert ManifestStore(store, PATH).list_ids() == [*ids, ids[-1] + 1]
    assert list_checkpoints(PATH, store) == []


def test_list_filters_by_exact_name_and_empty_name_means_unnamed(store: ObjectStore, clock: FakeClock) -> None:
    a = create_checkpoint(PATH, store, name="a", clock=clock)
    b = create_checkpoint(PATH, store, name="b", clock=clock)
    a2 = create_checkpoint(PATH, store, name="a", clock=clock)
    anon = create_checkpoint(PATH, store, clock=clock)
    assert [c.id for c in list_checkpoints(PATH, store, name="a")] == [a.id, a2.id]
    assert [c.id for c in list_checkpoints(PATH, store, name="")] == [anon.id]
    assert [c.id for c in list_checkpoints(PATH, store)] == [a.id, b.id, a2.id, anon.id]


def test_a_lost_response_does_not_create_the_checkpoint_twice(clock: FakeClock) -> None:
    raw = open_raw_store(f"memory://{uuid.uuid4().hex}/")
    Db.open(PATH, raw, writer_settings(), clock=clock).close()
    flaky = FlakyObjectStore(raw)
    flaky.fail_after("put_if_absent", path="/manifest/")
    store = RetryingObjectStore(flaky, sleep=clock.sleep, resolve_by_content=False)
    cp = create_checkpoint(PATH, store, clock=clock)
    assert [c.id for c in list_checkpoints(PATH, raw)] == [cp.id]
