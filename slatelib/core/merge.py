"""Merging sources of rows and resolving the visible value of a key (format §10). Pure.

Sources are iterators of rows in compacted order (key ascending, seq descending). The
newest version of a key decides its value: a value (with any newer merge operands applied
on top, oldest first), a tombstone (deleted, unless newer operands fold onto "no value"),
or only merge operands (folded onto "no value"). TTL is not applied at read time, exactly
as in 0.17.0.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Protocol, runtime_checkable

from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.errors import InvalidArgumentError, MergeOperatorMissingError

_key_of = itemgetter(0)


@runtime_checkable
class MergeOperator(Protocol):
    """Folds one operand onto an existing value (None when there is none)."""

    def merge(self, key: bytes, existing: bytes | None, operand: bytes) -> bytes: ...


class ConcatMergeOperator:
    """``existing (or b"") + operand``: the operator the golden ``ttl_merge`` fixture uses."""

    name = "concat"

    def merge(self, key: bytes, existing: bytes | None, operand: bytes) -> bytes:
        return (existing or b"") + operand


class _FnMergeOperator:
    def __init__(self, fn: Callable[[bytes, bytes | None, bytes], bytes]) -> None:
        self._fn = fn

    def merge(self, key: bytes, existing: bytes | None, operand: bytes) -> bytes:
        return self._fn(key, existing, operand)


BUILTIN_MERGE_OPERATORS: dict[str, Callable[[], MergeOperator]] = {
    "concat": ConcatMergeOperator,
}


def as_merge_operator(obj: object) -> MergeOperator | None:
    """Accept None, a MergeOperator, a plain ``f(key, existing, operand)`` or a builtin name.

    Raises:
        InvalidArgumentError: an unknown name or an unusable object.
    """
    if obj is None:
        return None
    if isinstance(obj, str):
        factory = BUILTIN_MERGE_OPERATORS.get(obj)
        if factory is None:
            raise InvalidArgumentError(
                f"unknown merge operator {obj!r}; builtins: {sorted(BUILTIN_MERGE_OPERATORS)}"
            )
        return factory()
    if isinstance(obj, MergeOperator):
        return obj
    if callable(obj):
        return _FnMergeOperator(obj)
    raise InvalidArgumentError(f"not a merge operator: {obj!r}")


def sort_key(row: Row) -> tuple[bytes, int]:
    return (row[0], -row[1])


def merge_sources(sources: Sequence[Iterable[Row]]) -> Iterator[Row]:
    """K-way merge of sorted sources into key-ascending, seq-descending order."""
    if not sources:
        return iter(())
    if len(sources) == 1:
        return iter(sources[0])
    return heapq.merge(*sources, key=sort_key)


def fold_operands(
    key: bytes, base: bytes | None, operands_newest_first: Sequence[bytes],
    merge_operator: MergeOperator | None,
) -> bytes:
    """Apply operands (given newest first) oldest first onto ``base``.

    Raises:
        MergeOperatorMissingError: operands exist and no operator is configured.
    """
    if merge_operator is None:
        raise MergeOperatorMissingError(key)
    value = base
    for operand in reversed(operands_newest_first):
        value = merge_operator.merge(key, value, operand)
    assert value is not None
    return value


def resolve_versions(
    key: bytes, versions: Iterable[Row], merge_operator: MergeOperator | None
) -> bytes | None:
    """The visible value of ``key`` from its versions in seq-descending order."""
    operands: list[bytes] = []
    for row in versions:
        kind = row[2]
        if kind == VALUE:
            if not operands:
                return row[3]
            return fold_operands(key, row[3], operands, merge_operator)
        if kind == TOMBSTONE:
            break
        operands.append(row[3])
    if operands:
        return fold_operands(key, None, operands, merge_operator)
    return None


def resolve_rows(
    merged: Iterable[Row], merge_operator: MergeOperator | None = None
) -> Iterator[tuple[bytes, bytes]]:
    """Visible ``(key, value)`` pairs of a merged row stream; deleted keys are skipped."""
    for key, group in groupby(merged, key=_key_of):
        first = next(group)
        kind = first[2]
        if kind == VALUE:
            yield key, first[3]
        elif kind == MERGE:
            # the group is consumed once: its head above, the rest here
            value = resolve_versions(key, _chain_first(first, group), merge_operator)  # noqa: B031
            if value is not None:
                yield key, value


def _chain_first(first: Row, rest: Iterator[Row]) -> Iterator[Row]:
    yield first
    yield from rest


