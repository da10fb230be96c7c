"""A compaction plan that finds nothing to do says why (the headline's reason)."""

from __future__ import annotations

from slatelib.core.compaction_plan import PlanOptions, Policy, idle_reason
from slatelib.core.manifest import Manifest


def test_idle_reason_says_why_nothing_was_planned() -> None:
    empty = Manifest.initial()
    assert idle_reason(empty, None, PlanOptions(Policy.FULL)).startswith(
        "the database holds no SSTs (0 sorted runs, 0 SSTs)")
    assert idle_reason(empty, None, PlanOptions(Policy.L0)).startswith("no L0 SSTs")
    assert "fewer than 4 sources" in idle_reason(empty, None, PlanOptions(Policy.SIZE_TIERED))
