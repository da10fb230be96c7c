"""Key ranges print as a person types keys: ``[user:00100, user:00200)``."""

from __future__ import annotations

from slatelib.core.humanize import fmt_key
from slatelib.core.ranges import BytesRange


def test_ranges_print_keys_as_text_or_hex() -> None:
    assert str(BytesRange.half_open(b"user:00100", b"user:00200")) == "[user:00100, user:00200)"
    assert str(BytesRange.half_open(None, b"\x00\xff")) == "(-inf, hex:00ff)"
    assert str(BytesRange.half_open(b"a,b", None)) == "[utf8:a,b, +inf)"
    assert fmt_key(b"hex:x") == "utf8:hex:x" and fmt_key(None) == "-"
