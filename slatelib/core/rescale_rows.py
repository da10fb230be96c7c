"""Comparing two streams of resolved rows for exact equality, window by window. Pure.

The rescale check in the compaction tasks (docs/rfcs/0016-rescale-check-in-tasks.md) reads
a task's outputs back and its parts at the checkpoint over exactly the same keys, both in
key order: there the two row streams must be identical, keys and values byte for byte and
in the same order, which is stronger than equal digests and cheaper than hashing every row.

Each stream is an iterable of :data:`RowWindow` values (the keys and the values of
consecutive rows as two Arrow binary arrays of one length); the two streams may be cut into
windows at different rows. :func:`compare_row_streams` holds one window of each side at a
time: it compares the rows both sides have (``pyarrow.Array.equals`` on the aligned
slices: offsets and data compared in C), keeps the rest of the longer window and pulls the
next window of the shorter side. On a difference it locates the first differing row
(a binary search over prefixes of the slices), then only counts the rest of both streams,
so that the figures (keys, key + value bytes of each side) are complete either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from slatelib.core.rescale_check import RangeStats
from slatelib.errors import InvalidArgumentError

RowWindow = tuple[pa.Array, pa.Array]
"""``(keys, values)``: consecutive rows of a stream, two ``pa.binary()`` arrays of one
length."""

KEY_HEX_BYTES = 32
"""Key bytes shown (in hex) in a difference; longer keys are truncated."""

DIFFERENT_VALUE = "different value"
"""Both sides hold the key at that row, with different values."""
EXTRA = "extra"
"""The first side (``actual``) holds a row the second side does not hold there."""
MISSING = "missing"
"""The second side (``expected``) holds a row the first side does not hold there."""


def key_hex(key: bytes, limit: int = KEY_HEX_BYTES) -> str:
    """``key`` in hex, its first ``limit`` bytes only when longer (then ``...`` and its
    length)."""
    if len(key) <= limit:
        return key.hex()
    return f"{key[:limit].hex()}... ({len(key)} bytes)"


@dataclass(frozen=True)
class RowDifference:
    """The first row at which two streams differ: its position in the streams (0-based),
    what differs (:data:`DIFFERENT_VALUE`, :data:`EXTRA` in ``actual``, :data:`MISSING`
    from ``actual``), and the key each side holds there (None: that side has ended)."""

    row: int
    kind: str
    actual_key: bytes | None
    expected_key: bytes | None

    @property
    def key(self) -> bytes:
        """The first differing key: the key both hold (a different value), the extra row's
        key, or the missing row's key."""
        got = self.expected_key if self.kind == MISSING else self.actual_key
        assert got is not None
        return got

    def describe(self, actual: str = "actual", expected: str = "expected") -> str:
        """One line naming the row, the key (hex, truncated) and the side, with ``actual``
        and ``expected`` naming the two streams."""
        where = f"row {self.row}, key {key_hex(self.key)}"
        if self.kind == DIFFERENT_VALUE:
            return f"{where}: {actual} and {expected} hold different values"
        if self.kind == EXTRA:
            there = ("" if self.expected_key is None
                     else f" ({expected} hold {key_hex(self.expected_key)} there)")
            return f"{where}: in {actual}, not in {expected}{there}"
        there = "" if self.actual_key is None else f" ({actual} hold {key_hex(self.actual_key)} there)"
        return f"{where}: in {expected}, missing from {actual}{there}"

    def to_dict(self) -> dict[str, Any]:
        return {"row": self.row, "kind": self.kind, "key_hex": key_hex(self.key)}


@dataclass(frozen=True)
class RowsComparison:
    """Two row streams compared: each side's live keys and key + value bytes (``digest``
    0: not computed, the rows themselves were compared) and the first difference (None:
    the streams are identical)."""

    actual: RangeStats
    expected: RangeStats
    difference: RowDifference | None

    @property
    def equal(self) -> bool:
        return self.difference is None


def _data_bytes(arr: pa.Array) -> int:
    """Bytes of the values of ``arr`` (a binary array, possibly a slice): from its offsets,
    without touching the data."""
    if len(arr) == 0:
        return 0
    offsets = arr.buffers()[1]
    assert offsets is not None
    view = memoryview(offsets).cast("i")
    return int(view[arr.offset + len(arr)] - view[arr.offset])


class _Side:
    """One stream being consumed: the current window and the position in it."""

    def __init__(self, windows: Iterable[RowWindow], name: str) -> None:
        self._it: Iterator[RowWindow] = iter(windows)
        self._name = name
        self.keys: pa.Array = pa.array([], pa.binary())
        self.values: pa.Array = self.keys
        self.pos = 0
        self.rows = 0
        self.nbytes = 0
        self.seen = 0
        """Rows before the current window."""

    @property
    def left(self) -> int:
        return len(self.keys) - self.pos

    def fill(self) -> bool:
        """A window with rows left (pulling windows as needed); False at the end.

        Raises:
            InvalidArgumentError: a window whose two arrays differ in length or type.
        """
        while self.left == 0:
            nxt = next(self._it, None)
            if nxt is None:
                return False
            keys, values = nxt
            if len(keys) != len(values) or not (pa.types.is_binary(keys.type)
                                                and pa.types.is_binary(values.type)):
                raise InvalidArgumentError(
                    f"{self._name} row window: {len(keys)} keys ({keys.type}) and "
                    f"{len(values)} values ({values.type}), not two binary arrays of one "
                    "length")
            self.seen += len(self.keys)
            self.keys, self.values, self.pos = keys, values, 0
            self.rows += len(keys)
            self.nbytes += _data_bytes(keys) + _data_bytes(values)
        return True

    def key_at(self, i: int) -> bytes:
        return bytes(self.keys[self.pos + i].as_py())

    def drain(self) -> None:
        """Count the rest of the stream (its windows are not compared)."""
        self.pos = len(self.keys)
        while self.fill():
            self.pos = len(self.keys)

    def stats(self) -> RangeStats:
        return RangeStats(self.rows, self.nbytes, 0)


def _prefix_equal(a: _Side, b: _Side, n: int) -> bool:
    return bool(a.keys.slice(a.pos, n).equals(b.keys.slice(b.pos, n))
                and a.values.slice(a.pos, n).equals(b.values.slice(b.pos, n)))


def compare_row_streams(actual: Iterable[RowWindow], expected: Iterable[RowWindow],
                        ) -> RowsComparison:
    """``actual`` and ``expected`` compared row by row (see the module docstring): equal
    when both hold the same keys with the same values in the same order.

    Raises:
        InvalidArgumentError: a malformed window (:meth:`_Side.fill`).
        Exception: whatever producing a window raises.
    """
    a, b = _Side(actual, "actual"), _Side(expected, "expected")
    difference: RowDifference | None = None
    while difference is None:
        more_a, more_b = a.fill(), b.fill()
        if not more_a or not more_b:
            if more_a:
                difference = RowDifference(a.seen + a.pos, EXTRA, a.key_at(0), None)
            elif more_b:
                difference = RowDifference(b.seen + b.pos, MISSING, None, b.key_at(0))
            break
        n = min(a.left, b.left)
        if _prefix_equal(a, b, n):
            a.pos += n
            b.pos += n
            continue
        lo, hi = 0, n - 1  # prefix of lo rows equal; of hi + 1 rows not
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _prefix_equal(a, b, mid):
                lo = mid
            else:
                hi = mid - 1
        ka, kb = a.key_at(lo), b.key_at(lo)
        kind = DIFFERENT_VALUE if ka == kb else EXTRA if ka < kb else MISSING
        difference = RowDifference(a.seen + a.pos + lo, kind, ka, kb)
    a.drain()
    b.drain()
    return RowsComparison(a.stats(), b.stats(), difference)


__all__ = ["DIFFERENT_VALUE", "EXTRA", "KEY_HEX_BYTES", "MISSING", "RowDifference", "RowWindow",
           "RowsComparison", "compare_row_streams", "key_hex"]
