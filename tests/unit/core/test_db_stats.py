"""compute_db_stats over handmade manifests and listings: every number from known inputs."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

from slatelib.core.compactions import CompactionStatus
from slatelib.core.compactor_claim import ClaimVerdict, Holder
from slatelib.core.db_stats import (
    ListedObject,
    activity_from_listing,
    compute_db_stats,
    index_listing,
    versions_listed,
)
from slatelib.core.gc_plan import CompactionsState
from slatelib.core.gc_rules import ObjectKind
from slatelib.core.manifest import Segment, SortedRun, SstView
from slatelib.ids import Ulid
from slatelib.paths import DbPaths
from tests.unit.gc_support import HOUR, MIN, checkpoint, compactions, handle, manifest, ulid_at

ROOT = "t/db"
P = DbPaths.of(ROOT)
T0 = 1_800_000_000_000  # now


def comps(at_ms: int) -> CompactionsState:
    return CompactionsState(2, compactions((ulid_at(at_ms), CompactionStatus.COMPLETED)))


class Db:
    """L0 a, b; run 1 = [c, d], run 0 = [e]; WAL 1..7 with replay_after 4 (2 a fence);
    garbage SST g; manifests 1..3 (3 latest), compactions 1, 2."""

    def __init__(self, **kw: object) -> None:
        self.a, self.b = ulid_at(T0 - 10 * MIN), ulid_at(T0 - 20 * MIN)
        self.c, self.d, self.e = (ulid_at(T0 - 2 * HOUR) for _ in range(3))
        self.g = ulid_at(T0 - 5 * HOUR)
        self.m = manifest(l0=[self.a, self.b], runs={1: [self.c, self.d], 0: [self.e]},
                          replay_after=4, last_seen=7, **kw)  # type: ignore[arg-type]
        self.sizes = {self.a: 100, self.b: 200, self.c: 1000, self.d: 2000, self.e: 5000,
                      self.g: 7}
        old = T0 - 3 * HOUR
        self.listing: list[ListedObject] = [
            *((P.compacted(s), n, T0 - HOUR if s == self.c else old)
              for s, n in self.sizes.items()),
            *((P.wal(i), 0 if i == 2 else 10 * i, old) for i in range(1, 8)),
            *((P.manifest(i), 50, old) for i in (1, 2, 3)),
            *((P.compactions(i), 30, old) for i in (1, 2)),
            ("t/db/notes.txt", 3, old),
        ]

    def stats(self, **kw: object):  # type: ignore[no-untyped-def]
        args: dict[str, object] = {"now_ms": T0}
        args.update(kw)
        return compute_db_stats(ROOT, 3, self.m, {}, self.listing,  # type: ignore[arg-type]
                                comps(T0 - HOUR), **args)


def test_tree_counts_and_sorted_run_sizes() -> None:
    db = Db()
    s = db.stats()
    assert (s.l0_ssts, s.l0_ssts_max_tree, s.l0_bytes) == (2, 2, 300)
    assert s.l0_ssts_by_segment == {}  # no segments
    assert s.sorted_runs == 2
    assert [(r.id, r.ssts, r.bytes) for r in s.sorted_run_sizes] == [(1, 2, 3000), (0, 1, 5000)]
    assert (s.sst_views, s.ssts, s.external_dbs) == (5, 5, 0)
    assert (s.live_ssts, s.live_sst_bytes, s.missing_ssts) == (5, 8300, 0)
    assert s.manifest_versions == 3 and s.compactions_versions == 2
    own = [o for o in db.listing if o[0] != "t/db/notes.txt"]  # not a database object
    assert s.objects == len(own) and s.bytes == sum(n for _, n, _ in own)


def test_a_database_nested_below_is_not_counted() -> None:
    db = Db()
    before = db.stats()
    db.listing += [("t/db/child/manifest/00000000000000000001.manifest", 999, T0),
                   ("t/db/child/compacted/x.sst", 999, T0)]
    after = db.stats()
    assert (after.objects, after.bytes, after.manifest_versions) == (
        before.objects, before.bytes, before.manifest_versions)


def test_wal_to_replay_and_replayed_split_at_the_replay_point() -> None:
    s = Db().stats()
    # replay_after_wal_id 4: 5, 6, 7 are replayed by a reopen; 1, 3, 4 are flushed (2: fence)
    assert (s.wal_ssts_to_replay, s.wal_bytes_to_replay) == (3, 50 + 60 + 70)
    assert (s.wal_ssts_replayed, s.wal_bytes_replayed) == (3, 10 + 30 + 40)
    assert s.wal_fences == 1


def test_gc_backlog_follows_gcs_rules() -> None:
    s = Db().stats()
    # manifests 1, 2 (not latest, 3 h old); compactions 1; WAL 1, 3 (below the replay
    # boundary 4, which 0.17 keeps); the garbage SST g (before the low watermark T0 - 1h)
    assert s.gc_reclaimable_by_kind == {"compacted": (1, 7), "compactions": (1, 30),
                                        "manifest": (2, 100), "wal": (2, 40)}
    assert s.gc_reclaimable_objects == 6 and s.gc_reclaimable_bytes == 177
    assert s.gc_refused == ()


def test_gc_backlog_keeps_compacted_without_a_compactions_file() -> None:
    db = Db()
    s = compute_db_stats(ROOT, 3, db.m, {}, db.listing, CompactionsState(), now_ms=T0)
    assert "compacted" not in s.gc_reclaimable_by_kind
    assert len(s.gc_refused) == 1 and "no compactions file" in s.gc_refused[0]


def test_a_missing_referenced_sst_blocks_compacted_gc_and_is_counted() -> None:
    db = Db()
    db.listing = [o for o in db.listing if o[0] != P.compacted(db.d)]
    s = db.stats()
    assert s.missing_ssts == 1 and "compacted" not in s.gc_reclaimable_by_kind
    assert "missing from the listing" in s.gc_refused[0]
    assert s.sorted_run_sizes[0].bytes == 1000  # d estimated from its (empty) info: 0


def test_checkpoints_live_expired_and_oldest() -> None:
    old = replace(checkpoint(2, expire_s=T0 // 1000 + 3600, name="nightly"), create_time_s=100)
    new = replace(checkpoint(3), create_time_s=200)
    gone = replace(checkpoint(1, expire_s=T0 // 1000 - 1), create_time_s=50)
    db = Db(checkpoints=[new, old, gone])
    s = db.stats()
    assert (s.checkpoints, s.expired_checkpoints) == (2, 1)
    assert s.oldest_checkpoint_id == str(old.id) and s.oldest_checkpoint_name == "nightly"
    assert s.oldest_checkpoint_create_ms == 100_000
    assert s.oldest_checkpoint_expire_ms == (T0 // 1000 + 3600) * 1000
    assert s.oldest_checkpoint_age_s == (T0 - 100_000) / 1000


def test_expired_checkpoints_are_planned_away_as_gc_does() -> None:
    # manifest 2 is pinned by a live checkpoint, 1 by an expired one: a GC run writes
    # manifest 4 without the expired one, so 1 and the current latest 3 go, 2 stays
    db = Db(checkpoints=[checkpoint(2), checkpoint(1, expire_s=1)])
    s = compute_db_stats(ROOT, 3, db.m, {2: db.m}, db.listing, comps(T0 - HOUR), now_ms=T0)
    assert s.gc_reclaimable_by_kind["manifest"] == (2, 100)
    pinned_latest = Db(checkpoints=[checkpoint(3), checkpoint(1, expire_s=1)])
    s = pinned_latest.stats()
    assert s.gc_reclaimable_by_kind["manifest"] == (2, 100)  # 1 and 2; 3 is pinned


def test_a_checkpoint_of_a_missing_manifest_means_no_gc() -> None:
    db = Db(checkpoints=[checkpoint(2)])
    s = db.stats(pinned_missing=[2])
    assert s.gc_reclaimable_objects == 0 and "GC refuses" in s.gc_refused[0]


def test_segments_split_l0_and_runs_per_tree() -> None:
    db = Db()
    x, y, z = (ulid_at(T0 - 3 * HOUR) for _ in range(3))
    seg = Segment(b"usr:", None, (SstView.identity(x), SstView.identity(y)),
                  (SortedRun(7, (SstView.identity(z),)),))
    m = replace(db.m, segments=(seg,), segment_extractor_name="fixed4",
                ssts=tuple(sorted((*db.m.ssts, handle(x), handle(y), handle(z)),
                                  key=lambda h: h.id)))
    db.m = m
    db.listing += [(P.compacted(s), 11, T0 - 3 * HOUR) for s in (x, y, z)]
    s = db.stats()
    assert s.l0_ssts == 4 and s.l0_ssts_by_segment == {"(top-level)": 2, "usr:": 2}
    assert s.sorted_runs == 3 and s.sorted_runs_max_tree == 2 and s.segments == 1
    assert [(r.id, r.segment) for r in s.sorted_run_sizes] == [
        (1, "(top-level)"), (0, "(top-level)"), (7, "usr:")]


def test_last_compaction_is_the_newest_sorted_run_sst() -> None:
    db = Db()
    assert db.stats().last_compaction_ms == T0 - 2 * HOUR  # c, d, e's ULID time
    no_runs = Db()
    no_runs.m = manifest(l0=[no_runs.a])
    assert no_runs.stats().last_compaction_ms is None


def test_compactor_holder_comes_from_the_verdict() -> None:
    db = Db()
    assert db.stats().compactor_holder == "unknown"
    v = ClaimVerdict(Holder.FOREIGN, 3, "not claimed by slatelib")
    s = db.stats(verdict=v)
    assert s.foreign_compactor and s.compactor_reason == "not claimed by slatelib"
    assert not db.stats(verdict=ClaimVerdict(Holder.OURS, 3, "ours")).foreign_compactor


def test_activity_and_claims_come_from_the_listing() -> None:
    db = Db()
    db.listing += [(P.claim(3, "run1"), 5, T0), (P.claim(2, "run0"), 5, T0),
                   (f"{ROOT}/slatelib/claims/junk", 1, T0)]
    listing = index_listing(ROOT, db.listing)
    assert listing.claims == {3: [P.claim(3, "run1")], 2: [P.claim(2, "run0")]}
    assert listing.newest(ObjectKind.MANIFEST) == 3
    act = activity_from_listing(listing, 3, comps(T0).compactions, T0)
    assert act.manifest_age_s == 3 * 3600 and act.wal_age_s == 3 * 3600
    assert act.compactions_epoch == 1 and act.compactions_age_s == 3 * 3600


def test_to_dict_is_json_with_iso_twins() -> None:
    db = Db(checkpoints=[checkpoint(3, cid=uuid.UUID(int=5))])
    d = db.stats().to_dict()
    text = json.dumps(d)
    assert json.loads(text)["sorted_run_sizes"][0] == {"id": 1, "segment": "(top-level)",
                                                      "ssts": 2, "bytes": 3000}
    assert d["last_compaction"] == "2027-01-15T06:00:00Z"
    assert d["gc_reclaimable_by_kind"]["manifest"] == {"objects": 2, "bytes": 100}
    assert d["oldest_checkpoint_id"] == str(uuid.UUID(int=5))
    assert d["foreign_compactor"] is False
    assert Ulid(0) == 0  # ids are plain ints


def test_known_sst_paths_give_the_same_numbers_as_classifying() -> None:
    db = Db()
    known = {P.compacted(s): s for s in (db.a, db.c, db.e)}
    known["t/db/compacted/not-listed.sst"] = Ulid(1)  # a known path the listing lacks
    indexed = index_listing(ROOT, db.listing, known)
    assert indexed.compacted == index_listing(ROOT, db.listing).compacted
    assert compute_db_stats(ROOT, 3, db.m, {}, indexed, comps(T0 - HOUR), now_ms=T0) == \
        db.stats()
    assert versions_listed(ROOT, db.listing) == (3, 2)
