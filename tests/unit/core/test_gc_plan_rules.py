"""Per-object GC rules (slatelib.core.gc_rules) as 0.17.0 applies them, with reasons."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slatelib.core.compactions import CompactionStatus
from slatelib.core.gc_plan import CompactionsState, LiveSet, build_rules
from slatelib.core.gc_rules import Action, GcOptions, GcRules, ObjectKind, classify, decide
from slatelib.errors import InvalidArgumentError
from slatelib.ids import format_id, ulid_to_str
from slatelib.paths import DbPaths
from tests.unit.gc_support import HOUR, MIN, checkpoint, compactions, manifest, ulid_at

NOW = 1_795_000_000_000
OLD = NOW - 2 * HOUR
P = DbPaths.of("t/db")
OPTS = GcOptions(min_age_s=300)


def rules_for(live: LiveSet, comp: CompactionsState | None = None, **kw: object) -> GcRules:
    if comp is None:
        comp = CompactionsState(7, compactions((ulid_at(NOW - 30 * MIN), CompactionStatus.COMPLETED)))
    return build_rules("t/db", live, comp, now_ms=NOW, options=kw.pop("options", OPTS), **kw)  # type: ignore[arg-type]


def simple_live(**kw: object) -> LiveSet:
    m = manifest(l0=[ulid_at(NOW - 20 * MIN)], replay_after=20, last_seen=25, **kw)  # type: ignore[arg-type]
    return LiveSet(42, m)


# ------------------------------------------------------------------------------ options
def test_min_age_below_the_floor_is_refused_without_force() -> None:
    with pytest.raises(InvalidArgumentError, match=r"min_age 1m is below the safety floor 5m.*force"):
        GcOptions(min_age_s=60).check()
    GcOptions(min_age_s=60, force=True).check()
    GcOptions(min_age_s=300).check()


@pytest.mark.parametrize("field", ["min_age_s", "min_age_floor_s", "db_delete_grace_s"])
def test_negative_or_infinite_durations_are_refused(field: str) -> None:
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(InvalidArgumentError, match=field):
            replace(GcOptions(force=True), **{field: bad}).check()


# ---------------------------------------------------------------------------- manifests
def test_manifest_older_than_min_age_that_is_neither_latest_nor_pinned_is_deleted() -> None:
    d = decide(rules_for(simple_live()), P.manifest(40), 100, NOW - 301_000)
    assert (d.kind, d.action) == (ObjectKind.MANIFEST, Action.DELETE)
    assert d.reason == ("delete: neither the latest manifest (42) nor pinned by a checkpoint; "
                        "written 5m01s ago (min_age 5m)")


def test_manifest_age_must_exceed_min_age_strictly() -> None:
    d = decide(rules_for(simple_live()), P.manifest(40), 100, NOW - 300_000)
    assert d.action is Action.KEEP
    assert d.reason == "kept: superseded by manifest 42 but written 5m ago (min_age 5m)"


def test_latest_and_newer_manifests_are_kept() -> None:
    r = rules_for(simple_live())
    assert decide(r, P.manifest(42), 1, OLD).reason == "kept: the latest manifest"
    assert decide(r, P.manifest(43), 1, OLD).action is Action.KEEP


def test_manifest_pinned_by_a_checkpoint_is_kept_and_named() -> None:
    cp = checkpoint(17, expire_s=1_795_086_400, name="nightly")
    live = LiveSet(42, manifest(l0=[ulid_at(OLD)], checkpoints=[cp]), {17: manifest()})
    d = decide(rules_for(live), P.manifest(17), 1, OLD)
    assert d.action is Action.KEEP
    assert d.reason == (f"kept: pinned by checkpoint {str(cp.id)[:8]} 'nightly', "
                        "expires 2026-11-19T11:06:40Z")


def test_blocked_compactions_files_are_kept_with_the_block_as_reason() -> None:
    comp = CompactionsState(7, compactions())
    r = rules_for(simple_live(), comp, compactions_block="the compactions state is in doubt")
    d = decide(r, P.compactions(3), 1, OLD)
    assert (d.action, d.reason) == (Action.KEEP, "kept: the compactions state is in doubt")
    assert decide(rules_for(simple_live(), comp), P.compactions(3), 1, OLD).deletes


# ---------------------------------------------------------------------------------- WAL
def test_wal_at_or_above_replay_after_of_the_latest_manifest_is_kept() -> None:
    r = rules_for(simple_live())
    for wid in (20, 21, 999):
        d = decide(r, P.wal(wid), 10, OLD)
        assert d.action is Action.KEEP
        assert f"WAL {wid} >= replay_after_wal_id 20 of manifest 42 (latest)" in d.reason


def test_old_wal_below_replay_after_is_deleted_and_young_one_kept() -> None:
    r = rules_for(simple_live())
    d = decide(r, P.wal(19), 10, NOW - HOUR)
    assert d.action is Action.DELETE
    assert d.reason == ("delete: WAL 19 is below replay_after_wal_id 20 of manifest 42 (latest); "
                        "no checkpoint pins an older manifest; written 1h00m ago (min_age 5m)")
    young = decide(r, P.wal(19), 10, NOW - 10_000)
    assert young.action is Action.KEEP and "outside every replay range but written 10s ago" in young.reason


def test_wal_replayed_by_a_checkpoint_manifest_is_kept() -> None:
    cp = checkpoint(17)
    live = LiveSet(42, manifest(l0=[ulid_at(OLD)], replay_after=20, checkpoints=[cp]),
                   {17: manifest(replay_after=10, last_seen=14)})
    r = rules_for(live)
    assert decide(r, P.wal(10), 10, OLD).action is Action.DELETE  # the checkpoint's boundary
    for wid in (11, 14):
        d = decide(r, P.wal(wid), 10, OLD)
        assert d.action is Action.KEEP
        assert "(replay_after_wal_id 10 < id <= wal_id_last_seen 14)" in d.reason
    d = decide(r, P.wal(15), 10, OLD)
    assert d.action is Action.DELETE
    assert (f"outside the WAL replay range of every checkpoint manifest (manifest 17 "
            f"(checkpoint {str(cp.id)[:8]}, no expiry): 11..14)") in d.reason


def test_wal_fences_are_kept_as_a_dry_run_unless_enabled() -> None:
    d = decide(rules_for(simple_live()), P.wal(3), 0, OLD)
    assert (d.kind, d.action) == (ObjectKind.WAL_FENCE, Action.KEEP)
    assert "fence GC is a dry run as in 0.17 (it would be deletable" in d.reason
    r = rules_for(simple_live(), options=replace(OPTS, wal_fence_dry_run=False))
    assert decide(r, P.wal(3), 0, OLD).action is Action.DELETE
    assert decide(r, P.wal(20), 0, OLD).action is Action.KEEP


# ----------------------------------------------------------------------------- compacted
def test_referenced_sst_is_kept_with_the_manifest_that_references_it() -> None:
    d = decide(rules_for(simple_live()), P.compacted(ulid_at(OLD)), 5, OLD,
               ref="manifest 42 (latest) as sorted run 0")
    assert (d.action, d.reason) == (Action.KEEP, "kept: referenced by manifest 42 (latest) as sorted run 0")


def test_unreferenced_old_sst_below_every_cutoff_is_deleted() -> None:
    sid = ulid_at(NOW - HOUR)
    d = decide(rules_for(simple_live()), P.compacted(sid), 5, NOW - HOUR)
    assert d.action is Action.DELETE
    assert d.reason.startswith("delete: referenced by no live manifest (latest 42); created ")
    assert "before the cutoff 2026-11-18T10:36:40Z (the compaction low watermark)" in d.reason


def test_sst_younger_than_min_age_by_its_ulid_is_kept() -> None:
    live = LiveSet(42, manifest(l0=[ulid_at(NOW)]))
    comp = CompactionsState(1, compactions((ulid_at(NOW), CompactionStatus.COMPLETED)))
    d = decide(rules_for(live, comp), P.compacted(ulid_at(NOW - 4 * MIN)), 5, OLD)
    assert d.action is Action.KEEP and "within min_age 5m" in d.reason


def test_sst_not_older_than_the_compaction_low_watermark_is_kept() -> None:
    running = ulid_at(NOW - HOUR)
    comp = CompactionsState(3, compactions((running, CompactionStatus.RUNNING),
                                           (ulid_at(NOW - 10 * MIN), CompactionStatus.COMPLETED)))
    live = LiveSet(42, manifest(l0=[ulid_at(NOW - 6 * MIN)]))
    output = ulid_at(NOW - HOUR + 1)
    d = decide(rules_for(live, comp), P.compacted(output), 5, OLD)
    assert d.action is Action.KEEP
    assert f"compaction low watermark 2026-11-18T10:06:40Z (compaction {ulid_to_str(running)} (running) of compactions file 3)" in d.reason
    assert decide(rules_for(live, comp), P.compacted(running - (1 << 80)), 5, OLD).action is Action.DELETE


def test_sst_not_older_than_the_newest_l0_is_kept_as_a_possible_unpublished_l0() -> None:
    newest = ulid_at(NOW - HOUR)
    live = LiveSet(42, manifest(l0=[ulid_at(NOW - 2 * HOUR), newest]))
    d = decide(rules_for(live), P.compacted(newest + 5), 5, OLD)
    assert d.action is Action.KEEP
    assert f"not before the newest L0 2026-11-18T10:06:40Z (L0 SST {ulid_to_str(newest)} in manifest 42)" in d.reason
    assert "uploaded but not yet published" in d.reason


def test_last_compacted_l0_view_is_kept_and_said_to_set_the_limit_itself() -> None:
    last = ulid_at(NOW - HOUR)
    live = LiveSet(42, manifest(runs={0: [ulid_at(NOW - 3 * HOUR)]}, last_compacted=last))
    d = decide(rules_for(live), P.compacted(last), 5, OLD)
    assert d.action is Action.KEEP
    assert d.reason.startswith(
        "kept: unreferenced, but it sets the newest-L0 limit itself (last compacted L0 view "
        f"{ulid_to_str(last)} in manifest 42)")
    assert "uploaded but not yet published" not in d.reason


def test_newest_l0_falls_back_to_the_last_compacted_view_and_to_segments() -> None:
    last = ulid_at(NOW - HOUR)
    live = LiveSet(42, manifest(runs={0: [ulid_at(NOW - 3 * HOUR)]}, last_compacted=last))
    r = rules_for(live)
    assert r.compacted.newest_l0_ms == NOW - HOUR
    assert "last compacted L0 view" in r.compacted.newest_l0_why
    from slatelib.core.manifest import Segment, SstView

    seg_l0 = ulid_at(NOW - 30 * MIN)
    m = replace(live.latest, segments=(Segment(b"usr:", None, (SstView.identity(seg_l0),), ()),))
    r2 = rules_for(LiveSet(42, m))
    assert r2.compacted.newest_l0_ms == NOW - 30 * MIN
    assert "segment 'usr:'" in r2.compacted.newest_l0_why


def test_without_compactions_state_nothing_in_compacted_is_deleted() -> None:
    sid = ulid_at(NOW - 5 * HOUR)
    cases = {
        CompactionsState(): "there is no compactions file",
        CompactionsState(4, compactions()): "compactions file 4 lists no compaction",
        CompactionsState(error="bad flatbuffer"): "the compactions state is unreadable (bad flatbuffer)",
    }
    for comp, why in cases.items():
        d = decide(rules_for(simple_live(), comp), P.compacted(sid), 5, OLD)
        assert d.action is Action.KEEP and why in d.reason, (comp, d.reason)


def test_database_without_any_l0_deletes_nothing_in_compacted() -> None:
    live = LiveSet(42, manifest(runs={0: [ulid_at(NOW - 3 * HOUR)]}))
    d = decide(rules_for(live), P.compacted(ulid_at(NOW - 5 * HOUR)), 5, OLD)
    assert d.action is Action.KEEP and "has no L0 SST and never compacted one" in d.reason


def test_sst_with_old_ulid_but_recent_object_time_is_kept_for_clock_skew() -> None:
    d = decide(rules_for(simple_live()), P.compacted(ulid_at(NOW - HOUR)), 5, NOW - 2 * MIN)
    assert d.action is Action.KEEP
    assert "the object was written 2m ago (min_age 5m): its writer's clock may run behind" in d.reason


def test_compacted_cutoff_is_strict() -> None:
    l0 = ulid_at(NOW - HOUR, rand=0)
    live = LiveSet(42, manifest(l0=[l0]))
    r = rules_for(live)
    assert decide(r, P.compacted(l0 + 1), 5, OLD).action is Action.KEEP          # same ms
    assert decide(r, P.compacted(l0 - (1 << 80)), 5, OLD).action is Action.DELETE  # 1 ms older


def test_compacted_block_keeps_every_unreferenced_sst() -> None:
    r = rules_for(simple_live(), compacted_block="the listing disagrees with the manifests")
    d = decide(r, P.compacted(ulid_at(NOW - 5 * HOUR)), 5, OLD)
    assert (d.action, d.reason) == (Action.KEEP, "kept: the listing disagrees with the manifests")


# --------------------------------------------------------------------------- compactions
def test_older_compactions_files_go_and_the_latest_stays() -> None:
    r = rules_for(simple_live())
    assert decide(r, P.compactions(7), 1, OLD).reason == "kept: the latest compactions file"
    d = decide(r, P.compactions(6), 1, OLD)
    assert (d.action, d.reason) == (Action.DELETE, "delete: superseded by compactions file 7; written 2h00m ago (min_age 5m)")


def test_unreadable_compactions_state_keeps_older_versions() -> None:
    r = rules_for(simple_live(), CompactionsState(error="truncated"))
    d = decide(r, P.compactions(2), 1, OLD)
    assert d.action is Action.KEEP and "latest compactions file is unreadable (truncated)" in d.reason


# ------------------------------------------------------------------------- odd objects
@pytest.mark.parametrize("name", [
    "wal/17.sst", "wal/00000000000000000017.sst.tmp", "wal/sub/00000000000000000017.sst",
    "manifest/00000000000000000001.manifest.bak", "manifest/1.manifest",
    "compacted/notaulid.sst", "compacted/01m80gfcqm0py0saw13yesd6tg.sst",
    "compactions/00000000000000000001.compact", "other/x", "gc/../x",
    "compacted/01M80GFCQM0PY0SAW13YESD6TG%2Esst", "compacted/01M80GFCQM0PY0SAW13YESD6TG.SST",
    "wal/%30%30000000000000000017.sst",
])
def test_names_that_slatedb_does_not_write_are_kept(name: str) -> None:
    d = decide(rules_for(simple_live()), f"t/db/{name}", 5, OLD)
    assert d.action is Action.KEEP and d.kind in (ObjectKind.UNKNOWN, ObjectKind.BOUNDARY)
    assert "never deletes a name it does not recognise" in d.reason or name.startswith("gc/")


def test_classify_recognises_exactly_slatedb_names() -> None:
    sid = ulid_at(OLD)
    assert classify("t/db", P.compacted(sid), 1).id == sid
    assert classify("t/db", P.wal(5), 0).kind is ObjectKind.WAL_FENCE
    assert classify("t/db", f"t/db/wal/{format_id(5)}.sst", 3).kind is ObjectKind.WAL
    assert classify("t/db", "t/db-clone/wal/00000000000000000005.sst", 3).in_layout is False
    assert classify("", "wal/00000000000000000005.sst", 3).id == 5


def test_gc_files_are_named_for_what_they_are_and_always_kept() -> None:
    r = rules_for(simple_live())
    cases = {
        "t/db/gc/manifest.boundary": (ObjectKind.BOUNDARY, "GC boundary of manifest/ (RFC-0026)"),
        "t/db/gc/compactions.boundary": (ObjectKind.BOUNDARY, "GC boundary of compactions/"),
        "t/db/gc/manifest.boundary.lock": (
            ObjectKind.BOUNDARY, "lock file of gc/manifest.boundary: serialises its conditional"),
        "t/db/gc/notes.lock": (ObjectKind.UNKNOWN, "not a boundary file or the lock file of one"),
    }
    for path, (kind, why) in cases.items():
        c = classify("t/db", path, 0)
        assert c.kind is kind and c.why.startswith(why), (path, c)
        d = decide(r, path, 0, OLD)
        assert d.action is Action.KEEP and d.reason.startswith(f"kept: {why}"), d.reason
