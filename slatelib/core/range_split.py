"""Splitting one compaction into key ranges of balanced input bytes. Pure.

Every input view contributes weighted *anchors* ``(key, bytes)``: the bytes of input that
start at that key. A view small next to a range is one anchor (its first visible key, its
estimated size: no I/O); a large one is read at block granularity from its SST index
(block ``i`` starts at ``first_key[i]`` — block 0 at the SST's first key — and its bytes
are the gap to the next block's offset; anchors outside the view's visible range are
dropped, one straddling its start moves to the start key). Sampling caps anchors per SST.

:func:`range_count` picks how many ranges: enough to keep every slot busy
(``parallelism * tasks_per_slot``) but none smaller than ``min_range_bytes`` of input, and
none so large that it would write more than :data:`MAX_SSTS_PER_RANGE` output SSTs of
``max_sst_size`` (this bounds what a retried task redoes). :func:`split_by_weight` then cuts
the sorted anchors at weighted quantiles. Key ranges where many sources overlap or data is
dense carry more bytes and so get narrower ranges; a range still heavier than
:data:`HOT_FACTOR` times the target (:func:`hot_ranges`) had coarse anchors, and the caller
refines those (reads their indexes) and splits again.

Boundaries are keys: a range is ``[start, end)`` over keys, so every version of a key is in
exactly one range and no key's versions are split across tasks.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import NamedTuple

from slatelib.core.ranges import UNBOUNDED, Bound, BoundKind, BytesRange
from slatelib.errors import InvalidArgumentError

MAX_SSTS_PER_RANGE = 8
HOT_FACTOR = 1.5
MAX_ANCHORS_PER_SST = 256
COARSE_FRACTION = 4
"""A view heavier than ``target / COARSE_FRACTION`` is anchored per block, not as a whole."""


class Anchor(NamedTuple):
    """``weight`` bytes of input that start at ``key``; orders by ``(key, weight)``.

    A named tuple, not a dataclass: a large compaction makes one per input view and sorts
    them, and tuples compare in C (and, holding only bytes and an int, are untracked by the
    cyclic GC). See docs/rfcs/0014-large-manifest-planning.md.
    """

    key: bytes
    weight: int


def view_anchor(effective: BytesRange, size: int) -> Anchor:
    """One anchor for a whole view: its first visible key and its size."""
    # tuple.__new__ directly: the named tuple's own __new__ is a Python frame, and a full
    # compaction of a large database makes one coarse anchor per input view.
    return _new_tuple(Anchor, (effective.start.key or b"", size if size > 0 else 0))


_new_tuple = tuple.__new__


def block_anchors(
    first_keys: Sequence[bytes],
    offsets: Sequence[int],
    data_end: int,
    first_entry: bytes,
    effective: BytesRange,
    *,
    max_anchors: int = MAX_ANCHORS_PER_SST,
) -> list[Anchor]:
    """Anchors of one SST's blocks clipped to a view's ``effective`` range.

    ``first_keys``/``offsets`` are the SST index, ``data_end`` the end of its data blocks
    (``filter_offset``).
    """
    n = len(offsets)
    if n == 0:
        return []
    stride = max(1, math.ceil(n / max(1, max_anchors)))
    start_key = effective.start.key or b""
    out: list[Anchor] = []
    for i in range(0, n, stride):
        j = min(n, i + stride)
        end_off = offsets[j] if j < n else data_end
        weight = max(0, end_off - offsets[i])
        key = first_entry if i == 0 else first_keys[i]
        next_key = first_keys[j] if j < n else None
        if next_key is not None and next_key <= start_key and j < n:
            continue  # the whole group lies before the visible start
        if effective.above_end(key):
            break
        out.append(Anchor(max(key, start_key), weight))
    return out


def range_count(
    total_bytes: int,
    *,
    parallelism: int,
    max_sst_size: int,
    min_range_bytes: int,
    tasks_per_slot: int = 1,
) -> int:
    """How many ranges to split ``total_bytes`` of input into (see the module docstring).

    Raises:
        InvalidArgumentError: a non-positive parallelism, size or factor.
    """
    if parallelism < 1 or max_sst_size < 1 or min_range_bytes < 1 or tasks_per_slot < 1:
        raise InvalidArgumentError(
            "parallelism, max_sst_size, min_range_bytes and tasks_per_slot must be positive")
    if total_bytes <= 0:
        return 1
    n = min(parallelism * tasks_per_slot, math.ceil(total_bytes / min_range_bytes))
    n = max(n, math.ceil(total_bytes / (max_sst_size * MAX_SSTS_PER_RANGE)))
    return max(1, n)


def ranges_from_boundaries(boundaries: Sequence[bytes]) -> list[BytesRange]:
    """``(-inf, b1), [b1, b2), ..., [bk, +inf)`` (boundaries strictly ascending)."""
    out: list[BytesRange] = []
    start: Bound = UNBOUNDED
    for b in boundaries:
        out.append(BytesRange(start, Bound.excluded(b)))
        start = Bound.included(b)
    out.append(BytesRange(start, UNBOUNDED))
    return out


def split_by_weight(anchors: Sequence[Anchor], count: int) -> list[BytesRange]:
    """Up to ``count`` covering ranges cut at the weighted quantiles of ``anchors``.

    A boundary is placed at the first anchor whose preceding weight reaches the next
    quantile; quantiles already passed by a heavy anchor are skipped rather than producing
    near-empty ranges, so fewer ranges may come back.
    """
    if count <= 1 or not anchors:
        return [BytesRange.all()]
    ordered = sorted(anchors)
    total = sum(a.weight for a in ordered)
    if total <= 0:
        return [BytesRange.all()]
    target = total / count
    threshold = target
    first_key = ordered[0].key
    boundaries: list[bytes] = []
    cumulative = 0
    for a in ordered:
        distinct = a.key > (boundaries[-1] if boundaries else first_key)
        if cumulative >= threshold and distinct and len(boundaries) < count - 1:
            boundaries.append(a.key)
            while threshold <= cumulative:
                threshold += target
        cumulative += a.weight
    return ranges_from_boundaries(boundaries)


def range_weight(rng: BytesRange, anchors: Sequence[Anchor]) -> int:
    """Input bytes of the anchors inside ``rng``."""
    return sum(a.weight for a in anchors if rng.contains(a.key))


def hot_ranges(
    ranges: Sequence[BytesRange], anchors: Sequence[Anchor], count: int
) -> list[int]:
    """Indices of ranges heavier than :data:`HOT_FACTOR` times the per-range target."""
    total = sum(a.weight for a in anchors)
    if total <= 0 or count <= 1:
        return []
    limit = HOT_FACTOR * total / count
    # Prefix sums over the anchors in key order: each range's weight by two bisections
    # (the same sum as range_weight, without a pass over every anchor per range).
    ordered = sorted(anchors)
    keys = [a.key for a in ordered]
    prefix = [0]
    acc = 0
    for a in ordered:
        acc += a.weight
        prefix.append(acc)
    hot = []
    for i, r in enumerate(ranges):
        lo, hi = _key_slice(keys, r)
        if hi > lo and prefix[hi] - prefix[lo] > limit:
            hot.append(i)
    return hot


def _key_slice(keys: Sequence[bytes], rng: BytesRange) -> tuple[int, int]:
    """``lo, hi`` such that ``keys[lo:hi]`` (sorted) are exactly the keys ``rng`` contains."""
    s, e = rng.start, rng.end
    if s.kind == BoundKind.INCLUDED:
        lo = bisect_left(keys, s.key or b"")
    elif s.kind == BoundKind.EXCLUDED:
        lo = bisect_right(keys, s.key or b"")
    else:
        lo = 0
    if e.kind == BoundKind.EXCLUDED:
        hi = bisect_left(keys, e.key or b"")
    elif e.kind == BoundKind.INCLUDED:
        hi = bisect_right(keys, e.key or b"")
    else:
        hi = len(keys)
    return lo, hi


def overlaps(effective: BytesRange, task_range: BytesRange) -> bool:
    """Whether a view with ``effective`` keys has any key in ``task_range``."""
    return not effective.intersect(task_range).is_empty()


class RunKeys(NamedTuple):
    """The effective ranges of a sorted run's views with their start and end keys, for
    finding the views that overlap a range by bisection (:func:`overlapping_views`)."""

    effective: Sequence[BytesRange]
    starts: list[bytes]
    """Start keys (an unbounded start as ``b""``), nondecreasing."""
    ends: list[bytes]
    """Bounded end keys, nondecreasing; views past ``len(ends)`` have an unbounded end."""
    nonempty: list[bool]
    """``not effective[i].is_empty()``."""


def run_keys(effective: Sequence[BytesRange]) -> RunKeys | None:
    """:class:`RunKeys` of views in key order, or None when their start or end keys are not
    nondecreasing (then only a scan of every view is correct)."""
    starts: list[bytes] = []
    ends: list[bytes] = []
    nonempty: list[bool] = []
    unbounded_end = False
    included, unbounded = BoundKind.INCLUDED, BoundKind.UNBOUNDED
    for eff in effective:
        start, end = eff.start, eff.end
        s = b"" if start.kind == unbounded else start.key
        if starts and s < starts[-1]:  # type: ignore[operator]
            return None
        starts.append(s)  # type: ignore[arg-type]
        if end.kind == unbounded:
            unbounded_end = True
        elif unbounded_end or (ends and end.key < ends[-1]):  # type: ignore[operator]
            return None
        else:
            ends.append(end.key)  # type: ignore[arg-type]
        if start.kind == included and end.kind == included:  # is_empty's first case, inlined
            nonempty.append(start.key <= end.key)  # type: ignore[operator]
        else:
            nonempty.append(not eff.is_empty())
    return RunKeys(effective, starts, ends, nonempty)


def overlapping_views(keys: RunKeys, task_range: BytesRange) -> list[int]:
    """Indices (ascending) of the views of ``keys`` that have a key in ``task_range``: the
    same as ``[i for i, e in enumerate(effective) if overlaps(e, task_range)]``, in
    O(log n + hits).

    Views before the first whose end key reaches ``task_range``'s start key end strictly
    before it, and views from the first whose start key passes its end key start strictly
    after it (both key lists are nondecreasing), so only the views between are candidates.
    A candidate that starts strictly after the range's start key and ends strictly before
    its end key lies inside the range, so it overlaps exactly when it is not empty; the
    others (at the range's edges) take the exact :func:`overlaps` test.
    """
    start, end = task_range.start, task_range.end
    s_key = None if start.kind == BoundKind.UNBOUNDED else start.key or b""
    e_key = None if end.kind == BoundKind.UNBOUNDED else end.key or b""
    starts, ends, nonempty, eff = keys.starts, keys.ends, keys.nonempty, keys.effective
    lo = 0 if s_key is None else bisect_left(ends, s_key)
    hi = len(eff) if e_key is None else bisect_right(starts, e_key)
    n_ends = len(ends)
    out = []
    for i in range(lo, hi):
        inside = (s_key is None or starts[i] > s_key) and (
            e_key is None if i >= n_ends else (e_key is None or ends[i] < e_key))
        if inside:
            if nonempty[i]:
                out.append(i)
        elif overlaps(eff[i], task_range):
            out.append(i)
    return out
