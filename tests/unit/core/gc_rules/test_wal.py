"""GC of wal/ (slatelib.core.gc_rules.wal): replay ranges, min_age, writer fences."""

from __future__ import annotations

from dataclasses import replace

from slatelib.core.gc_plan import LiveSet
from slatelib.core.gc_rules import Action, ObjectKind, decide
from tests.unit.core.gc_rules.support import NOW, OLD, OPTS, P, rules_for, simple_live
from tests.unit.gc_support import HOUR, checkpoint, manifest, ulid_at


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
