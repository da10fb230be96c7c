"""Sizes, counts and durations as headlines and tables print them."""

from __future__ import annotations

import pytest

from slatelib.core.humanize import fmt_bytes, fmt_count, fmt_seconds


@pytest.mark.parametrize(("n", "text"), [
    (None, "-"), (0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (1_834_000, "1.8 MB"),
    (3.9e9, "3.9 GB"), (2e18, "2000.0 PB"),
])
def test_fmt_bytes(n: float | None, text: str) -> None:
    assert fmt_bytes(n) == text


def test_fmt_count_and_seconds() -> None:
    assert fmt_count(42772) == "42,772"
    assert fmt_seconds(1.74) == "1.7 s" and fmt_seconds(0.145) == "0.14 s"
