"""Key ranges: containment, intersection, emptiness, bound validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slatelib.core.ranges import Bound, BoundKind, BytesRange
from slatelib.errors import InvalidArgumentError


def test_half_open_contains() -> None:
    r = BytesRange.half_open(b"key:0010", b"key:0040")
    assert r.contains(b"key:0010") and r.contains(b"key:0039")
    assert not r.contains(b"key:0040") and not r.contains(b"key:0009")


def test_unbounded_has_no_key_and_included_needs_one() -> None:
    with pytest.raises(InvalidArgumentError):
        Bound(BoundKind.UNBOUNDED, b"x")
    with pytest.raises(InvalidArgumentError):
        Bound(BoundKind.INCLUDED, None)
    assert Bound.included(b"").key == b""


def test_empty_ranges() -> None:
    assert BytesRange.half_open(b"b", b"a").is_empty()
    assert BytesRange.half_open(b"a", b"a").is_empty()
    assert not BytesRange(Bound.included(b"a"), Bound.included(b"a")).is_empty()
    assert BytesRange(Bound.excluded(b"a"), Bound.excluded(b"a\x00")).is_empty()
    assert not BytesRange.all().is_empty()


keys = st.binary(max_size=4)
bounds = st.one_of(st.just(Bound.unbounded()), keys.map(Bound.included), keys.map(Bound.excluded))


@given(bounds, bounds, bounds, bounds, keys)
def test_intersection_contains_exactly_common_keys(a, b, c, d, key) -> None:  # type: ignore[no-untyped-def]
    r1, r2 = BytesRange(a, b), BytesRange(c, d)
    assert r1.intersect(r2).contains(key) == (r1.contains(key) and r2.contains(key))


@given(bounds, bounds, keys)
def test_empty_range_contains_nothing(a, b, key) -> None:  # type: ignore[no-untyped-def]
    r = BytesRange(a, b)
    if r.is_empty():
        assert not r.contains(key)
