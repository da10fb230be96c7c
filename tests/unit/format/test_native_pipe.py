"""The native decode -> merge -> sink pipeline (``slatelib/csrc/pipe.h``) against the
pure-Python reference.

On random sources (v1 and v2 blocks checked into ``CheckedBlocks`` and clipped to a range,
mixed with plain row lists; empty, short and long keys; several versions per key within and
across sources, equal seqs, tombstones, TTLs around the clock tick, merge operands) every
sink must give exactly what the reference gives: the retained rows and counters of
``retained_batches(use_native=False)`` and the blocks ``BlockWriterV2.add_rows`` builds from
them, ``RangeStats.of(resolve_rows(...))``, and ``resolve_window``'s visible rows as Arrow
arrays. Damaged blocks are refused exactly when the reference decoders refuse them.
"""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatelib.core.manifest import CompressionCodec
from slatelib.core.merge import ConcatMergeOperator, MergeOperator, merge_sources, resolve_rows
from slatelib.core.ranges import Bound, BytesRange
from slatelib.core.rescale_check import RangeStats
from slatelib.core.retention import RetentionPolicy, RetentionStats
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.core.visible_rows import resolve_window
from slatelib.core.window_merge import merge_windows
from slatelib.errors import CorruptObjectError, InvalidArgumentError, MergeOperatorMissingError
from slatelib.format import native
from slatelib.format.compression import compress
from slatelib.format.native_merge import retained_batches
from slatelib.format.native_pipe import (
    HAVE_NATIVE_PIPE,
    RetainPipe,
    check_blocks,
    check_stored_blocks,
    scan_pairs,
    scan_stats,
    visible_buffers,
)
from slatelib.format.sst import SstWriter, SstWriterOptions, decode_data_block
from tests.unit.format._pipe_blocks import checked_groups, cut, decode_py, encode_block, frame
from tests.unit.native_only import require_native

TICK = 1_000
DIFF = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = b"L" * 200


@pytest.fixture(autouse=True)
def pipe_built() -> None:
    """Optional for users, not for these tests: a missing build is a failure."""
    require_native(HAVE_NATIVE_PIPE, "slatelib._speedups (its native pipeline)")


def key_of(k: int, empty: bool) -> bytes:
    if k == 0 and empty:
        return b""
    if k % 5 == 4:
        return LONG + b"%d" % k  # a long key: multi-byte varints, long shared prefixes
    if k % 7 == 6:
        return b"%02d-eight+" % (k * 7)  # 10 bytes that differ in the first 8
    return b"k%02d" % k if k % 3 else b"k%d" % k  # keys of different lengths


@st.composite
def source_rows(draw: st.DrawFn, *, empty: bool) -> list[Row]:
    items = draw(st.lists(st.tuples(st.integers(0, 12), st.integers(1, 40),
                                    st.sampled_from([VALUE, VALUE, TOMBSTONE, MERGE]),
                                    st.sampled_from([None, None, TICK - 1, TICK, TICK + 1]),
                                    st.sampled_from([None, 5, -3])),
                          max_size=40, unique_by=lambda x: (x[0], x[1])))
    rows: list[Row] = []
    for k, seq, kind, exp, ts in items:
        key = key_of(k, empty)
        value = b"" if kind == TOMBSTONE else b"%d.%d" % (k, seq) * (1 + seq % 3)
        rows.append((key, seq, kind, value, exp if kind != TOMBSTONE or seq % 2 else None, ts))
    rows.sort(key=lambda r: (r[0], -r[1]))
    return rows


@st.composite
def ranges(draw: st.DrawFn) -> BytesRange | None:
    if draw(st.booleans()):
        return None
    a, b = sorted(key_of(k, False) for k in draw(st.lists(st.integers(0, 12), min_size=2,
                                                          max_size=2)))
    lo = draw(st.sampled_from([Bound.unbounded(), Bound.included(a), Bound.excluded(a)]))
    hi = draw(st.sampled_from([Bound.unbounded(), Bound.included(b), Bound.excluded(b)]))
    return BytesRange(lo, hi)


Sources = tuple[list[list[object]], list[list[list[Row]]]]
"""(what the pipe reads: per source its blocks, ``CheckedBlocks`` or row lists;
the reference: per source its row lists)."""


@st.composite
def pipe_sources(draw: st.DrawFn, *, empty: bool = False, max_sources: int = 5) -> Sources:
    pipe: list[list[object]] = []
    ref: list[list[list[Row]]] = []
    for _ in range(draw(st.integers(1, max_sources))):
        rows = draw(source_rows(empty=empty))
        how = draw(st.sampled_from(["rows", "v1", "v2", "v2", "mixed"]))
        rng = draw(ranges())
        if how == "rows":
            kept = [r for r in rows if rng is None or rng.contains(r[0])]
            sizes = draw(st.lists(st.integers(0, 6), min_size=1, max_size=4))
            blocks: list[list[Row]] = cut(kept, sizes)
            if draw(st.booleans()):
                blocks.insert(0, [])  # sources may yield empty blocks
            pipe.append(list(blocks))
            ref.append(blocks)
            continue
        sizes = draw(st.lists(st.integers(1, 20), min_size=1, max_size=3))
        per = draw(st.integers(1, 3))
        src: list[object] = []
        want: list[Row] = []
        for i, part in enumerate(cut(rows, [draw(st.integers(1, 25))]) if rows else []):
            version = 1 if how == "v1" else 2
            if how == "mixed" and i % 2:
                part_in = [r for r in part if rng is None or rng.contains(r[0])]
                src.append(part_in)
                want += part_in
                continue
            groups, w = checked_groups(part, version, block_rows=sizes, blocks_per_group=per,
                                       rng=rng)
            src += groups
            want += w
        pipe.append(src)
        ref.append([want])
    return pipe, ref


def run_retain(pipe: list[list[object]], policy: RetentionPolicy, limit: int,
               ) -> tuple[list[Row], RetentionStats]:
    stats = RetentionStats()
    p = RetainPipe(pipe, policy, stats)
    out: list[Row] = []
    while batch := p.rows(limit):
        out += batch
    assert p.finished
    return out, stats


def reference_retain(ref: list[list[list[Row]]], policy: RetentionPolicy,
                     ) -> tuple[list[Row], RetentionStats]:
    stats = RetentionStats()
    rows = [r for b in retained_batches(ref, policy, stats, use_native=False) for r in b]
    return rows, stats


# ------------------------------------------------------------------------ check_blocks


@DIFF
@given(source_rows(empty=True), st.sampled_from([1, 2]), ranges(),
       st.lists(st.integers(1, 20), min_size=1, max_size=3), st.integers(1, 4))
def test_checked_blocks_hold_what_the_reference_decoders_read(
    rows: list[Row], version: int, rng: BytesRange | None, sizes: list[int], per: int,
) -> None:
    groups, want = checked_groups(rows, version, block_rows=sizes, blocks_per_group=per,
                                  rng=rng)
    assert [r for g in groups for r in g.rows()] == want
    assert sum(len(g) for g in groups) == len(want)
    beyond = [r for r in rows if rng is not None and rng.above_end(r[0])]
    assert any(g.ended for g in groups) == bool(beyond)


@DIFF
@given(source_rows(empty=False).filter(bool), st.sampled_from([1, 2]), st.data())
def test_damaged_blocks_are_refused_exactly_when_the_reference_refuses_them(
    rows: list[Row], version: int, data: st.DataObject,
) -> None:
    payload = bytearray(encode_block(rows, version))
    how = data.draw(st.sampled_from(["flip", "truncate", "extend"]))
    if how == "flip":
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] ^= data.draw(st.integers(1, 255))
    elif how == "truncate":
        del payload[data.draw(st.integers(0, len(payload))):]
    else:
        payload += bytes(data.draw(st.integers(1, 5)))
    try:
        want: object = decode_py(bytes(payload), version)
    except CorruptObjectError:
        want = "refused"
    stored, bounds = frame([bytes(payload)])
    for verify, blob, bb in ((True, stored, bounds), (False, bytes(payload), [0, len(payload)])):
        try:
            got: object = check_blocks(blob, bb, version, verify_crc=verify).rows()
        except ValueError:
            got = "refused"
        assert got == want


@DIFF
@given(source_rows(empty=False).filter(bool), st.sampled_from([1, 2]), st.data())
def test_check_and_decode_share_one_entry_parser(
    rows: list[Row], version: int, data: st.DataObject,
) -> None:
    """``check_blocks`` and the native decoders walk a block with the same parser
    (``block_iter_next`` in ``_speedups.c``): on a damaged block they fail with the same
    reason (check_blocks adds the block's position), on an intact one they read the same
    rows."""
    ext = native.speedups
    assert ext is not None
    payload = bytearray(encode_block(rows, version))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] ^= data.draw(st.integers(1, 255))
    if data.draw(st.booleans()):
        del payload[data.draw(st.integers(0, len(payload))):]
    blob = bytes(payload)
    decode = ext.decode_block_v2 if version == 2 else ext.decode_block_v1
    try:
        want: object = decode(blob)
    except ValueError as exc:
        want = f"block 0: {exc}"
    try:
        got: object = check_blocks(blob, [0, len(blob)], version, verify_crc=False).rows()
    except ValueError as exc:
        got = str(exc)
    assert got == want
    stored, bounds = frame([blob])
    try:
        flat: object = ext.decode_blocks(stored, bounds, version, True)
    except ValueError as exc:
        flat = f"block 0: {exc}"
    assert flat == want


def test_a_checksum_mismatch_and_bad_bounds_name_the_block() -> None:
    rows = [(b"a%d" % i, 5, VALUE, b"x", None, None) for i in range(30)]
    data, bounds = frame([encode_block(rows[:10], 2), encode_block(rows[10:], 2)])
    bad = bytearray(data)
    bad[bounds[1] + 3] ^= 1
    with pytest.raises(ValueError, match="block 1: checksum mismatch"):
        check_blocks(bytes(bad), bounds, 2)
    with pytest.raises(ValueError, match="block 1: bounds"):
        check_blocks(data, [bounds[0], bounds[1], len(data) + 1], 2)
    with pytest.raises(ValueError, match="unsupported SST format version 3"):
        check_blocks(data, bounds, 3)
    # a truncated entry whose CRC matches (the damage happened before checksumming)
    cut_payload = encode_block(rows[:10], 2)[:-9] + encode_block(rows[:10], 2)[-2:]
    blob, bb = frame([cut_payload])
    with pytest.raises(ValueError, match="block 0: "):
        check_blocks(blob, bb, 2)


def test_checked_blocks_keep_their_payload_alive() -> None:
    rows = [(b"key%04d" % i, 9, VALUE, b"value-%d" % i * 5, 1, 2) for i in range(500)]
    data, bounds = frame([encode_block(rows[i:i + 50], 2) for i in range(0, 500, 50)])
    blob = bytearray(data)  # a mutable buffer: held (and locked) by the checked blocks
    cb = check_blocks(blob, bounds, 2)
    with pytest.raises(BufferError):
        blob.extend(b"x")
    del blob, data
    gc.collect()
    assert cb.rows() == rows


# ------------------------------------------------------------------------ retain


@DIFF
@given(pipe_sources(empty=True), st.integers(0, 41), st.booleans(), st.booleans(),
       st.integers(1, 9))
def test_retained_rows_and_counters_equal_the_reference(
    srcs: Sources, min_seq: int, bottom: bool, with_op: bool, limit: int,
) -> None:
    pipe, ref = srcs
    policy = RetentionPolicy(min_seq, bottom, TICK, ConcatMergeOperator() if with_op else None)
    assert run_retain(pipe, policy, limit) == reference_retain(ref, policy)


@DIFF
@given(pipe_sources(), st.integers(0, 41), st.booleans(), st.booleans(),
       st.lists(st.integers(1, 400), min_size=1, max_size=5), st.sampled_from([64, 256, 4096]))
def test_fill_builds_the_blocks_add_rows_builds_from_the_reference(
    srcs: Sources, min_seq: int, bottom: bool, with_op: bool, budgets: list[int],
    block_size: int,
) -> None:
    pipe, ref = srcs
    assert native.speedups is not None
    policy = RetentionPolicy(min_seq, bottom, TICK, ConcatMergeOperator() if with_op else None)
    want_rows, want_stats = reference_retain(ref, policy)
    want = native.speedups.BlockWriterV2(block_size, want_hashes=True)
    want.add_rows(want_rows)
    want.finish_block()

    stats = RetentionStats()
    p = RetainPipe(pipe, policy, stats)
    got = native.speedups.BlockWriterV2(block_size, want_hashes=True)
    blocks: list[object] = []
    i = 0
    while not p.fill(got, budgets[i % len(budgets)]):
        blocks += got.take_blocks()  # what SstWriter.fill does after every step
        i += 1
    got.finish_block()
    blocks += got.take_blocks()
    assert stats == want_stats
    assert blocks == want.take_blocks()
    for attr in ("num_rows", "num_puts", "num_deletes", "num_merges", "raw_key_size",
                 "raw_val_size", "first_key", "first_seq", "last_key", "last_seq"):
        assert getattr(got, attr) == getattr(want, attr), attr
    assert got.hashes() == want.hashes()


def test_fill_stops_at_a_key_boundary_once_the_budget_is_used() -> None:
    rows = [(b"k%03d" % k, s, VALUE, b"v" * 30, None, None) for k in range(100)
            for s in (3, 2, 1)]
    groups, _ = checked_groups(rows, 2, block_rows=(7,))
    stats = RetentionStats()
    p = RetainPipe([groups], RetentionPolicy(0, False, TICK), stats)
    assert native.speedups is not None
    w = native.speedups.BlockWriterV2(4096)
    assert p.fill(w, 1) is False
    assert w.num_rows == 3 and w.last_key == b"k000"  # one whole key
    assert p.fill(w, 1000) is False
    assert w.last_seq == 1 and 1000 <= w.open_size < 1000 + 3 * 60
    assert p.fill(w, 10**9) is True and w.num_rows == 300
    assert p.fill(w, 10**9) is True and w.num_rows == 300


def test_a_key_the_writer_refuses_is_an_invalid_argument_and_operator_errors_pass() -> None:
    assert native.speedups is not None
    rows = [(b"", 3, VALUE, b"x", None, None)]
    p = RetainPipe([[rows]], RetentionPolicy(0, False, TICK), RetentionStats())
    with pytest.raises(InvalidArgumentError, match="keys must not be empty"):
        p.fill(native.speedups.BlockWriterV2(4096), 100)

    class Boom(MergeOperator):
        def merge(self, key: bytes, existing: bytes | None, operand: bytes) -> bytes:
            raise ValueError("operator says no")

    groups, _ = checked_groups([(b"a", 2, MERGE, b"x", None, None),
                                (b"a", 1, VALUE, b"y", None, None)], 2)
    p = RetainPipe([groups], RetentionPolicy(5, False, TICK, Boom()), RetentionStats())
    with pytest.raises(ValueError, match="operator says no") as info:
        p.fill(native.speedups.BlockWriterV2(4096), 100)
    assert not isinstance(info.value, InvalidArgumentError | CorruptObjectError)


def test_a_source_out_of_order_is_corrupt_and_names_the_source() -> None:
    good, _ = checked_groups([(b"a", 1, VALUE, b"x", None, None)], 2)
    bad, _ = checked_groups([(b"b", 1, VALUE, b"x", None, None),
                             (b"a", 2, VALUE, b"y", None, None)], 2)
    with pytest.raises(CorruptObjectError, match="source 1, row 1: out of order"):
        run_retain([good, bad], RetentionPolicy(0, False, TICK), 10)
    seq_up = [[(b"a", 1, VALUE, b"x", None, None)], [(b"a", 2, VALUE, b"y", None, None)]]
    with pytest.raises(CorruptObjectError, match="source 0, row 1: out of order"):
        scan_stats([seq_up], None)
    with pytest.raises(CorruptObjectError, match="source 0, row 0: value is not bytes"):
        scan_stats([[[(b"a", 1, VALUE, "text", None, None)]]], None)
    with pytest.raises(TypeError, match="not a list of rows or CheckedBlocks"):
        scan_stats([[(b"a", 1, VALUE, b"x", None, None)]], None)


def test_every_sink_that_needs_a_value_refuses_one_that_is_not_bytes() -> None:
    """A Python row's value is read when a sink takes its bytes (not on load): the block
    writer and the Arrow buffers refuse a value that is not bytes, naming source and row."""
    src = [[(b"a", 2, VALUE, b"ok", None, None), (b"b", 1, VALUE, "text", None, None)]]
    assert native.speedups is not None
    with pytest.raises(CorruptObjectError, match="source 0, row 1: value is not bytes"):
        RetainPipe([src], RetentionPolicy(0, False, TICK), RetentionStats()).fill(
            native.speedups.BlockWriterV2(4096), 1 << 20)
    with pytest.raises(CorruptObjectError, match="source 0, row 1: value is not bytes"):
        list(visible_buffers([src], None))


def test_the_merge_pulls_one_group_per_source_at_a_time() -> None:
    pulled = [0, 0]

    def source(i: int) -> Iterator[object]:
        for g in range(200):
            rows = [(b"k%05d" % (g * 10 + j), 5 - i, VALUE, b"v", None, None)
                    for j in range(10)]
            groups, _ = checked_groups(rows, 2, block_rows=(4,), blocks_per_group=9)
            pulled[i] += 1
            yield groups[0]

    p = RetainPipe([source(0), source(1)], RetentionPolicy(0, False, TICK), RetentionStats())
    first = p.rows(15)  # 8 keys: all in the first group of each source
    assert len(first) == 16 and pulled == [1, 1]
    second = p.rows(10)  # 5 more keys, the last 2 in the second groups
    assert len(second) == 10 and pulled == [2, 2]
    assert len(p.rows(10**6)) + 26 == 4000


# ------------------------------------------------------------------------ resolve


def reference_pairs(ref: list[list[list[Row]]], op: MergeOperator | None) -> object:
    try:
        return list(resolve_rows(merge_sources([[r for b in s for r in b] for s in ref]), op))
    except MergeOperatorMissingError as exc:
        return ("missing operator", str(exc))


@DIFF
@given(pipe_sources(empty=True), st.booleans())
def test_scan_stats_equal_the_stats_of_the_reference_scan(srcs: Sources, with_op: bool) -> None:
    pipe, ref = srcs
    op = ConcatMergeOperator() if with_op else None
    want = reference_pairs(ref, op)
    try:
        got: object = scan_stats(pipe, op)
    except MergeOperatorMissingError as exc:
        got = ("missing operator", str(exc))
    assert got == (want if isinstance(want, tuple) else RangeStats.of(want))  # type: ignore[arg-type]
    # and the Python fallback of the same function
    try:
        py: object = scan_stats(pipe, op, use_native=False)
    except MergeOperatorMissingError as exc:
        py = ("missing operator", str(exc))
    assert py == got


def arrow_table(bufs: object, columns: tuple[str, ...]) -> pa.Table:
    b = bufs
    n = b.num_rows  # type: ignore[attr-defined]
    cols = {
        "key": pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(b.key_offsets),  # type: ignore[attr-defined]
                                                      pa.py_buffer(b.key_data)]),  # type: ignore[attr-defined]
        "value": pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(b.value_offsets),  # type: ignore[attr-defined]
                                                        pa.py_buffer(b.value_data)]),  # type: ignore[attr-defined]
    }
    if "seq" in columns:
        cols["seq"] = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(b.seq)])  # type: ignore[attr-defined]
    for name, valid, nulls, data in (("expire_ts", "expire_valid", "expire_nulls", "expire_ts"),
                                     ("create_ts", "create_valid", "create_nulls", "create_ts")):
        if name in columns:
            cols[name] = pa.Array.from_buffers(
                pa.int64(), n, [pa.py_buffer(getattr(b, valid)), pa.py_buffer(getattr(b, data))],
                null_count=getattr(b, nulls))
    return pa.table(cols)


@DIFF
@given(pipe_sources(), st.booleans(), st.integers(1, 7), st.integers(1, 80))
def test_arrow_buffers_hold_the_visible_rows_of_the_reference(
    srcs: Sources, with_op: bool, max_rows: int, max_bytes: int,
) -> None:
    pipe, ref = srcs
    op = ConcatMergeOperator() if with_op else None
    columns = ("key", "value", "seq", "expire_ts", "create_ts")
    try:
        want: object = [r for w in merge_windows(ref) for r in resolve_window(w, op)]
    except MergeOperatorMissingError:
        want = "missing operator"
    try:
        tables = [arrow_table(b, columns) for b in visible_buffers(
            pipe, op, seq=True, expire_ts=True, create_ts=True, max_rows=max_rows,
            max_bytes=max_bytes)]
        got: object = [(k, s, VALUE, v, e, c) for t in tables for k, v, s, e, c in zip(
            *(t.column(name).to_pylist() for name in columns), strict=True)]
        assert all(t.num_rows <= max_rows for t in tables)
        for t in tables:
            t.validate(full=True)
    except MergeOperatorMissingError:
        got = "missing operator"
    assert got == want


def test_arrow_without_the_metadata_columns() -> None:
    rows = [(b"k%d" % i, 5, VALUE, b"v%d" % i, None, 3) for i in range(10)]
    groups, _ = checked_groups(rows, 2)
    [b] = list(visible_buffers([groups], None))
    assert b.num_rows == 10 and b.seq is None and b.expire_ts is None and b.create_ts is None
    assert arrow_table(b, ("key", "value")).column("value").to_pylist() == [r[3] for r in rows]


def test_arrow_refuses_a_seq_beyond_int64_instead_of_wrapping() -> None:
    """0.17's seq is a u64; the ``seq`` column is int64. A seq >= 2^63 must fail loudly
    (as the row path's pyarrow conversion does), never come out negative."""
    rows = [(b"a", 2**63, VALUE, b"x", None, None), (b"b", 7, VALUE, b"y", None, None)]
    groups, _ = checked_groups(rows, 2)
    with pytest.raises(OverflowError, match="does not fit the int64 'seq' column"):
        list(visible_buffers([groups], None, seq=True))
    groups, _ = checked_groups(rows, 2)
    [b] = list(visible_buffers([groups], None))  # without the seq column it is fine
    assert arrow_table(b, ("key", "value")).column("key").to_pylist() == [b"a", b"b"]


def test_many_random_blocks_under_a_long_run() -> None:
    """A larger differential run (several thousand rows, many groups) of both modes."""
    r = random.Random(11)
    pipe: list[list[object]] = []
    ref: list[list[list[Row]]] = []
    for s in range(4):
        keys = sorted(r.sample(range(20000), 3000))
        rows = [(b"%08d" % k, 100 - s * 10 - k % 3, r.choice([VALUE, VALUE, TOMBSTONE]),
                 b"", None, None) for k in keys]
        rows = [(k, q, kind, b"" if kind == TOMBSTONE else k * 3, None, None)
                for k, q, kind, _, _, _ in rows]
        groups, want = checked_groups(rows, 2 if s % 2 else 1, block_rows=(37,),
                                      blocks_per_group=5)
        pipe.append(list(groups))
        ref.append([want])
    policy = RetentionPolicy(50, True, TICK)
    assert run_retain(pipe, policy, 4096) == reference_retain(ref, policy)
    assert scan_stats(pipe, None) == RangeStats.of(reference_pairs(ref, None))  # type: ignore[arg-type]
    assert zlib.crc32(b"".join(k for k, _ in reference_pairs(ref, None))) != 0  # type: ignore[union-attr]


def test_a_failed_merge_never_reads_as_finished() -> None:
    bad = [[(b"b", 1, VALUE, b"x", None, None)], [(b"a", 2, VALUE, b"y", None, None)]]
    p = RetainPipe([bad], RetentionPolicy(0, False, TICK), RetentionStats())
    assert native.speedups is not None
    w = native.speedups.BlockWriterV2(4096)
    with pytest.raises(CorruptObjectError, match="out of order"):
        p.fill(w, 10**6)
    with pytest.raises(RuntimeError, match="failed earlier"):
        p.fill(w, 10**6)
    with pytest.raises(RuntimeError, match="failed earlier"):
        p.rows(10)


@given(st.binary(max_size=300), st.integers(0, 20))
@settings(max_examples=100, deadline=None)
def test_both_crc_implementations_are_zlibs(data: bytes, pad: int) -> None:
    """check_blocks uses the loaded libz's crc32 when it finds it, else a built-in table:
    both must be ``zlib.crc32``."""
    assert native.speedups is not None
    fn = native.speedups.pipe_crc32  # type: ignore[attr-defined]
    blob = data * (1 + pad)
    assert fn(blob)[0] == fn(blob, True)[0] == zlib.crc32(blob) & 0xFFFFFFFF
    assert fn(b"")[1] in ("zlib", "table") and fn(b"", True)[1] == "table"


def test_no_native_turns_the_pipeline_off() -> None:
    """``SLATELIB_NO_NATIVE=1`` turns the pipeline off, in a subprocess (``make test-pure``
    runs the whole unit suite that way: compaction, ``scan_stats``, the export batches)."""
    repo = Path(__file__).resolve().parents[3]
    env = dict(os.environ, SLATELIB_NO_NATIVE="1")
    probe = subprocess.run(
        [sys.executable, "-c", "from slatelib.format import native_pipe as p; "
         "from slatelib.ops.engine._execute import native_pipeline_for; "
         "print(p.HAVE_NATIVE_PIPE)"],
        cwd=repo, env=env, capture_output=True, text=True, check=True,
    )
    assert probe.stdout.split() == ["False"]


@DIFF
@given(pipe_sources(empty=True), st.booleans(), st.integers(1, 7))
def test_scan_pairs_equal_the_reference_scan(srcs: Sources, with_op: bool, batch: int) -> None:
    pipe, ref = srcs
    op = ConcatMergeOperator() if with_op else None
    try:
        got: object = list(scan_pairs(pipe, op, batch=batch))
    except MergeOperatorMissingError as exc:
        got = ("missing operator", str(exc))
    assert got == reference_pairs(ref, op)


CODECS = [CompressionCodec.NONE, CompressionCodec.SNAPPY, CompressionCodec.ZLIB,
          CompressionCodec.LZ4, CompressionCodec.ZSTD]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source_rows(empty=False).filter(bool), st.sampled_from([1, 2]), st.sampled_from(CODECS),
       ranges(), st.integers(1, 9), st.sampled_from(["none", "crc", "payload", "short"]))
def test_stored_blocks_of_every_codec_read_as_the_reference_reads_them(
    rows: list[Row], version: int, codec: int, rng: BytesRange | None, per: int, damage: str,
) -> None:
    """Compressed blocks are CRC-checked and decompressed, then checked natively: the same
    entries as the reference decode; damage (a stored byte, a byte of the compressed
    payload with its CRC fixed, a cut block) is refused exactly when the reference refuses."""
    stored = []
    for part in cut(rows, [per]):
        body = compress(codec, encode_block(part, version))
        stored.append(body + (zlib.crc32(body) & 0xFFFFFFFF).to_bytes(4, "big"))
    if damage == "crc":
        stored[0] = bytes([stored[0][0] ^ 1]) + stored[0][1:]
    elif damage == "payload":
        body = bytearray(stored[0][:-4])
        body[len(body) // 2] ^= 0x55
        stored[0] = bytes(body) + (zlib.crc32(body) & 0xFFFFFFFF).to_bytes(4, "big")
    elif damage == "short":
        stored[-1] = stored[-1][:3]
    data = b"".join(stored)
    bounds = [0]
    for b in stored:
        bounds.append(bounds[-1] + len(b))
    try:
        want: object = [r for i in range(len(stored)) for r in decode_data_block(
            data[bounds[i]:bounds[i + 1]], codec, version, path="x", block=i)
            if rng is None or rng.contains(r[0])]
    except CorruptObjectError:  # ChecksumMismatchError included
        want = "refused"
    try:
        got: object = check_stored_blocks(data, bounds, version, codec, rng).rows()
    except ValueError:
        got = "refused"
    assert got == want
    if damage == "none":
        assert got != "refused"


def test_a_merge_operator_may_return_any_bytes_like_value() -> None:
    class Joined(MergeOperator):
        def merge(self, key: bytes, existing: bytes | None, operand: bytes) -> bytes:
            return bytearray((existing or b"") + operand)  # type: ignore[return-value]

    class Text(MergeOperator):
        def merge(self, key: bytes, existing: bytes | None, operand: bytes) -> bytes:
            return "not bytes"  # type: ignore[return-value]

    rows = [(b"a", 3, MERGE, b"z", None, None), (b"a", 2, MERGE, b"y", None, None),
            (b"a", 1, VALUE, b"x", None, None), (b"b", 1, VALUE, b"w", None, None)]
    groups, _ = checked_groups(rows, 2)
    assert list(scan_pairs([groups], Joined())) == [(b"a", b"xyz"), (b"b", b"w")]
    assert scan_stats([groups], Joined()) == RangeStats.of([(b"a", b"xyz"), (b"b", b"w")])
    with pytest.raises(TypeError, match="must produce bytes"):
        list(scan_pairs([groups], Text()))


@pytest.mark.parametrize("codec", [CompressionCodec.NONE, CompressionCodec.ZSTD])
def test_fill_steps_write_the_sst_add_rows_writes(codec: int) -> None:
    """``SstWriter.fill`` with the native pipeline's retain step (in small budgets) writes
    byte for byte the SST that ``add_rows`` writes from the reference's kept rows."""
    rows = [(b"key%05d" % k, s, VALUE if (k + s) % 4 else TOMBSTONE,
             b"" if (k + s) % 4 == 0 else b"v%d" % k * (1 + k % 9), None, 5)
            for k in range(2000) for s in (3, 1)]
    groups, _ = checked_groups(rows, 2, block_rows=(25,), blocks_per_group=4)
    policy = RetentionPolicy(5, True, 0)  # one version per key, tombstones dropped
    opts = SstWriterOptions(block_size=512, codec=codec, min_filter_keys=10)
    stats = RetentionStats()
    pipe = RetainPipe([groups], policy, stats)
    filled = SstWriter(opts)
    steps = 1
    while not filled.fill(pipe.fill, 3000):
        steps += 1
    want_stats = RetentionStats()
    kept = [r for b in retained_batches([[rows]], policy, want_stats, use_native=False)
            for r in b]
    reference = SstWriter(opts)
    reference.add_rows(kept)
    assert steps > 10 and stats == want_stats and 1000 < len(kept) < 2000
    assert filled.finish().to_bytes() == reference.finish().to_bytes()
