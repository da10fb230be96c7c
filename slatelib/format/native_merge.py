"""K-way merges of sorted row sources: native (the ``Pipe`` of ``slatelib/csrc/pipe.h``) or
the Python reference.

Pure. A *source* is an iterable of blocks, lists of rows in storage order (key ascending,
seq descending), and sources are given newest first. Three merges, each with a native engine
(one C loop over a heap of cursors, one Python call per output batch: the native pipeline's
``Pipe`` over Python rows, :mod:`slatelib.format.native_pipe`) and the pure-Python reference
it must equal (``tests/unit/format/test_native_merge.py`` diffs the two on random inputs;
``tests/unit/core/test_retention.py`` runs the merge matrix on both):

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

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain

from slatelib.core.merge import MergeOperator, merge_sources, resolve_rows
from slatelib.core.retention import RetentionPolicy, RetentionStats, retain_window
from slatelib.core.row import Row
from slatelib.core.window_merge import DEFAULT_FILL_ROWS, merge_windows
from slatelib.format import native_pipe
from slatelib.format.native_pipe import SCAN_BATCH, RetainPipe, drain, scan_pairs

Source = Iterable[list[Row]]

ROWS_BATCH = 4096
"""Rows per native batch of :func:`merged_rows`."""

HAVE_NATIVE_MERGE: bool = native_pipe.HAVE_NATIVE_PIPE
"""The native engine (the pipeline's ``Pipe``) is built and enabled."""


def merged_rows(sources: Sequence[Source], *, use_native: bool = True) -> Iterator[Row]:
    """Every row of ``sources`` in key-ascending, seq-descending order (ties: newest source
    first).

    Raises:
        CorruptObjectError: (native) a source is out of order or holds a malformed row.
    """
    ext = native_pipe.engine(use_native)
    if ext is None:
        return merge_sources([chain.from_iterable(s) for s in sources])
    pipe = ext.Pipe(sources, ext.PIPE_ROWS)
    return chain.from_iterable(drain(pipe, ext, ROWS_BATCH))


def resolved_pairs(
    sources: Sequence[Source], merge_operator: MergeOperator | None, *,
    batch: int = SCAN_BATCH, use_native: bool = True,
) -> Iterator[tuple[bytes, bytes]]:
    """Visible ``(key, value)`` pairs in key order; deleted keys are skipped.

    Raises:
        MergeOperatorMissingError: a key has merge operands and no operator is set.
        CorruptObjectError: (native) a source is out of order or holds a malformed row.
    """
    if native_pipe.engine(use_native) is None:
        return resolve_rows(merge_sources([chain.from_iterable(s) for s in sources]),
                            merge_operator)
    return scan_pairs(sources, merge_operator, batch=batch)


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
    if native_pipe.engine(use_native) is None:
        return _retained_py(sources, policy, stats, fill_rows)
    return _retained_native(sources, policy, stats, fill_rows)


def _retained_py(sources: Sequence[Source], policy: RetentionPolicy, stats: RetentionStats,
                 fill_rows: int) -> Iterator[list[Row]]:
    for window in merge_windows(sources, fill_rows=fill_rows):
        kept = retain_window(window, policy, stats)
        if kept:
            yield kept


def _retained_native(sources: Sequence[Source], policy: RetentionPolicy,
                     stats: RetentionStats, fill_rows: int) -> Iterator[list[Row]]:
    pipe = RetainPipe(sources, policy, stats)  # counts into ``stats`` after every call
    limit = max(1, fill_rows)
    while True:
        batch = pipe.rows(limit)
        if not batch:
            return
        yield batch


__all__ = ["HAVE_NATIVE_MERGE", "ROWS_BATCH", "SCAN_BATCH", "Source", "merged_rows",
           "resolved_pairs", "retained_batches"]
