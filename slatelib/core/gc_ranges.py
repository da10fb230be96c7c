"""Split a directory listing into key ranges that executors list in parallel. Pure.

``compacted/`` names start with a ULID, whose leading characters encode its creation time,
so the directory is cut at ULIDs spread evenly over a time span; ``wal/`` names are
20-digit ids, cut at evenly spread ids. Each range is listed with ``start_after`` (exclusive)
and ``end_before`` (exclusive); a cut point ``b`` is given to the range below it by using
``end_before = b + "\\0"`` (the string right after ``b``), so the ranges are disjoint and
together cover every possible name, including names that are not ULIDs or ids at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from slatelib.ids import format_id, ulid_to_str

MAX_RANGES = 4096


@dataclass(frozen=True, slots=True)
class ListRange:
    """List ``prefix`` (a directory) for paths with ``start_after < path < end_before``."""

    prefix: str
    start_after: str | None
    end_before: str | None

    def contains(self, path: str) -> bool:
        return ((self.start_after is None or path > self.start_after)
                and (self.end_before is None or path < self.end_before))


def ranges_from_cuts(prefix: str, cuts: list[str]) -> list[ListRange]:
    """Ranges ``(-inf, c0], (c0, c1], ..., (ck, +inf)`` over the listing of ``prefix``."""
    points = sorted(set(cuts))
    out: list[ListRange] = []
    lower: str | None = None
    for c in points:
        out.append(ListRange(prefix, lower, c + "\0"))
        lower = c
    out.append(ListRange(prefix, lower, None))
    return out


def _count(n: int) -> int:
    return max(1, min(int(n), MAX_RANGES))


def ulid_cuts(prefix: str, lo_ms: int, hi_ms: int, n: int) -> list[str]:
    """``n - 1`` cut points ``<prefix>/<ULID>`` at times evenly spread over ``[lo, hi]``."""
    n = _count(n)
    if hi_ms <= lo_ms or n == 1:
        return []
    step = (hi_ms - lo_ms) / n
    times = sorted({int(lo_ms + step * i) for i in range(1, n)})
    return [f"{prefix}/{ulid_to_str(max(0, min(t, (1 << 48) - 1)) << 80)}" for t in times]


def wal_cuts(prefix: str, lo_id: int, hi_id: int, n: int) -> list[str]:
    """``n - 1`` cut points ``<prefix>/<20-digit id>`` evenly spread over ``[lo, hi]``."""
    n = _count(n)
    if hi_id <= lo_id or n == 1:
        return []
    step = (hi_id - lo_id) / n
    ids = sorted({int(lo_id + step * i) for i in range(1, n)})
    return [f"{prefix}/{format_id(max(0, min(i, (1 << 64) - 1)))}" for i in ids]
