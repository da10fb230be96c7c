"""GC of compacted/ (slatelib.core.gc_rules.compacted): references, the SlateDB RFC-0029 cutoff,
clock skew."""

from __future__ import annotations

from dataclasses import replace

from slatelib.core.compactions import CompactionStatus
from slatelib.core.gc_plan import CompactionsState, LiveSet
from slatelib.core.gc_rules import Action, decide
from slatelib.ids import ulid_to_str
from tests.unit.core.gc_rules.support import NOW, OLD, P, rules_for, simple_live
from tests.unit.gc_support import HOUR, MIN, compactions, manifest, ulid_at


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
