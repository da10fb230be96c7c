"""MemTable: versions newest first, ordered range scans."""

from __future__ import annotations

from slatelib.core.memtable import MemTable
from slatelib.core.row import TOMBSTONE, VALUE


def test_versions_newest_first_and_sorted_scan() -> None:
    mt = MemTable()
    mt.put((b"b", 2, VALUE, b"b2", None, None))
    mt.put((b"a", 1, VALUE, b"a1", None, None))
    mt.put((b"b", 5, TOMBSTONE, b"", None, None))
    mt.put((b"b", 3, VALUE, b"b3", None, None))
    assert [r[1] for r in mt.get_versions(b"b")] == [5, 3, 2]
    assert [(r[0], r[1]) for r in mt.iter_range()] == [(b"a", 1), (b"b", 5), (b"b", 3), (b"b", 2)]
    assert [r[0] for r in mt.iter_range(b"b", None)] == [b"b"] * 3
    assert list(mt.iter_range(None, b"b")) == [(b"a", 1, VALUE, b"a1", None, None)]
    assert mt.max_seq == 5 and mt.min_seq == 1
