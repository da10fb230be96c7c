"""The native seam (slatelib/format/seam.py): every function returns the same result with the
extension and with its pure-Python reference (the reference is forced here by clearing the
module's bindings, as ``SLATELIB_NO_NATIVE=1`` does at import; ``make test-pure`` runs the
whole suite that way)."""

from __future__ import annotations

import gc
import random

import pytest

from slatelib.core.compaction_inputs import InputView, TaskView
from slatelib.core.manifest import CompressionCodec
from slatelib.core.merge import ConcatMergeOperator
from slatelib.core.ranges import Bound, BytesRange
from slatelib.core.rescale_check import RangeStats
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.errors import InvalidArgumentError
from slatelib.format import seam
from slatelib.format.arrow_pack import pack_rows
from slatelib.format.native_pipe import ArrowBuffers
from slatelib.paths import DbPaths, ulid_names
from tests.unit.format._pipe_blocks import encode_block, frame
from tests.unit.native_only import require_native


@pytest.fixture
def pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seam bound to the references only."""
    for name in ("_PIPE", "_SPEEDUPS", "_manifest_ext"):
        monkeypatch.setattr(seam, name, None)


def _rows(r: random.Random, n: int) -> list[Row]:
    out: list[Row] = []
    for k in sorted(r.sample(range(1000), n)):
        for seq in sorted(r.sample(range(1, 50), r.randint(1, 3)), reverse=True):
            kind = r.choice([VALUE, VALUE, TOMBSTONE, MERGE])
            out.append((b"k%04d" % k, seq, kind, b"" if kind == TOMBSTONE else b"v%d" % seq,
                        r.choice([None, 5, 7]) if kind != TOMBSTONE else None,
                        r.choice([None, 3])))
    return out


_concat = ConcatMergeOperator()


def _unpack(bufs: list[ArrowBuffers]) -> list[tuple[object, ...]]:
    """The rows the buffers hold, nulls as None (a bitmap of a column without nulls may be
    given or not)."""
    out: list[tuple[object, ...]] = []
    for b in bufs:
        ko, vo = memoryview(b.key_offsets).cast("i"), memoryview(b.value_offsets).cast("i")
        seq = memoryview(b.seq).cast("q") if b.seq is not None else None
        cols = []
        for data, valid, nulls in ((b.expire_ts, b.expire_valid, b.expire_nulls),
                                   (b.create_ts, b.create_valid, b.create_nulls)):
            if data is None:
                cols.append(None)
                continue
            vals = memoryview(data).cast("q")
            cols.append([None if nulls and valid is not None and not valid[i >> 3] >> (i & 7) & 1
                         else vals[i] for i in range(b.num_rows)])
        for i in range(b.num_rows):
            out.append((b.key_data[ko[i]:ko[i + 1]], b.value_data[vo[i]:vo[i + 1]],
                        None if seq is None else seq[i],
                        None if cols[0] is None else cols[0][i],
                        None if cols[1] is None else cols[1][i]))
    return out


def _sources(r: random.Random) -> list[list[list[Row]]]:
    return [[_rows(r, 30)] for _ in range(3)]


def test_visible_buffers_are_the_same_native_and_packed_in_python(
        monkeypatch: pytest.MonkeyPatch) -> None:
    r = random.Random(5)
    for _ in range(20):
        sources = _sources(r)
        for kw in ({}, {"seq": True, "expire_ts": True, "create_ts": True},
                   {"seq": True, "max_rows": 7}, {"max_bytes": 40}):
            got = list(seam.visible_buffers(sources, _concat, **kw))
            with monkeypatch.context() as m:
                m.setattr(seam, "_PIPE", None)
                want = list(seam.visible_buffers(sources, _concat, **kw))
            assert _unpack(got) == _unpack(want)
            assert [b.num_rows for b in got] == [b.num_rows for b in want]


def test_pack_rows_cuts_batches_by_rows_and_bytes() -> None:
    rows: list[Row] = [(b"k%d" % i, i, VALUE, b"v" * i, None if i % 2 else i, None)
                       for i in range(10)]
    bufs = list(pack_rows(rows, expire_ts=True, max_rows=4))
    assert [b.num_rows for b in bufs] == [4, 4, 2]
    assert _unpack(bufs) == [(r[0], r[3], None, r[4], None) for r in rows]
    assert bufs[0].expire_nulls == 2 and bufs[0].expire_valid == bytes([0b0101])
    assert [b.num_rows for b in pack_rows(rows, max_bytes=10)] == [4, 2, 2, 1, 1]
    assert list(pack_rows([])) == []


def test_range_stats_are_the_same_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = [(b"k%d" % i, b"v" * i) for i in range(100)]
    want = RangeStats.of(pairs)
    assert seam.range_stats(pairs) == want
    monkeypatch.setattr(seam, "_PIPE", None)
    assert seam.range_stats(iter(pairs)) == want


def _stored(rows: list[Row]) -> tuple[bytes, list[int]]:
    return frame([encode_block(rows[i:i + 5], 2) for i in range(0, len(rows), 5)])


def test_plain_blocks_decode_natively_or_return_none() -> None:
    rows = _rows(random.Random(2), 20)
    data, bounds = _stored(rows)
    got = seam.decode_plain_blocks(data, bounds, 2)
    if seam._SPEEDUPS is None:
        assert got is None
    else:
        assert got == rows
    damaged = bytearray(data)
    damaged[3] ^= 0xFF
    assert seam.decode_plain_blocks(bytes(damaged), bounds, 2) is None  # the caller names it


def test_without_the_extension_the_callers_decode_rows(pure: None) -> None:
    rows = _rows(random.Random(3), 20)
    data, bounds = _stored(rows)
    assert seam.decode_plain_blocks(data, bounds, 2) is None
    assert seam.check_group(data, bounds, 2, CompressionCodec.NONE, None) is None
    assert seam.identity_input_views([], [], {}, set()) == []
    seam.untrack_frozen([object()], (object,))  # a no-op


def test_checked_groups_hold_the_rows_of_the_range() -> None:
    require_native(seam._PIPE is not None, "the native pipeline")
    rows = _rows(random.Random(4), 20)
    data, bounds = _stored(rows)
    rng = BytesRange(Bound.included(rows[3][0]), Bound.unbounded())
    checked = seam.check_group(data, bounds, 2, CompressionCodec.NONE, rng)
    assert checked is not None and checked.rows() == [r for r in rows if r[0] >= rows[3][0]]
    assert seam.check_group(data[:-1], bounds, 2, CompressionCodec.NONE, rng) is None


def test_ulid_names_are_the_paths_reference_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    r = random.Random(9)
    ids = [r.getrandbits(128) for _ in range(200)] + [0, (1 << 128) - 1]
    paths = DbPaths("some/db")
    want = [paths.compacted(i) for i in ids]
    assert ulid_names(*paths.compacted_parts, ids) == want
    assert seam.ulid_names(*paths.compacted_parts, ids) == want
    assert seam.ulid_names(*DbPaths("").compacted_parts, [5]) == [DbPaths("").compacted(5)]
    with pytest.raises(InvalidArgumentError):
        seam.ulid_names("a/", ".sst", [1 << 128])
    monkeypatch.setattr(seam, "_manifest_ext", None)
    assert seam.ulid_names(*paths.compacted_parts, tuple(ids)) == want
    with pytest.raises(InvalidArgumentError):
        seam.ulid_names("a/", ".sst", [1 << 128])


def test_untracked_planning_records_are_core_types_only() -> None:
    """The planning builder is configured with core classes (no ``ops`` class reaches C)."""
    require_native(seam._manifest_ext is not None, "slatelib._manifest")
    for cls in (InputView, TaskView):
        assert cls.__module__ == "slatelib.core.compaction_inputs"
    objs = [BytesRange.all() for _ in range(3)]
    gc.collect()
    seam.untrack_frozen(objs, (BytesRange, Bound))
    assert not any(gc.is_tracked(o) for o in objs)
