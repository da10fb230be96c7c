"""The visible row of each key in a merged window of rows, as ``DbReader`` resolves it.

Pure. A *window* is a list of rows sorted by key that holds every version of each of its
keys (:func:`slatelib.core.window_merge.merge_windows`); versions of one key may come from
several sources in any seq order. Per key the newest version by sequence number wins
(format §10): a value is visible, a tombstone hides the key, merge operands are folded with
the merge operator down to the newest value or tombstone
(:func:`slatelib.core.merge.resolve_versions`, which raises ``MergeOperatorMissingError``
without one). TTL is not applied at read time, as ``DbReader`` does not.

A visible row keeps the row layout ``(key, seq, kind, value, expire_ts, create_ts)`` (see
:mod:`slatelib.core.row`) so that a window of plain values passes through without a copy:
``kind`` is always ``VALUE``, and the sequence number and timestamps are those of the key's
newest version (for a folded merge, of its newest operand).
"""

from __future__ import annotations

from itertools import groupby
from operator import eq, itemgetter

from slatelib.core.merge import MergeOperator, resolve_versions
from slatelib.core.row import MERGE, VALUE, Row

VisibleRow = Row
"""A row whose ``kind`` is ``VALUE``: the visible state of its key."""

_key = itemgetter(0)
_kind = itemgetter(2)


def _neg_seq(row: Row) -> int:
    return -row[1]


def resolve_window(rows: list[Row], merge_operator: MergeOperator | None) -> list[VisibleRow]:
    """The visible rows of ``rows`` (a window, see the module docstring), in key order.

    Raises:
        MergeOperatorMissingError: a key's visible state needs a merge and there is no
            operator.
    """
    if not rows:
        return []
    keys = list(map(_key, rows))
    if not any(map(eq, keys, keys[1:])) and set(map(_kind, rows)) == {VALUE}:
        return rows  # one plain value per key (the common case): no copy
    out: list[VisibleRow] = []
    append = out.append
    for key, group in groupby(rows, key=_key):
        versions = list(group)
        if len(versions) > 1:
            versions.sort(key=_neg_seq)
        head = versions[0]
        kind = head[2]
        if kind == VALUE:
            append(head)
        elif kind == MERGE:
            value = resolve_versions(key, versions, merge_operator)
            if value is not None:
                append((key, head[1], VALUE, value, head[4], head[5]))
    return out
