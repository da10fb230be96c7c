"""The rule of ``compacted/`` (0.17.0's ``compacted_gc``, SlateDB RFC-0029). Pure.

An SST no live manifest references is deleted when its ULID time is before
``min(now - min_age, compaction low watermark, newest L0)`` **and** the object itself was
written more than ``min_age`` ago. The second condition is slatelib's addition: it
protects SSTs whose writer's clock runs behind GC's (0.17 looks only at the ULID).
"""

from __future__ import annotations

from slatelib.core.gc_rules.decision import Action, ObjectKind
from slatelib.core.gc_rules.rules import GcRules, Verdict, age_text, is_young
from slatelib.core.gc_text import fmt_age, fmt_time
from slatelib.ids import ulid_time_ms

_KIND = ObjectKind.COMPACTED


def decide_compacted(rules: GcRules, sst_id: int, age_ms: int, ref: str | None) -> Verdict:
    """Keep or delete an SST of ``compacted/``; ``ref`` names the live manifest that
    references it (None: none does)."""
    if ref is not None:
        return Action.KEEP, f"kept: referenced by {ref}"
    cut = rules.compacted
    if cut.blocked is not None:
        return Action.KEEP, f"kept: {cut.blocked}"
    created = ulid_time_ms(sst_id)
    when = f"created {fmt_time(created)}"
    if cut.low_watermark_ms == 0:
        return Action.KEEP, f"kept: unreferenced, but {cut.low_watermark_why}"
    if cut.newest_l0_ms == 0:
        return Action.KEEP, f"kept: unreferenced, but {cut.newest_l0_why}"
    if created >= cut.min_age_ms:
        return Action.KEEP, (
            f"kept: unreferenced but {when} ({fmt_age(rules.now_ms - created)} ago by its ULID), "
            f"within min_age {fmt_age(rules.min_age_for(_KIND))}"
        )
    if created >= cut.low_watermark_ms:
        return Action.KEEP, (
            f"kept: unreferenced but {when}, not before the compaction low watermark "
            f"{fmt_time(cut.low_watermark_ms)} ({cut.low_watermark_why}): a compaction may "
            "still publish it"
        )
    if sst_id == cut.newest_l0_id:
        return Action.KEEP, (
            f"kept: unreferenced, but it sets the newest-L0 limit itself ({cut.newest_l0_why}); "
            "only SSTs created strictly before that limit go (as in 0.17), so it goes once a "
            "newer L0 is flushed"
        )
    if created >= cut.newest_l0_ms:
        return Action.KEEP, (
            f"kept: unreferenced but {when}, not before the newest L0 "
            f"{fmt_time(cut.newest_l0_ms)} ({cut.newest_l0_why}): it may be an L0 that is "
            "uploaded but not yet published"
        )
    if is_young(rules, age_ms, _KIND):
        return Action.KEEP, (
            f"kept: unreferenced and {when}, but the object was "
            f"{age_text(rules, age_ms, _KIND)}: "
            "its writer's clock may run behind"
        )
    binding = ("now - min_age" if cut.cutoff_ms == cut.min_age_ms else
               "the compaction low watermark" if cut.cutoff_ms == cut.low_watermark_ms else
               "the newest L0")
    return Action.DELETE, (
        f"delete: referenced by no live manifest ({rules.live_summary}); {when}, before the "
        f"cutoff {fmt_time(cut.cutoff_ms)} ({binding}); object {age_text(rules, age_ms, _KIND)}"
    )
