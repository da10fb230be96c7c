"""Row streams compared window by window: identical streams are equal however each side
is cut; a value differing in one byte, a key on one side only, two rows swapped, an empty
side, are found at their first row with the right key and side; the figures count every
row and byte of each side."""

from __future__ import annotations

import random

import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from slatelib.core.rescale_check import RangeStats
from slatelib.core.rescale_rows import (
    DIFFERENT_VALUE,
    EXTRA,
    MISSING,
    RowDifference,
    RowWindow,
    compare_row_streams,
    key_hex,
)
from slatelib.errors import InvalidArgumentError

Rows = list[tuple[bytes, bytes]]


def _rows(n: int, seed: int = 1) -> Rows:
    rnd = random.Random(seed)
    keys = sorted({b"k%06d" % rnd.randrange(10 * n) + b"\x00" * rnd.randrange(3)
                   for _ in range(n)})
    return [(k, bytes(rnd.randrange(256) for _ in range(rnd.randrange(12)))) for k in keys]


def _cut(rows: Rows, cuts: list[int]) -> list[RowWindow]:
    """``rows`` cut before each index in ``cuts`` (repeated cuts: empty windows)."""
    bounds = [0, *cuts, len(rows)]
    return [(pa.array([k for k, _ in rows[a:b]], pa.binary()),
             pa.array([v for _, v in rows[a:b]], pa.binary()))
            for a, b in zip(bounds, bounds[1:], strict=False)]


def _random_cuts(rnd: random.Random, n: int) -> list[int]:
    return sorted(rnd.randrange(n + 1) for _ in range(rnd.randrange(12)))


def _stats(rows: Rows) -> RangeStats:
    return RangeStats(len(rows), sum(len(k) + len(v) for k, v in rows), 0)


def _first_difference(actual: Rows, expected: Rows) -> RowDifference | None:
    """The reference: a plain walk over both lists."""
    for i in range(max(len(actual), len(expected))):
        a = actual[i] if i < len(actual) else None
        e = expected[i] if i < len(expected) else None
        if a == e:
            continue
        if a is None:
            return RowDifference(i, MISSING, None, e[0] if e else None)
        if e is None:
            return RowDifference(i, EXTRA, a[0], None)
        kind = DIFFERENT_VALUE if a[0] == e[0] else EXTRA if a[0] < e[0] else MISSING
        return RowDifference(i, kind, a[0], e[0])
    return None


def test_identical_streams_are_equal_however_they_are_cut() -> None:
    rnd = random.Random(5)
    rows = _rows(500)
    for _ in range(200):
        got = compare_row_streams(_cut(rows, _random_cuts(rnd, len(rows))),
                                  _cut(rows, _random_cuts(rnd, len(rows))))
        assert got.equal and got.difference is None
        assert got.actual == got.expected == _stats(rows)


def _one_byte(rows: Rows, i: int) -> Rows:
    k, v = rows[i]
    return [*rows[:i], (k, v + b"\x00" if not v else v[:-1] + bytes([v[-1] ^ 0x80])),
            *rows[i + 1:]]


def _swapped(rows: Rows, i: int) -> Rows:
    return [*rows[:i], rows[i + 1], rows[i], *rows[i + 2:]]


def _dropped(rows: Rows, i: int) -> Rows:
    return rows[:i] + rows[i + 1:]


def _added(rows: Rows, i: int) -> Rows:
    """A second row of key ``i`` after it (no key sorts between ``k`` and ``k + 0x00``)."""
    return [*rows[:i + 1], (rows[i][0], b"extra"), *rows[i + 1:]]


@pytest.mark.parametrize(("change", "kind"), [
    (_one_byte, DIFFERENT_VALUE), (_swapped, MISSING), (_dropped, MISSING), (_added, EXTRA),
], ids=["value-one-byte", "two-rows-swapped", "key-only-in-expected", "key-only-in-actual"])
def test_the_first_difference_is_found_wherever_the_windows_are_cut(change: object,
                                                                   kind: str) -> None:
    """A change at a random row (``actual`` changed; ``expected`` as read), each side cut at
    random rows: the first difference is the reference's, and the figures are each side's."""
    assert callable(change)
    rnd = random.Random(9)
    rows = _rows(400)
    for _ in range(150):
        i = rnd.randrange(len(rows) - 1)
        changed = change(rows, i)
        got = compare_row_streams(_cut(changed, _random_cuts(rnd, len(changed))),
                                  _cut(rows, _random_cuts(rnd, len(rows))))
        want = _first_difference(changed, rows)
        assert want is not None and want.kind == kind
        assert got.difference == want and not got.equal
        assert (got.actual, got.expected) == (_stats(changed), _stats(rows))
        # and the other way round: what is extra on one side is missing on the other
        back = compare_row_streams(_cut(rows, [i]), _cut(changed, []))
        assert back.difference == _first_difference(rows, changed)


def test_a_value_differing_in_one_byte_names_its_key() -> None:
    rows = [(b"a", b"1"), (b"b", b"22"), (b"c", b"333")]
    got = compare_row_streams(_cut(rows, [1]), _cut(_one_byte(rows, 2), [2]))
    assert got.difference == RowDifference(2, DIFFERENT_VALUE, b"c", b"c")
    assert got.difference.key == b"c"
    assert got.difference.describe("outputs", "sources") == (
        "row 2, key 63: outputs and sources hold different values")
    assert got.difference.to_dict() == {"row": 2, "kind": DIFFERENT_VALUE, "key_hex": "63"}


def test_a_key_on_one_side_only_names_the_side() -> None:
    rows = [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    extra = compare_row_streams(_cut(rows, []), _cut(_dropped(rows, 1), []))
    assert extra.difference == RowDifference(1, EXTRA, b"b", b"c")
    assert extra.difference.describe("outputs", "sources") == (
        "row 1, key 62: in outputs, not in sources (sources hold 63 there)")
    missing = compare_row_streams(_cut(_dropped(rows, 1), []), _cut(rows, []))
    assert missing.difference == RowDifference(1, MISSING, b"c", b"b")
    assert missing.difference.describe("outputs", "sources") == (
        "row 1, key 62: in sources, missing from outputs (outputs hold 63 there)")
    tail = compare_row_streams(_cut(rows[:2], []), _cut(rows, [2]))
    assert tail.difference == RowDifference(2, MISSING, None, b"c")
    assert tail.difference.describe() == "row 2, key 63: in expected, missing from actual"
    more = compare_row_streams(_cut(rows, [1, 2]), _cut(rows[:2], []))
    assert more.difference == RowDifference(2, EXTRA, b"c", None)


def test_two_rows_swapped_are_a_difference() -> None:
    rows = [(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"d", b"4")]
    got = compare_row_streams(_cut(_swapped(rows, 1), [2]), _cut(rows, [1, 3]))
    assert got.difference == RowDifference(1, MISSING, b"c", b"b")
    assert got.actual == got.expected  # the same rows, in another order


def test_empty_streams_and_empty_windows() -> None:
    rows = [(b"a", b""), (b"b", b"")]
    assert compare_row_streams([], []).equal
    assert compare_row_streams(_cut([], [0, 0]), []).actual == RangeStats()
    assert compare_row_streams(_cut(rows, [0, 0, 1, 1, 2]), _cut(rows, [])).equal
    assert compare_row_streams([], _cut(rows, [])).difference == RowDifference(
        0, MISSING, None, b"a")
    got = compare_row_streams(_cut(rows, [1]), _cut([], [0]))
    assert got.difference == RowDifference(0, EXTRA, b"a", None)
    assert got.actual == RangeStats(2, 2, 0) and got.expected == RangeStats()
    # an empty value and an empty key differ from a missing one
    assert not compare_row_streams(_cut([(b"a", b"")], []), _cut([(b"a", b"\x00")], [])).equal


def test_keys_and_values_are_not_confused_across_their_boundary() -> None:
    """``ab`` + ``c`` is not ``a`` + ``bc``: the lengths are compared, not only the bytes."""
    assert not compare_row_streams(_cut([(b"ab", b"c")], []), _cut([(b"a", b"bc")], [])).equal
    got = compare_row_streams(_cut([(b"a", b"bc"), (b"d", b"")], []),
                              _cut([(b"a", b"b"), (b"d", b"c")], []))
    assert got.difference == RowDifference(0, DIFFERENT_VALUE, b"a", b"a")


def test_malformed_windows_are_refused() -> None:
    keys = pa.array([b"a", b"b"], pa.binary())
    with pytest.raises(InvalidArgumentError, match="actual row window: 2 keys"):
        compare_row_streams([(keys, pa.array([b"1"], pa.binary()))], [])
    with pytest.raises(InvalidArgumentError, match="expected row window"):
        compare_row_streams([], [(keys, pa.array(["1", "2"], pa.string()))])


def test_long_keys_are_shown_truncated() -> None:
    assert key_hex(b"\x01\xff") == "01ff"
    assert key_hex(bytes(range(40)), 4) == "00010203... (40 bytes)"
    diff = RowDifference(0, EXTRA, b"x" * 100, None)
    assert diff.describe().startswith(f"row 0, key {'78' * 32}... (100 bytes): in actual")
