"""Key ranges print as a person types keys (``[user:00100, user:00200)``), and a
compaction that plans nothing says why."""

from __future__ import annotations

from slatelib.core.humanize import fmt_key
from slatelib.core.ranges import BytesRange


def test_ranges_print_keys_as_text_or_hex() -> None:
    assert str(BytesRange.half_open(b"user:00100", b"user:00200")) == "[user:00100, user:00200)"
    assert str(BytesRange.half_open(None, b"\x00\xff")) == "(-inf, hex:00ff)"
    assert str(BytesRange.half_open(b"a,b", None)) == "[utf8:a,b, +inf)"
    assert fmt_key(b"hex:x") == "utf8:hex:x" and fmt_key(None) == "-"


def test_idle_reason_says_why_nothing_was_planned() -> None:
    from slatelib.core.compaction_plan import PlanOptions, Policy, idle_reason
    from slatelib.core.manifest import Manifest

    empty = Manifest.initial()
    assert idle_reason(empty, None, PlanOptions(Policy.FULL)).startswith(
        "the database holds no SSTs (0 sorted runs, 0 SSTs)")
    assert idle_reason(empty, None, PlanOptions(Policy.L0)).startswith("no L0 SSTs")
    assert "fewer than 4 sources" in idle_reason(empty, None, PlanOptions(Policy.SIZE_TIERED))
