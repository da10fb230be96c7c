"""K-way merge of sorted row streams in *windows* (lists of rows), not row by row. Pure.

Each source is an iterator of row lists (decoded blocks) in storage order: key ascending
and, within a key, seq descending. :func:`merge_windows` buffers about ``fill_rows`` rows per
source, then emits every buffered row whose key is below the smallest "last buffered key"
of the sources that still have data: those keys cannot appear in any later block, so the
window holds every version of each of its keys. Within a window, rows are ordered by key
with a stable sort of the sources' rows taken newest source first (C-level Timsort, which
merges the k presorted runs in O(n log k)); versions of a key that several sources hold are
put in seq order by :func:`slatelib.core.retention.retain_window`.

Memory is bounded by ``fill_rows`` (plus one block) per source and one window.

This is the pure-Python reference of compaction's merge; with ``slatelib._speedups`` built,
compaction uses :func:`slatelib.format.native_merge.retained_batches`, which returns the same
rows and counters (tests/unit/format/test_native_merge.py).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from operator import itemgetter

from slatelib.core.row import Row

DEFAULT_FILL_ROWS = 8192

_key = itemgetter(0)


class _Cursor:
    __slots__ = ("blocks", "buf", "done")

    def __init__(self, blocks: Iterator[list[Row]]) -> None:
        self.blocks = blocks
        self.buf: list[Row] = []
        self.done = False

    def pull(self) -> bool:
        """Append the next non-empty block; False when the source is exhausted."""
        for block in self.blocks:
            if block:
                if self.buf:
                    self.buf.extend(block)
                else:
                    self.buf = list(block)
                return True
        self.done = True
        return False

    def fill(self, target: int) -> None:
        while not self.done and len(self.buf) < target:
            self.pull()


def merge_windows(
    sources: Sequence[Iterable[list[Row]]], *, fill_rows: int = DEFAULT_FILL_ROWS
) -> Iterator[list[Row]]:
    """Windows of merged rows from ``sources`` (newest source first); see the module doc."""
    cursors = [_Cursor(iter(s)) for s in sources]
    target = max(1, fill_rows)
    while True:
        for c in cursors:
            if len(c.buf) < target:
                c.fill(target)
        live = [c for c in cursors if c.buf]
        if not live:
            return
        pending = [c for c in live if not c.done]
        bound = min(c.buf[-1][0] for c in pending) if pending else None
        parts: list[list[Row]] = []
        for c in live:
            buf = c.buf
            if bound is None or buf[-1][0] < bound:
                cut = len(buf)
            else:
                cut = bisect_left(buf, bound, key=_key)
            if cut == len(buf):
                parts.append(buf)
                c.buf = []
            elif cut:
                parts.append(buf[:cut])
                c.buf = buf[cut:]
        if not parts:
            # Every buffered row has the bound key: some source holds more versions of it
            # in blocks not read yet. Read on until the key ends or the source does.
            for c in pending:
                if c.buf[-1][0] == bound:
                    c.pull()
            continue
        if len(parts) == 1:
            yield parts[0]
        else:
            window = list(chain.from_iterable(parts))
            window.sort(key=_key)
            yield window
