"""collect_db_stats on a memory store: the GC backlog equals a dry run of GC, the compactor
verdict, and what it refuses."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from slatelib.clock import SYSTEM_CLOCK
from slatelib.core.compactions import CompactionStatus
from slatelib.errors import NotADatabaseRootError
from slatelib.objstore import ObjectMeta, ObjectStore, open_store
from slatelib.ops.db_stats import collect_db_stats
from slatelib.ops.gc import collect_garbage
from slatelib.testing.faulty import FlakyObjectStore
from tests.unit.gc_support import (
    HOUR,
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
    return open_store(f"memory://stats{uuid.uuid4().hex[:12]}/")


def write_db(store: ObjectStore, *, epoch: int = 0) -> tuple[DbWriter, int]:
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, ROOT)
    a, r = ulid_at(t0 - HOUR), ulid_at(t0 - 150 * 60_000)
    for sid in (a, r, ulid_at(t0 - 3 * HOUR), ulid_at(t0 - 3 * HOUR)):
        w.sst(sid)
    for cid in (1, 2, 3):
        w.compactions(cid, compactions((ulid_at(t0 - 2 * HOUR), CompactionStatus.COMPLETED)))
    for wid in range(1, 11):
        w.wal(wid, 0 if wid == 3 else 10)
    latest = manifest(l0=[a], runs={0: [r]}, replay_after=8, last_seen=10,
                      checkpoints=[checkpoint(4), checkpoint(2, expire_s=1)])
    w.manifests_upto(5, replace(latest, compactor_epoch=epoch))
    return w, t0


def test_gc_backlog_is_what_a_dry_run_of_gc_would_delete(store: ObjectStore) -> None:
    _, t0 = write_db(store)
    later = t0 + HOUR
    stats = collect_db_stats(store, ROOT, now_ms=later)
    dry = collect_garbage(ROOT, store, dry_run=True, now=later / 1000).to_json()
    want = {k: (v["to_delete"], v["to_delete_bytes"]) for k, v in dry["kinds"].items()
            if v["to_delete"]}
    assert stats.gc_reclaimable_by_kind == want
    assert stats.gc_reclaimable_objects == dry["totals"]["to_delete"] > 0
    assert stats.gc_reclaimable_bytes == dry["totals"]["to_delete_bytes"]
    assert (stats.checkpoints, stats.expired_checkpoints) == (1, 1)
    assert (stats.l0_ssts, stats.sorted_runs, stats.manifest_versions) == (1, 1, 5)
    assert (stats.wal_ssts_to_replay, stats.wal_fences) == (2, 1)
    # the compactions file is at epoch 1, the manifest at 0: a compactor is starting
    assert stats.foreign_compactor and "compactions file claims epoch 1" in \
        stats.compactor_reason


def test_reads_without_writing_and_lists_once(store: ObjectStore) -> None:
    write_db(store)
    flaky = FlakyObjectStore(store)
    collect_db_stats(flaky, ROOT)
    writes = sum(flaky.calls[op] for op in ("put", "put_if_absent", "put_if_match", "delete",
                                             "delete_many"))
    assert writes == 0
    assert flaky.calls["list"] == 1 and flaky.calls["head"] == 0


def test_an_epoch_no_slatelib_run_claimed_is_a_foreign_compactor(store: ObjectStore) -> None:
    write_db(store, epoch=3)
    stats = collect_db_stats(store, ROOT)
    assert stats.foreign_compactor and stats.compactor_epoch == 3
    assert "not claimed by slatelib" in stats.compactor_reason
    assert stats.to_dict()["foreign_compactor"] is True


def test_no_database_is_refused(store: ObjectStore) -> None:
    with pytest.raises(NotADatabaseRootError):
        collect_db_stats(store, "t/nothing")


def test_an_sst_missing_from_the_listing_is_looked_for_again(store: ObjectStore) -> None:
    """A compaction committing between the listing and the manifest read leaves its outputs
    unlisted: one more look, before they are reported missing."""
    w, _ = write_db(store)
    hooked = HookedStore(store)
    lists = []

    def first_without_ssts(prefix: str) -> list[ObjectMeta] | None:
        lists.append(prefix)
        if len(lists) > 1:
            return None
        return [m for m in store.list(prefix) if "/compacted/" not in m.path]

    hooked.listing = first_without_ssts
    stats = collect_db_stats(hooked, ROOT)  # type: ignore[arg-type]
    assert len(lists) == 2 and stats.missing_ssts == 0 and stats.live_ssts == 2
    gone = w.paths.compacted(next(iter(manifest_ssts(store))))
    store.delete(gone)
    lost = collect_db_stats(store, ROOT)
    assert lost.missing_ssts == 1 and "missing from the listing" in lost.gc_refused[0]


def manifest_ssts(store: ObjectStore) -> list[int]:
    from slatelib.db_manifest import DbManifest

    return sorted(DbManifest(store, ROOT).read_latest().value.referenced_sst_ids())
