"""docs/metrics.md lists every metric exactly as the catalog defines it (the builders can
only emit catalog metrics), so the documentation cannot drift from what a scrape shows."""

from __future__ import annotations

import re
from pathlib import Path

from slatelib.metrics import METRICS, exposed_name

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"
ROW = re.compile(r"^\| `(slatelib_[a-z0-9_]+)` \| (gauge|counter) \| ([^|]*) \| (.*) \|$")


def documented() -> dict[str, tuple[str, tuple[str, ...], str]]:
    rows: dict[str, tuple[str, tuple[str, ...], str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            name, kind, labels, text = m.groups()
            assert name not in rows, f"{name} documented twice"
            names = tuple(x.strip() for x in labels.split(",") if x.strip() not in ("", "-"))
            rows[name] = (kind, names, text.strip())
    return rows


def test_every_metric_is_documented_with_its_type_labels_and_meaning() -> None:
    expected = {exposed_name(m): (m.kind, m.labels, m.help) for m in METRICS.values()}
    assert documented() == expected
