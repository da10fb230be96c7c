"""The rule of ``wal/`` (0.17.0's ``wal_gc``). Pure.

A WAL SST (size > 0) is kept while it lies in a replay range: ``[replay_after, inf)`` of
the latest manifest, ``(replay_after, wal_id_last_seen]`` of every checkpoint's manifest;
otherwise deleted once older than ``min_age``. Zero-byte objects are writer fences,
collected under the same rules but, as in 0.17, only as a dry run by default.
"""

from __future__ import annotations

from slatelib.core.gc_rules.decision import Action, ObjectKind
from slatelib.core.gc_rules.rules import GcRules, Verdict, WalRange, age_text, is_young


def decide_wal(rules: GcRules, wal_id: int, kind: ObjectKind, age_ms: int) -> Verdict:
    """Keep or delete a WAL SST or a zero-byte writer fence of ``wal/``."""
    for r in rules.wal_ranges:
        if r.contains(wal_id):
            return Action.KEEP, f"kept: WAL {wal_id} {r.detail}"
    fence = kind is ObjectKind.WAL_FENCE
    name = f"writer fence {wal_id} (zero bytes)" if fence else f"WAL {wal_id}"
    if is_young(rules, age_ms, kind):
        return Action.KEEP, (
            f"kept: {name} is outside every replay range but {age_text(rules, age_ms, kind)}")
    latest = next((r for r in rules.wal_ranges if r.end is None), None)
    below = (f"below replay_after_wal_id {latest.start} of {latest.label}" if latest
             else "outside the latest manifest's replay range")
    ckpts = _outside_checkpoint_ranges([r for r in rules.wal_ranges if r.end is not None])
    if fence and rules.wal_fence_dry_run:
        return Action.KEEP, (
            f"kept: {name}; fence GC is a dry run as in 0.17 (it would be deletable: {below}, "
            f"{ckpts}, {age_text(rules, age_ms, kind)})"
        )
    return Action.DELETE, f"delete: {name} is {below}; {ckpts}; {age_text(rules, age_ms, kind)}"


def _outside_checkpoint_ranges(ranges: list[WalRange]) -> str:
    if not ranges:
        return "no checkpoint pins an older manifest"
    if len(ranges) > 3:
        return f"outside the replay ranges of all {len(ranges)} checkpoint manifests"
    spans = "; ".join(f"{r.label}: {r.start}..{(r.end or 0) - 1}" if r.end and r.end > r.start
                      else f"{r.label}: none" for r in ranges)
    return f"outside the WAL replay range of every checkpoint manifest ({spans})"
