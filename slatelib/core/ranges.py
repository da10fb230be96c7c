"""Byte-key ranges (the manifest's ``BytesRange``) and operations on them. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from slatelib.core.humanize import fmt_key
from slatelib.errors import InvalidArgumentError


class BoundKind(IntEnum):
    """``BoundType`` of the flatbuffer schema."""

    UNKNOWN = 0
    UNBOUNDED = 1
    INCLUDED = 2
    EXCLUDED = 3


@dataclass(frozen=True, slots=True)
class Bound:
    kind: BoundKind
    key: bytes | None = None

    def __post_init__(self) -> None:
        if self.kind == BoundKind.UNBOUNDED:
            if self.key is not None:
                raise InvalidArgumentError("an unbounded bound has no key")
        elif self.kind in (BoundKind.INCLUDED, BoundKind.EXCLUDED):
            if self.key is None:
                raise InvalidArgumentError(f"a {self.kind.name.lower()} bound needs a key")
        else:
            raise InvalidArgumentError(f"invalid bound kind {self.kind!r}")

    @staticmethod
    def unbounded() -> Bound:
        return Bound(BoundKind.UNBOUNDED)

    @staticmethod
    def included(key: bytes) -> Bound:
        """Raises:
        InvalidArgumentError: ``key`` is None."""
        return _keyed(BoundKind.INCLUDED, key)

    @staticmethod
    def excluded(key: bytes) -> Bound:
        """Raises:
        InvalidArgumentError: ``key`` is None."""
        return _keyed(BoundKind.EXCLUDED, key)


_SET_KIND = Bound.__dict__["kind"].__set__
_SET_KEY = Bound.__dict__["key"].__set__


def _keyed(kind: BoundKind, key: bytes) -> Bound:
    """``Bound(kind, key)`` for INCLUDED/EXCLUDED without the dataclass machinery (a large
    manifest's planning builds two bounds per SST); the same check as ``__post_init__``.

    Raises:
        InvalidArgumentError: ``key`` is None.
    """
    if key is None:
        raise InvalidArgumentError(f"a {kind.name.lower()} bound needs a key")
    b = object.__new__(Bound)
    _SET_KIND(b, kind)
    _SET_KEY(b, key)
    return b


keyed_bound = _keyed
"""Public name of :func:`_keyed` (``keyed_bound(BoundKind.INCLUDED, key)``) for hot loops."""


UNBOUNDED = Bound(BoundKind.UNBOUNDED)


@dataclass(frozen=True, slots=True)
class BytesRange:
    """A key range. ``start`` is unbounded, included or excluded; likewise ``end``."""

    start: Bound = UNBOUNDED
    end: Bound = UNBOUNDED

    @staticmethod
    def all() -> BytesRange:
        return BytesRange(UNBOUNDED, UNBOUNDED)

    @staticmethod
    def half_open(start: bytes | None, end: bytes | None) -> BytesRange:
        """``[start, end)`` with None meaning unbounded."""
        return BytesRange(
            UNBOUNDED if start is None else Bound.included(start),
            UNBOUNDED if end is None else Bound.excluded(end),
        )

    def contains(self, key: bytes) -> bool:
        s = self.start
        if s.kind == BoundKind.INCLUDED:
            if key < s.key:  # type: ignore[operator]
                return False
        elif s.kind == BoundKind.EXCLUDED:
            if key <= s.key:  # type: ignore[operator]
                return False
        e = self.end
        if e.kind == BoundKind.EXCLUDED:
            return key < e.key  # type: ignore[operator]
        if e.kind == BoundKind.INCLUDED:
            return key <= e.key  # type: ignore[operator]
        return True

    def below_start(self, key: bytes) -> bool:
        """True when ``key`` sorts before every key of the range."""
        s = self.start
        if s.kind == BoundKind.INCLUDED:
            return key < s.key  # type: ignore[operator]
        if s.kind == BoundKind.EXCLUDED:
            return key <= s.key  # type: ignore[operator]
        return False

    def above_end(self, key: bytes) -> bool:
        """True when ``key`` sorts after every key of the range."""
        e = self.end
        if e.kind == BoundKind.EXCLUDED:
            return key >= e.key  # type: ignore[operator]
        if e.kind == BoundKind.INCLUDED:
            return key > e.key  # type: ignore[operator]
        return False

    def is_empty(self) -> bool:
        s, e = self.start, self.end
        if s.kind == BoundKind.UNBOUNDED or e.kind == BoundKind.UNBOUNDED:
            return False
        assert s.key is not None and e.key is not None
        if s.kind == BoundKind.INCLUDED and e.kind == BoundKind.INCLUDED:
            return s.key > e.key
        if s.kind == BoundKind.EXCLUDED and e.kind == BoundKind.EXCLUDED:
            # (a, b) is empty when no key lies strictly between: b <= a or b == a + b"\x00"
            return e.key <= s.key or e.key == s.key + b"\x00"
        if s.kind == BoundKind.EXCLUDED:
            return e.key <= s.key
        return e.key <= s.key

    def intersect(self, other: BytesRange) -> BytesRange:
        return BytesRange(_max_start(self.start, other.start), _min_end(self.end, other.end))

    def start_key(self) -> bytes | None:
        """Smallest key that may be in the range when the start is inclusive (or None)."""
        return self.start.key

    def __str__(self) -> str:
        """``[user:00100, user:00200)``: keys as :func:`~slatelib.core.humanize.fmt_key`
        shows them, ``-inf``/``+inf`` for unbounded ends."""
        s = self.start
        e = self.end
        left = "(-inf" if s.kind == BoundKind.UNBOUNDED else (
            f"[{fmt_key(s.key)}" if s.kind == BoundKind.INCLUDED else f"({fmt_key(s.key)}")
        right = "+inf)" if e.kind == BoundKind.UNBOUNDED else (
            f"{fmt_key(e.key)}]" if e.kind == BoundKind.INCLUDED else f"{fmt_key(e.key)})")
        return f"{left}, {right}"


_SET_START = BytesRange.__dict__["start"].__set__
_SET_END = BytesRange.__dict__["end"].__set__


def span(start: Bound, end: Bound) -> BytesRange:
    """``BytesRange(start, end)`` without the dataclass ``__init__`` (planning builds one
    per SST of a large manifest)."""
    r = object.__new__(BytesRange)
    _SET_START(r, start)
    _SET_END(r, end)
    return r


def _max_start(a: Bound, b: Bound) -> Bound:
    if a.kind == BoundKind.UNBOUNDED:
        return b
    if b.kind == BoundKind.UNBOUNDED:
        return a
    assert a.key is not None and b.key is not None
    if a.key != b.key:
        return a if a.key > b.key else b
    return a if a.kind == BoundKind.EXCLUDED else b


def _min_end(a: Bound, b: Bound) -> Bound:
    if a.kind == BoundKind.UNBOUNDED:
        return b
    if b.kind == BoundKind.UNBOUNDED:
        return a
    assert a.key is not None and b.key is not None
    if a.key != b.key:
        return a if a.key < b.key else b
    return a if a.kind == BoundKind.EXCLUDED else b
