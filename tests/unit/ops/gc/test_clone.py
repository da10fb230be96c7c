"""GC of clones and their parents: detach, hostile external paths, soft destroy."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from slatelib.clock import SYSTEM_CLOCK
from slatelib.config import GcSettings, Settings
from slatelib.core.compactions import CompactionStatus
from slatelib.core.manifest import ExternalDb
from slatelib.errors import CorruptObjectError
from slatelib.exit_codes import EXIT_DATA, exit_code_for
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.destroy import destroy
from slatelib.ops.gc import collect_garbage
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash
from tests.unit.gc_support import (
    HOUR,
    DbWriter,
    checkpoint,
    compactions,
    manifest,
    ulid_at,
)
from tests.unit.store_snapshot import snapshot

PARENT, CLONE = "t/db", "t/db-clone"
NO_GRACE = Settings(gc=GcSettings(db_delete_grace=0))


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://gcc{uuid.uuid4().hex[:12]}/")


class Family:
    """A parent with the clone's final checkpoint on manifest 1, and the clone."""

    def __init__(self, store: ObjectStore, *, clone_ssts: tuple[int, ...] = (),
                 ext_path: str = PARENT) -> None:
        self.t0 = t0 = SYSTEM_CLOCK.now_ms()
        self.final = uuid.uuid4()
        self.parent = DbWriter(store, PARENT)
        self.old, self.new = ulid_at(t0 - 3 * HOUR), ulid_at(t0 - HOUR)
        self.parent.sst(self.old)
        self.parent.sst(self.new)
        self.parent.compactions(1, compactions((ulid_at(t0 - 2 * HOUR), CompactionStatus.COMPLETED)))
        self.parent.manifest(1, manifest(l0=[self.old]))
        self.parent.manifest(2, manifest(l0=[self.new], checkpoints=[
            checkpoint(1, cid=self.final)]))
        self.clone = DbWriter(store, CLONE)
        own = ulid_at(t0 - HOUR)
        self.clone.sst(own)
        self.ext = ExternalDb(ext_path, uuid.uuid4(), self.final, clone_ssts)  # type: ignore[arg-type]
        self.clone.manifest(1, manifest(l0=[own, *clone_ssts], external_dbs=[self.ext]))

    @property
    def later_s(self) -> float:
        return (self.t0 + HOUR) / 1000

    def parent_checkpoints(self, store: ObjectStore) -> list[uuid.UUID]:
        return [c.id for c in ManifestStore(store, PARENT).read_latest().value.checkpoints]

    def clone_externals(self, store: ObjectStore) -> list[str]:
        return [e.path for e in ManifestStore(store, CLONE).read_latest().value.external_dbs]


def test_parent_gc_keeps_the_ssts_its_clones_pin(store: ObjectStore) -> None:
    fam = Family(store, clone_ssts=(ulid_at(0),))
    report = collect_garbage(PARENT, store, dry_run=False, now=fam.later_s)
    assert fam.parent.paths.compacted(fam.old) in fam.parent.listing()
    reason = next(d.reason for d in report.decisions if d.path == fam.parent.paths.compacted(fam.old))
    assert reason == (f"kept: referenced by manifest 1 (checkpoint {str(fam.final)[:8]}, "
                      "no expiry) as L0 view")


def test_clone_without_parent_ssts_detaches_parent_first(store: ObjectStore) -> None:
    fam = Family(store)
    dry = collect_garbage(CLONE, store, dry_run=True, now=fam.later_s)
    assert dry.detached == [{"parent": PARENT, "final_checkpoint_id": str(fam.final),
                             "status": "would detach"}]
    assert fam.parent_checkpoints(store) == [fam.final]
    report = collect_garbage(CLONE, store, dry_run=False, now=fam.later_s)
    assert report.detached[0]["status"] == "detached"
    assert fam.parent_checkpoints(store) == [] and fam.clone_externals(store) == []
    collect_garbage(PARENT, store, dry_run=False, now=fam.later_s)
    assert fam.parent.paths.compacted(fam.old) not in fam.parent.listing()


def test_clone_still_using_parent_ssts_stays_attached(store: ObjectStore) -> None:
    fam = Family(store, clone_ssts=(ulid_at(SYSTEM_CLOCK.now_ms() - 3 * HOUR),))
    report = collect_garbage(CLONE, store, dry_run=False, now=fam.later_s)
    assert report.detached == [] and fam.parent_checkpoints(store) == [fam.final]


def test_crash_between_parent_checkpoint_removal_and_clone_update_is_finished_later(
    store: ObjectStore,
) -> None:
    fam = Family(store)
    flaky = FlakyObjectStore(store)
    flaky.crash("put_if_absent", path=f"{CLONE}/manifest/", when="before")
    with pytest.raises(SimulatedCrash):
        collect_garbage(CLONE, flaky, dry_run=False, now=fam.later_s)
    assert fam.parent_checkpoints(store) == [] and fam.clone_externals(store) == [PARENT]
    report = collect_garbage(CLONE, store, dry_run=False, now=fam.later_s)
    assert report.detached == [{"parent": PARENT, "final_checkpoint_id": str(fam.final),
                                "status": "detached", "parent_checkpoint": "already gone"}]
    assert fam.clone_externals(store) == []


def test_detach_from_a_missing_parent_is_reported_and_keeps_the_entry(store: ObjectStore) -> None:
    fam = Family(store, ext_path="t/gone")
    report = collect_garbage(CLONE, store, dry_run=False, now=fam.later_s)
    assert report.error_count == 1 and "detach from 't/gone'" in report.errors[0]
    assert fam.clone_externals(store) == ["t/gone"]


@pytest.mark.parametrize("hostile", ["../db", "s3://other-bucket/db", "t/db-clone",
                                     "t/db-clone/compacted", "t//db", "/t/db", "t/db/"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_hostile_external_paths_refuse_the_run(store: ObjectStore, hostile: str,
                                               dry_run: bool) -> None:
    fam = Family(store, ext_path=hostile)
    before = snapshot(store)
    with pytest.raises(CorruptObjectError) as info:
        collect_garbage(CLONE, store, dry_run=dry_run, now=fam.later_s)
    assert str(info.value).startswith(
        f"database {CLONE!r}, manifest 1: external_dbs[0] path {hostile!r} ")
    assert exit_code_for(info.value) == EXIT_DATA
    assert snapshot(store) == before
    assert fam.parent_checkpoints(store) == [fam.final]


def test_hostile_paths_in_a_pinned_manifest_refuse_before_expired_checkpoints_go(
    store: ObjectStore,
) -> None:
    # Removing expired checkpoints is GC's first write: the live set it leaves (here the
    # manifest a live checkpoint pins) is checked before it.
    fam = Family(store, ext_path="../db")
    good = ManifestStore(store, CLONE).read_latest().value
    fam.clone.manifest(2, replace(good, external_dbs=(replace(fam.ext, path=PARENT),),
                                  checkpoints=(checkpoint(1), checkpoint(2, expire_s=1))))
    before = snapshot(store)
    with pytest.raises(CorruptObjectError, match=r"^database 't/db-clone', manifest 1: "
                       r"external_dbs\[0\] path '\.\./db' has a '\.\.' segment"):
        collect_garbage(CLONE, store, dry_run=False, now=fam.later_s)
    assert snapshot(store) == before


def test_a_soft_destroyed_clone_with_a_hostile_path_is_not_deleted(store: ObjectStore) -> None:
    fam = Family(store)
    destroy(CLONE, store, soft=True, clock=FakeClock(fam.t0 - HOUR))
    ms = ManifestStore(store, CLONE)
    latest = ms.read_latest()
    ms.write(latest.id + 1, replace(latest.value, external_dbs=(replace(fam.ext, path="/t/db"),)))
    before = snapshot(store)
    with pytest.raises(CorruptObjectError, match="is absolute"):
        collect_garbage(CLONE, store, dry_run=False, now=fam.later_s, settings=NO_GRACE)
    assert snapshot(store) == before and fam.parent_checkpoints(store) == [fam.final]


# ------------------------------------------------------------------------ soft destroy
def soft_destroyed_clone(store: ObjectStore) -> tuple[Family, set[str]]:
    fam = Family(store)
    fam.clone.wal(1)
    fam.clone.compactions(1, compactions())
    store.put(f"{CLONE}/compacted/leftover.tmp", b"x")
    kept = {f"{CLONE}/nested/manifest/00000000000000000001.manifest", f"{CLONE}/README"}
    for path in kept:
        store.put(path, b"x")
    destroy(CLONE, store, soft=True, clock=FakeClock(fam.t0 - HOUR))
    return fam, kept


def test_soft_destroyed_clone_is_deleted_manifest_last_and_releases_its_parent(
    store: ObjectStore,
) -> None:
    fam, kept = soft_destroyed_clone(store)
    dry = collect_garbage(CLONE, store, dry_run=True, now=fam.later_s, settings=NO_GRACE)
    assert fam.parent_checkpoints(store) == [fam.final]
    assert dry.destroy is not None and dry.destroy["parents"][0]["status"] == "would release"
    planned = {d.path for d in dry.decisions if d.deletes}
    assert planned == fam.clone.listing() - kept
    report = collect_garbage(CLONE, store, dry_run=False, now=fam.later_s, settings=NO_GRACE)
    assert report.destroy is not None and report.destroy["completed"] is True
    assert report.destroy["parents"][0]["status"] == "released"
    assert fam.clone.listing() == kept
    assert fam.parent_checkpoints(store) == []


def test_interrupted_destroy_keeps_the_manifest_and_resumes(store: ObjectStore) -> None:
    fam, kept = soft_destroyed_clone(store)
    flaky = FlakyObjectStore(store)
    flaky.fail_before("delete_many", path="/compacted/", times=None)
    report = collect_garbage(CLONE, flaky, dry_run=False, now=fam.later_s, settings=NO_GRACE)
    assert report.destroy is not None and report.destroy["completed"] is False
    assert ManifestStore(store, CLONE).try_read_latest() is not None
    report = collect_garbage(CLONE, store, dry_run=False, now=fam.later_s, settings=NO_GRACE)
    assert report.destroy is not None and report.destroy["completed"] is True
    assert fam.clone.listing() == kept


def test_destroy_waits_for_grace_and_live_checkpoints(store: ObjectStore) -> None:
    fam, _ = soft_destroyed_clone(store)
    report = collect_garbage(CLONE, store, dry_run=False, now=fam.later_s)
    assert report.destroy is not None and report.destroy["state"] == "pending"
    assert ManifestStore(store, CLONE).try_read_latest() is not None
