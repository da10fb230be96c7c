"""Where a split of a segmented database may cut, and when a merge's sources are disjoint
per segment (SlateDB RFC-0024; checked on official databases in
tests/interop/test_rescale_segments_interop.py)."""

from __future__ import annotations

import pytest

from slatelib.core.range_split import Anchor
from slatelib.core.rescale_plan import balanced_split_keys
from slatelib.core.rescale_segments import (
    check_disjoint_trees,
    check_keys_respect_segments,
    segment_anchors,
    tree_spans,
)
from slatelib.errors import InvalidArgumentError
from tests.unit.core.test_clone_plan import db, segdb, sst

PREFIXES = [b"aa:", b"bb:", b"cc:", b"\xff\xff"]


def test_anchors_gather_at_their_segment_start_so_cuts_fall_on_boundaries() -> None:
    anchors = [Anchor(b"aa:1", 10), Anchor(b"aa:9", 10), Anchor(b"bb:5", 50),
               Anchor(b"cc:0", 30), Anchor(b"cc:7", 5), Anchor(b"zz", 1)]
    got = segment_anchors(anchors, PREFIXES)
    assert got == [Anchor(b"aa:", 20), Anchor(b"bb:", 50), Anchor(b"cc:", 35),
                   Anchor(b"zz", 1)]
    assert balanced_split_keys(got, 2) == (b"cc:",)  # 70 of 106 bytes before it
    assert balanced_split_keys(got, 3) == (b"bb:", b"cc:")


@pytest.mark.parametrize("key", [b"aa:", b"aa", b"bb:", b"b", b"bb;", b"cc:"])
def test_keys_at_segment_boundaries_or_between_segments_are_accepted(key: bytes) -> None:
    check_keys_respect_segments([key], PREFIXES)


@pytest.mark.parametrize(("key", "segment"), [(b"aa:\x00", "aa:"), (b"bb:zz", "bb:"),
                                              (b"\xff\xff\x01", "hex:ffff")])
def test_keys_inside_a_segment_are_refused(key: bytes, segment: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"inside segment '{segment}'"):
        check_keys_respect_segments([b"a", key], PREFIXES)


def test_sources_must_be_disjoint_per_segment_not_as_wholes() -> None:
    x = segdb({b"aaa:": ([sst(1, b"aaa:0", b"aaa:9")], []),
               b"ccc:": ([sst(2, b"ccc:0", b"ccc:4")], [])})
    y = segdb({b"bbb:": ([sst(3, b"bbb:0", b"bbb:9")], []),
               b"ccc:": ([sst(4, b"ccc:5", b"ccc:9")], [])})
    assert set(tree_spans(x)) == {b"aaa:", b"ccc:"}
    check_disjoint_trees([("x", x), ("y", y)])  # [aaa:0, ccc:4] and [bbb:0, ccc:9] overlap
    z = segdb({b"ccc:": ([sst(5, b"ccc:3", b"ccc:6")], [])})
    with pytest.raises(InvalidArgumentError, match="in segment 'ccc:'"):
        check_disjoint_trees([("x", x), ("z", z)])
    with pytest.raises(InvalidArgumentError, match="disagree on the segment extractor"):
        check_disjoint_trees([("x", x), ("plain", db([sst(6, b"q", b"r")], []))])
