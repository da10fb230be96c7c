""":class:`slatelib.db_manifest.DbManifest`: the one handle that changes a database's
manifest; checkpoints are created, refreshed and deleted there only."""

from __future__ import annotations

import uuid

import pytest

from slatelib.core.manifest import Manifest
from slatelib.db_manifest import DbManifest
from slatelib.errors import InvalidDbStateError
from slatelib.objstore import ObjectStore, RetryingObjectStore, open_raw_store
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore

ROOT = "db"


@pytest.fixture
def store() -> ObjectStore:
    s = open_raw_store(f"memory://{uuid.uuid4().hex}/")
    from dataclasses import replace
    ManifestStore(s, ROOT).write(1, replace(Manifest.initial(), initialized=True))
    return s


def test_the_handle_reads_as_the_manifest_store(store: ObjectStore) -> None:
    db = DbManifest(store, ROOT)
    assert isinstance(db, ManifestStore)
    assert db.read_latest() == ManifestStore(store, ROOT).read_latest()


def test_create_refresh_delete(store: ObjectStore) -> None:
    clock = FakeClock()
    db = DbManifest(store, ROOT)
    cp, stored = db.create_checkpoint(clock=clock, lifetime_s=60, name="n")
    assert stored.id == 2 and cp.manifest_id == 2 and cp.name == "n"
    clock.advance(10)
    again = db.refresh_checkpoint(cp.id, lifetime_s=120, clock=clock)
    assert again.expire_time_s is not None and cp.expire_time_s is not None
    assert again.expire_time_s > cp.expire_time_s
    assert db.delete_checkpoint(cp.id, clock=clock) is True
    assert db.delete_checkpoint(cp.id, clock=clock) is False  # idempotent
    assert db.read_latest().value.checkpoints == ()


def test_a_lost_create_response_adds_the_checkpoint_once(store: ObjectStore) -> None:
    flaky = FlakyObjectStore(store, sleep=lambda s: None)
    db = DbManifest(RetryingObjectStore(flaky, sleep=lambda s: None,
                                        resolve_by_content=False), ROOT)
    flaky.fail_after("put_if_absent", "manifest/00000000000000000002")
    cp, stored = db.create_checkpoint(clock=FakeClock(), lifetime_s=60)
    assert stored.id == 2 and db.list_ids() == [1, 2]
    assert [c.id for c in stored.value.checkpoints] == [cp.id]


def test_renew_refreshes_an_existing_checkpoint(store: ObjectStore) -> None:
    clock = FakeClock()
    db = DbManifest(store, ROOT)
    cid = uuid.uuid4()
    first, _ = db.create_checkpoint(clock=clock, lifetime_s=60, checkpoint_id=cid)
    clock.advance(30)
    kept, _ = db.create_checkpoint(clock=clock, lifetime_s=60, checkpoint_id=cid)
    assert kept == first  # there already: kept as it is
    renewed, _ = db.create_checkpoint(clock=clock, lifetime_s=60, checkpoint_id=cid,
                                      renew=True)
    assert renewed.expire_time_s is not None and first.expire_time_s is not None
    assert renewed.expire_time_s > first.expire_time_s


def test_the_check_runs_on_the_version_changed(store: ObjectStore) -> None:
    def refuse(m: Manifest) -> None:
        raise InvalidDbStateError("no")

    with pytest.raises(InvalidDbStateError):
        DbManifest(store, ROOT).create_checkpoint(clock=FakeClock(), check=refuse)
    assert ManifestStore(store, ROOT).list_ids() == [1]


def test_public_deletes_go_through_the_one_home(store: ObjectStore,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.ops.checkpoint import delete_checkpoint
    from slatelib.ops.gc.clone import release_checkpoint

    seen: list[uuid.UUID] = []
    real = DbManifest.delete_checkpoint

    def spy(self: DbManifest, checkpoint_id: uuid.UUID, **kw: object) -> bool:
        seen.append(checkpoint_id)
        return real(self, checkpoint_id, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(DbManifest, "delete_checkpoint", spy)
    a, b = uuid.uuid4(), uuid.uuid4()
    assert delete_checkpoint(ROOT, store, a) is False
    assert release_checkpoint(store, ROOT, b, FakeClock()) is False
    assert seen == [a, b]
