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
from itertools import accumulate, compress, islice
from operator import attrgetter, itemgetter, le
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


class SortedAnchors(NamedTuple):
    """Anchors sorted by ``(key, weight)`` with their keys and prefix sums, built once by
    :func:`sort_anchors` and shared by :func:`split_sorted` and :func:`hot_ranges_sorted`
    (a large compaction has one anchor per input view: sorting them once, not twice)."""

    keys: list[bytes]
    """The sorted anchors' keys."""
    prefix: list[int]
    """``prefix[i]``: the weight of the anchors before ``i`` (``len(keys) + 1`` entries)."""
    monotonic: bool
    """No negative weight, so ``prefix`` is nondecreasing (bisectable)."""


def sort_anchors(anchors: Sequence[Anchor]) -> SortedAnchors:
    """:class:`SortedAnchors` of ``anchors``."""
    ordered = sorted(anchors)
    weights = list(map(_WEIGHT, ordered))
    return SortedAnchors(list(map(_KEY, ordered)), list(accumulate(weights, initial=0)),
                         not weights or min(weights) >= 0)


_KEY, _WEIGHT = itemgetter(0), itemgetter(1)


def split_by_weight(anchors: Sequence[Anchor], count: int) -> list[BytesRange]:
    """Up to ``count`` covering ranges cut at the weighted quantiles of ``anchors``.

    A boundary is placed at the first anchor whose preceding weight reaches the next
    quantile; quantiles already passed by a heavy anchor are skipped rather than producing
    near-empty ranges, so fewer ranges may come back.
    """
    if count <= 1 or not anchors:
        return [BytesRange.all()]
    return split_sorted(sort_anchors(anchors), count)


def split_sorted(anchors: SortedAnchors, count: int) -> list[BytesRange]:
    """:func:`split_by_weight` of anchors sorted by :func:`sort_anchors`.

    The definition walks every anchor in order: a boundary goes at an anchor when the
    weight before it has reached the current threshold, its key is above the last boundary
    (the first key before any), and fewer than ``count - 1`` boundaries exist; then the
    threshold moves past that weight in steps of the target. Both conditions are monotone
    along the sorted anchors (the prefix sums never decrease when no weight is negative,
    the keys are sorted), so the next boundary is the later of the first anchor meeting
    each, found by two bisections: O(count * log n) after the sort instead of a Python
    step per anchor. The threshold is advanced by the same float additions, so the result
    is the definition's exactly; with a negative weight the walk itself is done.
    """
    keys, prefix = anchors.keys, anchors.prefix
    n = len(keys)
    if count <= 1 or n == 0:
        return [BytesRange.all()]
    total = prefix[n]
    if total <= 0:
        return [BytesRange.all()]
    target = total / count
    threshold = target
    last = keys[0]
    boundaries: list[bytes] = []
    if not anchors.monotonic:
        for i in range(n):
            cumulative = prefix[i]
            if (cumulative >= threshold and keys[i] > last
                    and len(boundaries) < count - 1):
                last = keys[i]
                boundaries.append(last)
                while threshold <= cumulative:
                    threshold += target
        return ranges_from_boundaries(boundaries)
    i = 0
    while len(boundaries) < count - 1:
        i = bisect_left(prefix, threshold, i, n)  # first anchor with enough weight before it
        if i >= n:
            break
        i = bisect_right(keys, last, i, n)  # ... whose key is above the last boundary
        if i >= n:
            break
        last = keys[i]
        boundaries.append(last)
        cumulative = prefix[i]
        while threshold <= cumulative:
            threshold += target
        i += 1
    return ranges_from_boundaries(boundaries)


def range_weight(rng: BytesRange, anchors: Sequence[Anchor]) -> int:
    """Input bytes of the anchors inside ``rng``."""
    return sum(a.weight for a in anchors if rng.contains(a.key))


def hot_ranges(
    ranges: Sequence[BytesRange], anchors: Sequence[Anchor], count: int
) -> list[int]:
    """Indices of ranges heavier than :data:`HOT_FACTOR` times the per-range target."""
    if count <= 1 or not anchors:
        return []
    return hot_ranges_sorted(ranges, sort_anchors(anchors), count)


def hot_ranges_sorted(ranges: Sequence[BytesRange], anchors: SortedAnchors,
                      count: int) -> list[int]:
    """:func:`hot_ranges` of anchors sorted by :func:`sort_anchors`: each range's weight
    by two bisections over the sorted keys and a difference of prefix sums (the same sum
    as :func:`range_weight`, without a pass over every anchor per range)."""
    keys, prefix = anchors.keys, anchors.prefix
    total = prefix[-1]
    if total <= 0 or count <= 1:
        return []
    limit = HOT_FACTOR * total / count
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
    included = BoundKind.INCLUDED
    starts_b, ends_b = list(map(_START, effective)), list(map(_END, effective))
    n = len(starts_b)
    # (list.count compares by identity first: no Python-level enum __eq__/__hash__ call.)
    if (list(map(_KIND, starts_b)).count(included) == n
            and list(map(_KIND, ends_b)).count(included) == n):
        # Every view is [first, last] (what a compaction writes: no visible range): the
        # key lists, their order and emptiness come from C-level maps, no Python step per
        # view. Bounded keys are bytes (Bound's invariant).
        starts: list[bytes] = list(map(_BOUND_KEY, starts_b))
        ends: list[bytes] = list(map(_BOUND_KEY, ends_b))
        if not (all(map(le, starts, islice(starts, 1, None)))
                and all(map(le, ends, islice(ends, 1, None)))):
            return None
        return RunKeys(effective, starts, ends, list(map(le, starts, ends)))
    return _run_keys_scan(effective)


_START, _END = attrgetter("start"), attrgetter("end")
_KIND, _BOUND_KEY = attrgetter("kind"), attrgetter("key")


def _run_keys_scan(effective: Sequence[BytesRange]) -> RunKeys | None:
    """:func:`run_keys` for views of any bound kinds, one view at a time."""
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
    if lo >= hi:
        return []
    # The inside views are one slice [a, b) of [lo, hi): those starting strictly after the
    # start key (starts nondecreasing) and ending strictly before the end key (a bounded
    # end key excludes the views of unbounded end, which come after len(ends)).
    a = lo if s_key is None else max(lo, bisect_right(starts, s_key, lo, hi))
    b = hi if e_key is None else min(hi, bisect_left(ends, e_key, lo, min(hi, len(ends))))
    if a >= b:
        return [i for i in range(lo, hi) if overlaps(eff[i], task_range)]
    out = [i for i in range(lo, a) if overlaps(eff[i], task_range)]
    out.extend(compress(range(a, b), islice(nonempty, a, b)))
    out.extend(i for i in range(b, hi) if overlaps(eff[i], task_range))
    return out
