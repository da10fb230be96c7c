"""The rule of ``manifest/`` and ``compactions/`` (0.17.0's ``manifest_gc`` and
``compactions_gc``). Pure.

- **manifest/**: delete a version that is neither the latest nor pinned by a checkpoint of
  the latest manifest and was written more than ``min_age`` ago (strictly).
- **compactions/**: every version but the latest, once older than ``min_age``.
"""

from __future__ import annotations

from slatelib.core.gc_rules.decision import Action, ObjectKind
from slatelib.core.gc_rules.rules import GcRules, Verdict, age_text, is_young


def decide_sequenced(rules: GcRules, kind: ObjectKind, vid: int, age_ms: int) -> Verdict:
    """Keep or delete a version of ``manifest/`` or ``compactions/``."""
    seq = rules.manifests if kind is ObjectKind.MANIFEST else rules.compactions
    what = "manifest" if kind is ObjectKind.MANIFEST else "compactions file"
    if seq.latest_id is None:
        return Action.KEEP, f"kept: {seq.blocked or f'GC read no latest {what}'}"
    if vid >= seq.latest_id:
        return Action.KEEP, f"kept: the latest {what}" if vid == seq.latest_id else (
            f"kept: {what} {vid} is not older than the latest one GC read ({seq.latest_id})")
    pin = seq.pinned.get(vid)
    if pin is not None:
        return Action.KEEP, f"kept: pinned by {pin}"
    if seq.blocked is not None:
        return Action.KEEP, f"kept: {seq.blocked}"
    if is_young(rules, age_ms, kind):
        return Action.KEEP, (
            f"kept: superseded by {what} {seq.latest_id} but {age_text(rules, age_ms, kind)}")
    if kind is ObjectKind.MANIFEST:
        return Action.DELETE, (
            f"delete: neither the latest manifest ({seq.latest_id}) nor pinned by a checkpoint; "
            f"{age_text(rules, age_ms, kind)}"
        )
    return Action.DELETE, (
        f"delete: superseded by compactions file {seq.latest_id}; {age_text(rules, age_ms, kind)}"
    )
