"""Byte ranges of one object: validation, coalescing into spans, slicing results out.

Pure functions; :class:`~slatelib.objstore.obstore_store.ObstoreObjectStore` fetches the
spans and hands the buffers back to :func:`slice_spans`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence

from slatelib.errors import InvalidArgumentError

ByteRange = tuple[int, int]
"""Half-open ``[start, end)`` byte offsets."""


def check_ranges(ranges: Iterable[ByteRange]) -> list[ByteRange]:
    """Validate byte ranges and return them as a list.

    Raises:
        InvalidArgumentError: a range is not a pair of ints with ``0 <= start <= end``.
    """
    out: list[ByteRange] = []
    for rng in ranges:
        try:
            start, end = rng
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"byte range must be a (start, end) pair: {rng!r}") from None
        if type(start) is not int or type(end) is not int or start < 0 or end < start:
            raise InvalidArgumentError(f"invalid byte range [{start!r}, {end!r})")
        out.append((start, end))
    return out


def clamp_ranges(ranges: Sequence[ByteRange], size: int) -> list[ByteRange]:
    """Ranges cut at ``size`` (a range starting at or past it becomes empty)."""
    return [(start, max(start, min(end, size))) for start, end in ranges]


def plan_spans(ranges: Sequence[ByteRange], coalesce: int) -> list[ByteRange]:
    """Sorted, disjoint spans covering every non-empty range; ranges at most ``coalesce``
    bytes apart share a span (so a span never starts within ``coalesce`` of another)."""
    spans: list[ByteRange] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if spans and start <= spans[-1][1] + coalesce:
            if end > spans[-1][1]:
                spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def slice_spans(
    ranges: Sequence[ByteRange], spans: Sequence[ByteRange], buffers: Sequence[memoryview],
    *, copy: bool = True,
) -> list[bytes]:
    """The bytes of each range, cut out of the fetched ``buffers`` (one per span). A buffer
    shorter than its span (the object ended) gives short or empty results. ``copy=False``
    gives read-only memoryviews into the buffers instead (no copy; typed as bytes-like)."""
    starts = [start for start, _ in spans]
    out: list[bytes] = []
    for start, end in ranges:
        if end <= start:
            out.append(b"")
            continue
        i = bisect_right(starts, start) - 1
        part = buffers[i][start - starts[i] : end - starts[i]]
        out.append(part.tobytes() if copy else part)  # type: ignore[arg-type]
    return out
