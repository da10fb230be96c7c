"""The safety scenarios of GC: in-flight objects, races, stale listings, clock skew."""

from __future__ import annotations

import uuid

import pytest

from slatelib.clock import SYSTEM_CLOCK
from slatelib.config import GcSettings, Settings
from slatelib.core.checkpoints import refresh_checkpoint
from slatelib.core.compactions import CompactionStatus
from slatelib.core.gc_rules import GcDecision
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.gc import collect_garbage
from slatelib.store.manifest_store import ManifestStore
from tests.unit.gc_support import (
    HOUR,
    MIN,
    DbWriter,
    HookedStore,
    checkpoint,
    compactions,
    manifest,
    ulid_at,
)

ROOT = "t/db"


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://gcs{uuid.uuid4().hex[:12]}/")


def paths_of(store: ObjectStore) -> set[str]:
    return {m.path for m in store.list(ROOT)}


def test_unpublished_l0_and_running_compaction_outputs_survive(store: ObjectStore) -> None:
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, ROOT)
    published = ulid_at(t0 - 3 * HOUR)
    garbage = ulid_at(t0 - 4 * HOUR)
    running = ulid_at(t0 - 2 * HOUR)
    output = ulid_at(t0 - 2 * HOUR + MIN)        # written by the running compaction
    unpublished = ulid_at(t0 - 3 * HOUR + MIN)   # uploaded by the writer, not in a manifest
    for sid in (published, garbage, output, unpublished):
        w.sst(sid)
    w.compactions(1, compactions((running, CompactionStatus.RUNNING)))
    w.manifests_upto(2, manifest(l0=[published]))
    report = collect_garbage(ROOT, store, dry_run=False, now=(t0 + 5 * HOUR) / 1000)
    left = paths_of(store)
    assert w.paths.compacted(garbage) not in left
    assert {w.paths.compacted(output), w.paths.compacted(unpublished)} <= left
    reasons = {d.path: d.reason for d in report.decisions}
    assert "a compaction may still publish it" in reasons[w.paths.compacted(output)]
    assert "uploaded but not yet published" in reasons[w.paths.compacted(unpublished)]


def test_checkpoint_refresh_racing_the_expiry_removal_wins(store: ObjectStore) -> None:
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, ROOT)
    l0 = ulid_at(t0 - HOUR)
    w.sst(l0)
    for wid in range(1, 9):
        w.wal(wid)
    cp = checkpoint(2, expire_s=t0 // 1000 - 60, name="reader")
    w.manifest(1, manifest())
    w.manifest(2, manifest(replay_after=2, last_seen=5))
    w.manifest(3, manifest(l0=[l0], replay_after=7, last_seen=8, checkpoints=[cp]))
    ms = ManifestStore(store, ROOT)
    hooked = HookedStore(store)

    def refresh(path: str) -> None:
        # The reader refreshes its checkpoint between GC's read and GC's CAS write.
        cur = ms.read_latest()
        ms.write(cur.id + 1, refresh_checkpoint(cur.value, cp.id, now_s=t0 / 1000, lifetime_s=3600))

    hooked.before_put_if_absent = refresh
    report = collect_garbage(ROOT, hooked, dry_run=False, now=(t0 + 10 * MIN) / 1000)
    assert report.expired_checkpoints == []
    latest = ms.read_latest()
    assert latest.id == 4 and [c.id for c in latest.value.checkpoints] == [cp.id]
    left = paths_of(store)
    assert {w.paths.manifest(2)} | {w.paths.wal(i) for i in (3, 4, 5)} <= left
    assert w.paths.manifest(1) not in left and w.paths.wal(2) not in left


def test_stale_manifest_listing_is_probed_past(store: ObjectStore) -> None:
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, ROOT)
    old_l0, newer = ulid_at(t0 - 5 * HOUR), ulid_at(t0 - 4 * HOUR)
    w.sst(old_l0)
    w.sst(newer)
    w.compactions(1, compactions((ulid_at(t0 - 3 * HOUR), CompactionStatus.COMPLETED)))
    w.manifests_upto(3, manifest(l0=[old_l0]))
    stale = list(store.list(f"{ROOT}/manifest"))
    # Written after the listing was taken: manifest 4 references `newer`, whose ULID is
    # below every cutoff; judged by manifest 3 alone it would be garbage.
    w.manifest(4, manifest(l0=[old_l0], runs={0: [newer]}, last_compacted=ulid_at(t0 - 2 * HOUR)))
    hooked = HookedStore(store)
    hooked.listing = lambda prefix: stale if prefix == f"{ROOT}/manifest" else None
    report = collect_garbage(ROOT, hooked, dry_run=False, now=(t0 + HOUR) / 1000)
    assert report.latest_manifest_id == 4
    assert w.paths.compacted(newer) in paths_of(store)
    reason = next(d.reason for d in report.decisions if d.path == w.paths.compacted(newer))
    assert reason == "kept: referenced by manifest 4 (latest) as sorted run 0"


def test_candidates_are_rechecked_against_a_fresh_manifest_before_deleting(store: ObjectStore) -> None:
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, ROOT)
    l0, revived, garbage = ulid_at(t0 - HOUR), ulid_at(t0 - 3 * HOUR), ulid_at(t0 - 3 * HOUR)
    for sid in (l0, revived, garbage):
        w.sst(sid)
    w.compactions(1, compactions((ulid_at(t0 - 2 * HOUR), CompactionStatus.COMPLETED)))
    w.manifests_upto(2, manifest(l0=[l0]))
    planned: list[GcDecision] = []

    def writer_commits(d: GcDecision) -> None:
        # Between planning and deleting, a writer commits a manifest that references an
        # SST the plan wants to delete (the listing GC planned from is now stale).
        if not planned:
            w.manifest(3, manifest(l0=[l0], runs={0: [revived]}))
        planned.append(d)

    report = collect_garbage(ROOT, store, dry_run=False, now=(t0 + HOUR) / 1000,
                             on_decision=writer_commits)
    assert any(d.path == w.paths.compacted(revived) and d.deletes for d in planned)
    left = paths_of(store)
    assert w.paths.compacted(revived) in left and w.paths.compacted(garbage) not in left
    assert report.kinds["compacted"].kept_on_recheck == 1
    assert report.kinds["compacted"].deleted == 1


def test_clock_skew_between_writer_and_gc(store: ObjectStore) -> None:
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, ROOT)
    l0 = ulid_at(t0 - 10 * MIN)                  # the writer's clock is right
    w.sst(l0)
    w.compactions(1, compactions((ulid_at(t0 - 10 * MIN), CompactionStatus.RUNNING)))
    w.manifests_upto(2, manifest(l0=[l0]))
    within = ulid_at(t0 - 2 * MIN)               # a worker 2 min behind (< min_age)
    beyond = ulid_at(t0 - 70 * MIN)              # a worker 70 min behind (> min_age)
    ahead = ulid_at(t0 + 30 * MIN)               # a worker 30 min ahead
    for sid in (within, beyond, ahead):
        w.sst(sid)                               # all uploaded just now
    now = (t0 + MIN) / 1000
    report = collect_garbage(ROOT, store, dry_run=False, now=now)
    reasons = {d.path: d.reason for d in report.decisions}
    assert {w.paths.compacted(s) for s in (within, beyond, ahead)} <= paths_of(store)
    assert "within min_age 5m" in reasons[w.paths.compacted(within)]
    assert "its writer's clock may run behind" in reasons[w.paths.compacted(beyond)]
    assert "within min_age" in reasons[w.paths.compacted(ahead)]
    # GC's own clock 2 hours fast: the in-flight L0 of the writer is still protected by the
    # newest-L0 limit (and the compaction's outputs by its low watermark).
    unpublished = ulid_at(t0 - 5 * MIN)
    w.sst(unpublished)
    collect_garbage(ROOT, store, dry_run=False, now=(t0 + 2 * HOUR) / 1000)
    assert w.paths.compacted(unpublished) in paths_of(store)


def test_listing_that_misses_referenced_ssts_blocks_compacted(store: ObjectStore) -> None:
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, ROOT)
    live, garbage = ulid_at(t0 - HOUR), ulid_at(t0 - 3 * HOUR)
    w.sst(live)
    w.sst(garbage)
    w.compactions(1, compactions((ulid_at(t0 - 2 * HOUR), CompactionStatus.COMPLETED)))
    w.manifests_upto(2, manifest(l0=[live]))
    hooked = HookedStore(store)
    real = list(store.list(f"{ROOT}/compacted"))
    hooked.listing = lambda prefix: ([m for m in real if m.path != w.paths.compacted(live)]
                                     if prefix == f"{ROOT}/compacted" else None)
    report = collect_garbage(ROOT, hooked, dry_run=False, now=(t0 + HOUR) / 1000)
    assert w.paths.compacted(garbage) in paths_of(store)
    assert report.refused and "exist but are missing from the listing" in report.refused[0]
    store.delete(w.paths.compacted(live))  # the database really lost it
    report = collect_garbage(ROOT, store, dry_run=False, now=(t0 + HOUR) / 1000)
    assert "do not exist" in report.refused[0] and "lost data" in report.refused[0]
    assert w.paths.compacted(garbage) in paths_of(store)


def test_soft_destroy_mark_survives_expiry_removal(store: ObjectStore) -> None:
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, ROOT)
    marked = manifest(destroyed_at_s=t0 // 1000 - 10,
                      checkpoints=[checkpoint(1, expire_s=t0 // 1000 + 7200),
                                   checkpoint(1, expire_s=t0 // 1000 - 5)])
    w.manifests_upto(2, marked)
    report = collect_garbage(ROOT, store, dry_run=False, now=(t0 + HOUR) / 1000,
                             settings=Settings(gc=GcSettings(db_delete_grace=60)))
    assert report.destroy is not None and report.destroy["state"] == "pending"
    assert "1 live checkpoint(s)" in report.destroy["reason"]
    latest = ManifestStore(store, ROOT).read_latest()
    assert latest.value.destroyed_at_s == marked.destroyed_at_s
    assert len(latest.value.checkpoints) == 1 and latest.id == 3
