"""Key-range conditions (pushed-down filters on the ``key`` column) as one key range. Pure.

A condition is ``(op, key)`` with ``op`` one of ``=``, ``>``, ``>=``, ``<``, ``<=`` and
``prefix`` (keys starting with ``key``). Conditions are ANDed, so their ranges intersect;
the result is exact: a key is in the range exactly when it satisfies every condition, so
the caller need not evaluate them again. Keys compare as unsigned bytes, which is also the
order of UTF-8 text by code point (Spark's string order).
"""

from __future__ import annotations

from collections.abc import Iterable

from slatelib.core.ranges import UNBOUNDED, Bound, BytesRange
from slatelib.errors import InvalidArgumentError

OPS = ("=", ">", ">=", "<", "<=", "prefix")


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key above every key starting with ``prefix`` (None: no such key, the
    prefix is empty or all ``0xff``)."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)


def condition_range(op: str, key: bytes) -> BytesRange:
    """The keys satisfying one condition.

    Raises:
        InvalidArgumentError: an unknown operator.
    """
    if op == "=":
        return BytesRange(Bound.included(key), Bound.included(key))
    if op == ">":
        return BytesRange(Bound.excluded(key), UNBOUNDED)
    if op == ">=":
        return BytesRange(Bound.included(key), UNBOUNDED)
    if op == "<":
        return BytesRange(UNBOUNDED, Bound.excluded(key))
    if op == "<=":
        return BytesRange(UNBOUNDED, Bound.included(key))
    if op == "prefix":
        end = prefix_end(key)
        return BytesRange(Bound.included(key), UNBOUNDED if end is None else Bound.excluded(end))
    raise InvalidArgumentError(f"unknown key condition {op!r}; expected one of {OPS}")


def conditions_range(conditions: Iterable[tuple[str, bytes]],
                     base: BytesRange | None = None) -> BytesRange:
    """The intersection of ``base`` (default: every key) and every condition's range.

    Raises:
        InvalidArgumentError: an unknown operator.
    """
    out = base or BytesRange.all()
    for op, key in conditions:
        out = out.intersect(condition_range(op, key))
    return out
