"""GC of manifest/ and compactions/ (slatelib.core.gc_rules.sequenced) as 0.17.0 applies it."""

from __future__ import annotations

from slatelib.core.gc_plan import CompactionsState, LiveSet
from slatelib.core.gc_rules import Action, ObjectKind, decide
from tests.unit.core.gc_rules.support import NOW, OLD, P, rules_for, simple_live
from tests.unit.gc_support import checkpoint, compactions, manifest, ulid_at


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


def test_older_compactions_files_go_and_the_latest_stays() -> None:
    r = rules_for(simple_live())
    assert decide(r, P.compactions(7), 1, OLD).reason == "kept: the latest compactions file"
    d = decide(r, P.compactions(6), 1, OLD)
    assert (d.action, d.reason) == (Action.DELETE, "delete: superseded by compactions file 7; written 2h00m ago (min_age 5m)")


def test_unreadable_compactions_state_keeps_older_versions() -> None:
    r = rules_for(simple_live(), CompactionsState(error="truncated"))
    d = decide(r, P.compactions(2), 1, OLD)
    assert d.action is Action.KEEP and "latest compactions file is unreadable (truncated)" in d.reason
