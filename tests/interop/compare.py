"""Read one database through slatelib and through the official ``DbReader``, and compare.

:func:`assert_reads_match` is the check shared by the read-path interop tests: full scan,
range scans and point gets must be equal between the two readers (and, when given, equal
to the expected state). Failures name the first differing key instead of dumping two
lists of thousands of rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slatelib import DbReader
from slatelib.objstore import ObjectStore
from tests.interop.official import OfficialReader, StoreRoot

Pairs = list[tuple[bytes, bytes]]
Bounds = tuple[bytes | None, bytes | None]


@dataclass
class Reads:
    """What one reader returned: the full scan, range scans by bounds, gets by key."""

    scan: Pairs
    ranges: dict[Bounds, Pairs]
    gets: dict[bytes, bytes | None]


def _short(b: bytes | None) -> str:
    if b is None:
        return "None"
    return b.hex() if len(b) <= 24 else f"{b[:24].hex()}...({len(b)} bytes)"


def first_difference(
    ours: Pairs, theirs: Pairs, names: tuple[str, str] = ("slatelib", "expected")
) -> str:
    """A one-line description of where two scans part ways ('' when equal)."""
    a_name, b_name = names
    for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return (f"row {i}: {a_name} {_short(a[0])}={_short(a[1])}, "
                    f"{b_name} {_short(b[0])}={_short(b[1])}")
    if len(ours) != len(theirs):
        n = min(len(ours), len(theirs))
        extra = ours[n] if len(ours) > n else theirs[n]
        who = a_name if len(ours) > n else b_name
        return (f"{a_name} {len(ours)} rows, {b_name} {len(theirs)} rows; first extra "
                f"({who}) at row {n}: {_short(extra[0])}")
    return ""


def slatelib_reads(
    path: str,
    store: ObjectStore | str,
    keys: Sequence[bytes],
    bounds: Sequence[Bounds] = (),
    *,
    merge_operator: Any = None,
) -> Reads:
    """Everything through :class:`slatelib.DbReader`."""
    with DbReader.open(path, store, merge_operator=merge_operator) as r:
        return Reads(
            scan=list(r.scan()),
            ranges={b: list(r.scan(*b)) for b in bounds},
            gets={k: r.get(k) for k in keys},
        )


def official_reads(
    where: StoreRoot,
    path: str,
    keys: Sequence[bytes],
    bounds: Sequence[Bounds] = (),
    **reader_kwargs: Any,
) -> Reads:
    """Everything through the official ``DbReader`` (see :class:`OfficialReader`)."""
    with OfficialReader.open(where, path, **reader_kwargs) as r:
        return Reads(
            scan=r.scan(),
            ranges={b: r.scan(*b) for b in bounds},
            gets={k: r.get(k) for k in keys},
        )


def assert_reads_equal(
    ours: Reads, theirs: Reads, *, label: str,
    names: tuple[str, str] = ("slatelib", "official"),
) -> None:
    """Scans, range scans and gets of ``ours`` equal ``theirs``."""
    diff = first_difference(ours.scan, theirs.scan, names)
    assert not diff, f"{label}: full scan differs: {diff}"
    assert ours.scan == theirs.scan
    assert ours.ranges.keys() == theirs.ranges.keys()
    for b, expected in theirs.ranges.items():
        diff = first_difference(ours.ranges[b], expected, names)
        assert not diff, f"{label}: scan [{_short(b[0])}, {_short(b[1])}) differs: {diff}"
    assert ours.gets.keys() == theirs.gets.keys()
    bad = [k for k, v in theirs.gets.items() if ours.gets[k] != v]
    assert not bad, (
        f"{label}: {len(bad)} of {len(theirs.gets)} gets differ, first {_short(bad[0])}: "
        f"{names[0]} {_short(ours.gets[bad[0]])}, {names[1]} {_short(theirs.gets[bad[0]])}"
    )


def expected_reads(
    live: Mapping[bytes, bytes], keys: Sequence[bytes], bounds: Sequence[Bounds] = ()
) -> Reads:
    """The reads an exact ``live`` state implies (keys not in it read as None)."""
    items = sorted(live.items())

    def within(b: Bounds) -> Pairs:
        lo, hi = b
        return [(k, v) for k, v in items if (lo is None or k >= lo) and (hi is None or k < hi)]

    return Reads(scan=items, ranges={b: within(b) for b in bounds},
                 gets={k: live.get(k) for k in keys})


def assert_reads_match(
    where: StoreRoot,
    store: ObjectStore | str,
    path: str,
    keys: Sequence[bytes],
    bounds: Sequence[Bounds] = (),
    *,
    expected: Mapping[bytes, bytes] | None = None,
    merge_operator: Any = None,
    official_kwargs: Mapping[str, Any] | None = None,
) -> Reads:
    """slatelib's reads equal the official reader's, and both equal ``expected`` (the live
    state) when it is given. Returns the official reads.

    ``where`` is what the official package opens (a folder or an official ObjectStore),
    ``store`` what slatelib opens (a URL or a slatelib ObjectStore) - the same storage.
    """
    theirs = official_reads(where, path, keys, bounds, **(official_kwargs or {}))
    ours = slatelib_reads(path, store, keys, bounds, merge_operator=merge_operator)
    assert_reads_equal(ours, theirs, label=f"{path}: slatelib vs official")
    if expected is not None:
        assert_reads_equal(theirs, expected_reads(expected, keys, bounds),
                           label=f"{path}: official vs expected", names=("official", "expected"))
    return theirs
