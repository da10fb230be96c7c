"""K-way merges of sorted row sources: native (``slatelib/_merge.c``) or the Python reference.

Pure. A *source* is an iterable of blocks, lists of rows in storage order (key ascending,
seq descending), and sources are given newest first. Three merges, each with a native engine
(one C loop over a heap of cursors, one Python call per block and per output batch) and the
pure-Python reference it must equal (``tests/unit/format/test_native_merge.py`` diffs the two
on random inputs; ``tests/unit/core/test_retention.py`` runs the merge matrix on both):

- :func:`merged_rows`: every row, merged (reference: ``heapq.merge`` in
  :func:`slatelib.core.merge.merge_sources`);
- :func:`resolved_pairs`: the visible ``(key, value)`` pairs, as a scan returns them
  (reference: :func:`slatelib.core.merge.resolve_rows`);
- :func:`retained_batches`: the rows a compaction keeps under 0.17's retention (reference:
  :func:`slatelib.core.window_merge.merge_windows`, then
  :func:`slatelib.core.retention.retain_window` on each window), in batches that each end
  at a key boundary.

Keys whose merge operands need the merge operator (Python) are handed back to the reference
code for that key only: ``resolve_versions`` when the newest version is an operand,
``retain_versions`` for a key with any operand when an operator is configured.

The native engine checks what the reference assumes: a row that sorts before its
predecessor in the same source, or a malformed row, raises
:class:`~slatelib.errors.CorruptObjectError` (the reference would misorder silently).
``native=False``, an unbuilt extension or ``SLATELIB_NO_NATIVE=1`` selects the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

from slatelib.core.merge import MergeOperator, merge_sources, resolve_rows, resolve_versions
from slatelib.core.retention import (
    RetentionPolicy,
    RetentionStats,
    retain_versions,
    retain_window,
)
from slatelib.core.row import Row
from slatelib.core.window_merge import DEFAULT_FILL_ROWS, merge_windows
from slatelib.errors import CorruptObjectError
from slatelib.format import native

Source = Iterable[list[Row]]

SCAN_BATCH = 1024
"""Pairs per native batch of a scan (bounds what a scan holds beyond one block per source)."""

HAVE_NATIVE_MERGE: bool = native.merge is not None


def _engine(use_native: bool) -> native.MergeModule | None:
    return native.merge if use_native else None


def _run(merger: native.Merger, ext: native.MergeModule) -> Iterator[list[Any]]:
    """Batches of ``merger``; its input errors become :class:`CorruptObjectError`."""
    while True:
        try:
            batch = next(merger)
        except StopIteration:
            return
        except ext.MergeInputError as exc:
            raise CorruptObjectError(f"merging sorted sources: {exc}") from exc
        yield batch


def merged_rows(sources: Sequence[Source], *, use_native: bool = True) -> Iterator[Row]:
    """Every row of ``sources`` in key-ascending, seq-descending order (ties: newest source
    first).

    Raises:
        CorruptObjectError: (native) a source is out of order or holds a malformed row.
    """
    ext = _engine(use_native)
    if ext is None:
        return merge_sources([chain.from_iterable(s) for s in sources])
    return chain.from_iterable(_run(ext.Merger(sources, ext.MODE_ROWS), ext))


def resolved_pairs(
    sources: Sequence[Source], merge_operator: MergeOperator | None, *,
    batch: int = SCAN_BATCH, use_native: bool = True,
) -> Iterator[tuple[bytes, bytes]]:
    """Visible ``(key, value)`` pairs in key order; deleted keys are skipped.

    Raises:
        MergeOperatorMissingError: a key has merge operands and no operator is set.
        CorruptObjectError: (native) a source is out of order or holds a malformed row.
    """
    ext = _engine(use_native)
    if ext is None:
        return resolve_rows(merge_sources([chain.from_iterable(s) for s in sources]),
                            merge_operator)

    def fold(key: bytes, versions: list[Row]) -> bytes | None:
        return resolve_versions(key, versions, merge_operator)

    merger = ext.Merger(sources, ext.MODE_RESOLVE, fold=fold, batch=batch)
    return chain.from_iterable(_run(merger, ext))


def retained_batches(
    sources: Sequence[Source], policy: RetentionPolicy, stats: RetentionStats, *,
    fill_rows: int = DEFAULT_FILL_ROWS, use_native: bool = True,
) -> Iterator[list[Row]]:
    """Non-empty lists of the rows a compaction writes out, in storage order; a key's
    versions never straddle two lists. ``stats`` is updated as batches are produced.

    Raises:
        CorruptObjectError: (native) a source is out of order or holds a malformed row.
        Exception: whatever the merge operator raises.
    """
    ext = _engine(use_native)
    if ext is None:
        return _retained_py(sources, policy, stats, fill_rows)
    return _retained_native(ext, sources, policy, stats, fill_rows)


def _retained_py(sources: Sequence[Source], policy: RetentionPolicy, stats: RetentionStats,
                 fill_rows: int) -> Iterator[list[Row]]:
    for window in merge_windows(sources, fill_rows=fill_rows):
        kept = retain_window(window, policy, stats)
        if kept:
            yield kept


def _retained_native(ext: native.MergeModule, sources: Sequence[Source],
                     policy: RetentionPolicy, stats: RetentionStats,
                     fill_rows: int) -> Iterator[list[Row]]:
    fold: Callable[[list[Row]], list[Row]] | None = None
    if policy.merge_operator is not None:
        def fold(versions: list[Row]) -> list[Row]:
            return retain_versions(versions, policy, stats)

    merger = ext.Merger(sources, ext.MODE_RETAIN, fold=fold, min_seq=policy.min_seq,
                        bottom=policy.bottom, clock_tick=policy.clock_tick,
                        batch=max(1, fill_rows))
    counted = (0, 0, 0, 0, 0, 0)
    try:
        for batch in _run(merger, ext):
            counted = _add_stats(stats, merger.stats, counted)
            if batch:
                yield batch
    finally:
        _add_stats(stats, merger.stats, counted)


def _add_stats(stats: RetentionStats, now: tuple[int, int, int, int, int, int],
               before: tuple[int, int, int, int, int, int]) -> tuple[int, int, int, int, int, int]:
    """Add the native counters' growth since ``before`` to ``stats``; returns ``now``."""
    d = [a - b for a, b in zip(now, before, strict=True)]
    stats.rows_in += d[0]
    stats.rows_out += d[1]
    stats.versions_dropped += d[2]
    stats.tombstones_dropped += d[3]
    stats.expired_to_tombstone += d[4]
    stats.expired_merges_dropped += d[5]
    return now
