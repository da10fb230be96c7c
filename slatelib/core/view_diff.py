"""The key-level difference between two views of a database (two checkpoints). Pure.

Both inputs are streams of rows ``(key, ...)`` in strictly ascending key order, one row per
visible key (what a scan returns). The difference from ``old`` to ``new`` is, in key order:
an *upsert* of every key whose row is new or changed, and a *delete* of every key that is
in ``old`` but not in ``new``. Applying it to a table holding ``old`` gives ``new`` exactly,
whatever happened in between (overwrites, deletes, merges, compactions, expired values
rewritten as tombstones): only the two views are compared, never the history.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

UPSERT = "upsert"
DELETE = "delete"

R = TypeVar("R", bound=tuple)  # type: ignore[type-arg]


def diff_views(old: Iterable[R], new: Iterable[R]) -> Iterator[tuple[str, R]]:
    """``(UPSERT, new row)`` / ``(DELETE, old row)`` for every key that differs, in key
    order (see the module docstring). Rows compare whole: a changed sequence number counts
    when the rows carry one."""
    it_old, it_new = iter(old), iter(new)
    o = next(it_old, None)
    n = next(it_new, None)
    while o is not None or n is not None:
        if n is None or (o is not None and o[0] < n[0]):
            assert o is not None
            yield DELETE, o
            o = next(it_old, None)
        elif o is None or n[0] < o[0]:
            yield UPSERT, n
            n = next(it_new, None)
        else:
            if o != n:
                yield UPSERT, n
            o = next(it_old, None)
            n = next(it_new, None)
