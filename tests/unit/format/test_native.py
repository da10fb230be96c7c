"""The C extension (slatelib._speedups) against the pure-Python reference, differentially.

Every native function must return what its reference returns and reject what it rejects:
hashes, bloom filters, decoded rows (also of fuzzed, truncated and mangled blocks), and the
block writer's blocks, index keys, stats and hashes. The golden SST tests run natively in
this process and with ``SLATELIB_NO_NATIVE=1`` in a subprocess, so CI covers both paths.
"""

from __future__ import annotations

import os
import subprocess
import sys
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import slatelib.format.sst as sst_module
from slatelib.core.manifest import CompressionCodec, FilterFormat, SstType
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.errors import CorruptObjectError
from slatelib.format import bloom, native
from slatelib.format.block import (
    BlockBuilderV2,
    BlockWriterPy,
    decode_block_v2,
    decode_block_v2_py,
    encode_block_v2,
)
from slatelib.format.block_v1 import BlockBuilderV1, decode_block_v1, decode_block_v1_py
from slatelib.format.native import BlockWriter
from slatelib.format.sst import SstWriter, SstWriterOptions, parse_sst
from tests.conftest import FIXTURE_NAMES, GOLDEN_DIR
from tests.unit.native_only import native_only, require_native

# A failing example with 5 kB values has a large repr; that must not turn into an error.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"
)

REPO = Path(__file__).resolve().parents[3]
sp = native.speedups


@pytest.fixture
def native_built() -> None:
    """The C extension is optional for users (pure Python otherwise) but not for the tests:
    without it these equivalence checks cannot run, which is a failure, not a skip."""
    require_native(sp is not None, "slatelib._speedups")


needs_native = pytest.mark.usefixtures("native_built")
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DIFF = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

U64_MAX = (1 << 64) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


# ------------------------------------------------------------------------ the build itself


@native_only
def test_extension_is_built() -> None:
    """CI must exercise the native path: a missing build is a failure, not a silent skip."""
    assert not native.DISABLED_BY_ENV, "SLATELIB_NO_NATIVE=1 is set: the native path is untested"
    assert native.HAVE_NATIVE, (
        "slatelib._speedups is not importable: run `make install` "
        "(pip install -e .) to build it in place (gcc and the Python headers are needed)"
    )


@needs_native
def test_extension_is_built_in_place_and_not_older_than_its_source() -> None:
    so = Path(sp.__file__)  # type: ignore[union-attr, attr-defined]
    src = REPO / "slatelib" / "_speedups.c"
    assert so.parent == src.parent, f"{so} is not the in-place build of {src} (make install)"
    assert so.stat().st_mtime >= src.stat().st_mtime, (
        f"{so.name} is older than _speedups.c: rebuild with `make install`"
    )


def test_public_names_use_the_native_code_when_built() -> None:
    if sp is None:
        assert bloom.siphash13 is bloom.siphash13_py
        assert decode_block_v2 is decode_block_v2_py
    else:
        assert bloom.siphash13 is sp.siphash13
        assert decode_block_v2 is not decode_block_v2_py


# ------------------------------------------------------------------------ strategies

byte_values = st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]) | st.integers(0, 255)
prefixes = st.sampled_from([b"", b"\x00", b"\xff\xff", b"user:", b"\x00\xff" * 3, b"L" * 200])


@st.composite
def keys(draw: st.DrawFn) -> bytes:
    prefix = draw(prefixes)
    tail = bytes(draw(st.lists(byte_values, min_size=0 if prefix else 1, max_size=10)))
    return prefix + tail


values = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"", b"\x00" * 130, b"x" * 5000]),  # 5000: larger than a 4 KiB block
)
seqs = st.one_of(st.integers(0, U64_MAX), st.sampled_from([0, 1, 1 << 63, U64_MAX]))
timestamps = st.one_of(
    st.none(), st.integers(I64_MIN, I64_MAX), st.sampled_from([I64_MIN, -1, 0, I64_MAX])
)


@st.composite
def rows_of(draw: st.DrawFn) -> Row:
    key, seq, kind = draw(keys()), draw(seqs), draw(st.sampled_from([VALUE, TOMBSTONE, MERGE]))
    value = b"" if kind == TOMBSTONE else draw(values)
    return (key, seq, kind, value, draw(timestamps), draw(timestamps))


def compacted(rows: list[Row]) -> list[Row]:
    """Key ascending, seq descending, no duplicate (key, seq)."""
    seen: dict[tuple[bytes, int], Row] = {}
    for r in rows:
        seen.setdefault((r[0], r[1]), r)
    return sorted(seen.values(), key=lambda r: (r[0], -r[1]))


row_lists = st.lists(rows_of(), min_size=1, max_size=60)
block_sizes = st.one_of(
    st.sampled_from([0, 1, 16, 64, 100, 512, 1024, 4096, 65535]), st.integers(0, 5000)
)


# ------------------------------------------------------------------------ hashes and blooms


@needs_native
@DIFF
@given(st.lists(st.binary(max_size=40) | keys(), max_size=40))
def test_siphash13_matches_reference(ks: list[bytes]) -> None:
    assert sp is not None
    expected = [bloom.siphash13_py(k) for k in ks]
    assert [sp.siphash13(k) for k in ks] == expected
    assert list(array("Q", sp.siphash13_many(ks))) == expected
    assert list(bloom.siphash13_many(tuple(ks))) == expected
    assert [sp.siphash13(bytearray(k)) for k in ks] == expected
    assert [sp.siphash13(memoryview(k)) for k in ks] == expected


@needs_native
def test_siphash13_rejects_non_bytes() -> None:
    assert sp is not None
    for bad in ("text", None, 5):
        with pytest.raises(TypeError):
            sp.siphash13(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sp.siphash13_many([b"a", "b"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        sp.siphash13_many(5)  # type: ignore[arg-type]


u64s = st.one_of(st.integers(0, U64_MAX), st.sampled_from([0, U64_MAX, 0xFFFFFFFF, 1 << 32]))


@needs_native
@DIFF
@given(st.lists(u64s, max_size=300), st.integers(0, 40) | st.sampled_from([100, 1000]))
def test_bloom_build_matches_reference(hashes: list[int], bits_per_key: int) -> None:
    assert sp is not None
    expected = bloom.build_bloom_from_hashes_py(hashes, bits_per_key)
    assert sp.bloom_build(array("Q", hashes), bits_per_key) == expected
    assert sp.bloom_build(array("Q", hashes).tobytes(), bits_per_key) == expected
    assert bloom.build_bloom_from_hashes(hashes, bits_per_key) == expected


@needs_native
@DIFF
@given(st.integers(0, 5000) | st.integers(0, I64_MAX))
def test_bloom_num_probes_matches_single_precision_reference(bits_per_key: int) -> None:
    assert sp is not None
    data = sp.bloom_build(b"", bits_per_key)
    assert int.from_bytes(data[:2], "big") == bloom.num_probes_for(bits_per_key)
    assert data == bloom.build_bloom_from_hashes_py([], bits_per_key)


@needs_native
def test_bloom_build_rejects_bad_arguments() -> None:
    assert sp is not None
    with pytest.raises(ValueError):
        sp.bloom_build(b"1234567", 10)  # not a multiple of 8
    for build in (bloom.build_bloom_from_hashes, bloom.build_bloom_from_hashes_py):
        with pytest.raises(ValueError):
            build([1, 2], -1)
    with pytest.raises(ValueError):
        bloom.build_bloom_from_hashes([-1], 10)
    with pytest.raises((MemoryError, OverflowError)):
        sp.bloom_build(b"\x00" * 8000, I64_MAX)


@needs_native
@DIFF
@given(st.binary(max_size=64), st.integers(-3, 40) | st.sampled_from([1000, 70000]), u64s)
def test_bloom_check_matches_reference(bits: bytes, num_probes: int, h: int) -> None:
    assert sp is not None
    bf = bloom.BloomFilter(num_probes, bits)
    assert sp.bloom_check(bits, num_probes, h) == bf.might_contain_hash_py(h)


@needs_native
@DIFF
@given(st.lists(keys(), min_size=1, max_size=100), st.lists(keys(), max_size=30))
def test_bloom_filters_built_natively_contain_their_keys(
    ks: list[bytes], others: list[bytes]
) -> None:
    bf = bloom.BloomFilter.decode(bloom.build_bloom(ks, 10))
    for k in ks:
        assert bf.might_contain(k)
    for k in others:
        assert bf.might_contain(k) == bf.might_contain_hash_py(bloom.siphash13_py(k))


@needs_native
def test_bloom_check_rejects_hashes_outside_u64() -> None:
    assert sp is not None
    for h in (-1, 1 << 64):
        with pytest.raises(ValueError):
            sp.bloom_check(b"\xff", 3, h)


# ------------------------------------------------------------------------ decoders


def outcome(decode: Callable[[bytes], list[Row]], data: bytes) -> tuple[str, Any]:
    """``("ok", rows)`` or ``("corrupt", None)``; any other exception fails the test."""
    try:
        return "ok", decode(data)
    except CorruptObjectError:
        return "corrupt", None


def check_same_outcome_v2(data: bytes) -> tuple[str, Any]:
    py = outcome(decode_block_v2_py, data)
    assert outcome(decode_block_v2, data) == py
    return py


def check_same_outcome_v1(data: bytes) -> tuple[str, Any]:
    py = outcome(decode_block_v1_py, data)
    assert outcome(decode_block_v1, data) == py
    return py


def cut_blocks(rows: list[Row], builder: type[BlockBuilderV1] | type[BlockBuilderV2],
               block_size: int = 4096) -> list[bytes]:
    """Rows cut into blocks as the writers cut them (one block may hold only ~64 KiB)."""
    out, b = [], builder(block_size)
    for r in rows:
        if not b.add(r):
            out.append(b.finish())
            b = builder(block_size)
            b.add(r)
    out.append(b.finish())
    return out


def v1_block(rows: list[Row]) -> bytes:
    """One v1 block with every row (callers keep rows small enough for u16 offsets)."""
    b = BlockBuilderV1(block_size=1 << 40)
    for r in rows:
        b.add(r)
    return b.finish()


def v1_expected(rows: list[Row]) -> list[Row]:
    return [(k, s, kd, v, None if kd == TOMBSTONE else e, c) for k, s, kd, v, e, c in rows]


@needs_native
@DIFF
@given(row_lists, st.sampled_from([64, 4096, 65535]))
def test_decoders_match_reference_on_valid_blocks(rows: list[Row], block_size: int) -> None:
    v2 = [check_same_outcome_v2(b) for b in cut_blocks(rows, BlockBuilderV2, block_size)]
    assert [r for ok, got in v2 for r in got] == rows
    v1 = [check_same_outcome_v1(b) for b in cut_blocks(rows, BlockBuilderV1, block_size)]
    assert [r for ok, got in v1 for r in got] == v1_expected(rows)
    for block in cut_blocks(rows, BlockBuilderV2, block_size):
        assert decode_block_v2(bytearray(block)) == decode_block_v2(memoryview(block))


@needs_native
def test_oversized_rows_decode_alike() -> None:
    """A 70000-byte value: its own block, past every u16 limit of the block trailer."""
    big = [(b"big", 7, VALUE, b"\xff" * 70000, None, 1), (b"c", 1, TOMBSTONE, b"", 5, None)]
    for builder, same in ((BlockBuilderV2, check_same_outcome_v2), (BlockBuilderV1, check_same_outcome_v1)):
        blocks = cut_blocks(big, builder, 65535)
        assert len(blocks) == 2
        assert same(blocks[0]) == ("ok", big[:1])
        assert same(blocks[0][:-3] + blocks[0][-2:])[0] == "corrupt"


@needs_native
def test_decoders_accept_empty_blocks_like_the_reference() -> None:
    for data in (b"\x00\x00", b"", b"\x00", b"\x01", b"\xff\xff"):
        check_same_outcome_v2(data)
        check_same_outcome_v1(data)
    assert decode_block_v2(b"\x00\x00") == []
    assert decode_block_v1(b"junk\x00\x00") == []  # v1 reads only what the offsets name


def _mangle(block: bytes, data: st.DataObject) -> bytes:
    out = bytearray(block)
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "set", "cut", "insert", "delete", "trailer"]))
        i = data.draw(st.integers(0, max(len(out) - 1, 0)))
        if op == "flip" and out:
            out[i] ^= data.draw(st.integers(1, 255))
        elif op == "set" and out:
            out[i] = data.draw(byte_values)
        elif op == "cut":
            del out[i:]
        elif op == "insert":
            out[i:i] = data.draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and out:
            del out[i : i + data.draw(st.integers(1, 8))]
        elif op == "trailer" and len(out) >= 2:
            out[-2:] = data.draw(st.integers(0, 0xFFFF)).to_bytes(2, "big")
    return bytes(out)


small_row_lists = st.lists(rows_of(), min_size=1, max_size=10)


@needs_native
@FUZZ
@given(small_row_lists, st.data())
def test_mangled_v2_blocks_decode_alike(rows: list[Row], data: st.DataObject) -> None:
    block = encode_block_v2(rows)
    cut = data.draw(st.integers(0, len(block)))
    check_same_outcome_v2(block[:cut])
    check_same_outcome_v2(_mangle(block, data))


@needs_native
@FUZZ
@given(small_row_lists, st.data())
def test_mangled_v1_blocks_decode_alike(rows: list[Row], data: st.DataObject) -> None:
    block = v1_block(rows)
    cut = data.draw(st.integers(0, len(block)))
    check_same_outcome_v1(block[:cut])
    check_same_outcome_v1(_mangle(block, data))


@needs_native
@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_decode_alike(data: bytes) -> None:
    check_same_outcome_v2(data)
    check_same_outcome_v1(data)


def _varint(n: int, pad: int = 0) -> bytes:
    """LEB128, with ``pad`` redundant trailing bytes (non-canonical but decodable)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    if pad:
        out[-1] |= 0x80
        out += b"\x80" * (pad - 1) + b"\x00"
    return bytes(out)


lengths = st.one_of(st.integers(0, 12), st.sampled_from([127, 128, 300, 1 << 35, (1 << 42) - 1]))
flag_bytes = st.one_of(st.integers(0, 15), st.integers(0, 255))


@st.composite
def raw_v2_blocks(draw: st.DrawFn) -> bytes:
    """Blocks assembled field by field, mostly well formed, to reach every decoder path."""
    out = bytearray()
    nrows = draw(st.integers(0, 6))
    for _ in range(nrows):
        shared, unshared, vlen = draw(lengths), draw(lengths), draw(lengths)
        pad = draw(st.sampled_from([0, 0, 0, 1, 5, 6]))
        out += _varint(shared, pad) + _varint(unshared) + _varint(vlen)
        out += draw(st.binary(min_size=min(unshared, 12), max_size=min(unshared, 12)))
        out += draw(st.binary(min_size=min(vlen, 12), max_size=min(vlen, 12)))
        flags = draw(flag_bytes)
        out += draw(st.binary(min_size=8, max_size=8)) + bytes([flags])
        out += draw(st.binary(min_size=0, max_size=16))
    restarts = draw(st.integers(0, 3))
    for _ in range(restarts):
        out += draw(st.integers(0, 0xFFFF)).to_bytes(2, "big")
    out += draw(st.sampled_from([restarts, restarts, 0, 1, 0xFFFF])).to_bytes(2, "big")
    return bytes(out)


@st.composite
def raw_v1_blocks(draw: st.DrawFn) -> bytes:
    out = bytearray()
    offsets = []
    for _ in range(draw(st.integers(0, 5))):
        offsets.append(len(out))
        slen = draw(st.integers(0, 10))
        out += draw(st.integers(0, 12)).to_bytes(2, "big") + slen.to_bytes(2, "big")
        out += draw(st.binary(min_size=slen, max_size=slen))
        out += draw(st.binary(min_size=8, max_size=8)) + bytes([draw(flag_bytes)])
        out += draw(st.binary(max_size=16))
        vlen = draw(st.sampled_from([0, 1, 3, 10, 0xFFFFFFFF]))
        out += vlen.to_bytes(4, "big") + draw(st.binary(max_size=10))
    offsets = [draw(st.sampled_from([o, o, o + 1, 0, 0xFFFF])) for o in offsets]
    for o in offsets:
        out += o.to_bytes(2, "big")
    out += len(offsets).to_bytes(2, "big")
    return bytes(out)


@needs_native
@FUZZ
@given(raw_v2_blocks())
def test_field_level_fuzzed_v2_blocks_decode_alike(data: bytes) -> None:
    check_same_outcome_v2(data)


@needs_native
@FUZZ
@given(raw_v1_blocks())
def test_field_level_fuzzed_v1_blocks_decode_alike(data: bytes) -> None:
    check_same_outcome_v1(data)


@needs_native
def test_decoders_reject_the_documented_corruptions() -> None:
    tomb = bytearray(encode_block_v2([(b"k", 1, TOMBSTONE, b"", None, None)]))
    tomb[3 + 1 + 8] = 0x09  # TOMBSTONE | MERGE_OPERAND
    merge_unknown = bytearray(encode_block_v2([(b"k", 1, MERGE, b"v", None, None)]))
    merge_unknown[3 + 1 + 1 + 8] = 0x18  # MERGE_OPERAND | an unknown bit
    two = encode_block_v2([(b"ab", 1, VALUE, b"", None, None), (b"ac", 1, VALUE, b"", None, None)])
    long_shared = bytearray(two)
    long_shared[3 + 2 + 9] = 3  # second row claims 3 shared bytes of a 2-byte key
    past_end = encode_block_v2([(b"k", 1, VALUE, b"v", None, None)])[:-3] + b"\x00\x01"
    for bad in (tomb, merge_unknown, long_shared, past_end):
        assert check_same_outcome_v2(bytes(bad)) == ("corrupt", None)
    assert check_same_outcome_v2(bytes(two)) == (
        "ok", [(b"ab", 1, VALUE, b"", None, None), (b"ac", 1, VALUE, b"", None, None)]
    )
    with pytest.raises(CorruptObjectError, match="malformed v2 block"):
        decode_block_v2(bytes(tomb))


@needs_native
def test_tombstone_value_bytes_are_dropped_alike() -> None:
    row = bytearray(encode_block_v2([(b"k", 1, VALUE, b"xy", None, None)]))
    row[3 + 1 + 2 + 8] = 0x01  # turn the value row into a tombstone that still has a value
    assert check_same_outcome_v2(bytes(row)) == ("ok", [(b"k", 1, TOMBSTONE, b"", None, None)])


@needs_native
def test_decoders_reject_non_buffers() -> None:
    for decode in (decode_block_v2, decode_block_v1):
        with pytest.raises(TypeError):
            decode("text")  # type: ignore[arg-type]


def _golden_ssts() -> list[Path]:
    return sorted(
        p for name in FIXTURE_NAMES for sub in ("compacted", "wal")
        if (GOLDEN_DIR / name / sub).is_dir()
        for p in (GOLDEN_DIR / name / sub).iterdir() if p.stat().st_size > 0
    )


@needs_native
def test_every_golden_block_decodes_alike() -> None:
    from slatelib.format.sst import decode_region

    blocks = 0
    for path in _golden_ssts():
        parsed = parse_sst(path.read_bytes(), path=str(path))
        py = decode_block_v2_py if parsed.format_version == 2 else decode_block_v1_py
        nat = decode_block_v2 if parsed.format_version == 2 else decode_block_v1
        for i in range(len(parsed.index.offsets)):
            raw = decode_region(parsed.block_region(i), parsed.info.compression, path=None,
                                what="block", block=i)
            assert nat(raw) == py(raw)
            blocks += 1
    assert blocks > 100


# ------------------------------------------------------------------------ block writer


def _writers(block_size: int, compacted: bool, want_hashes: bool) -> tuple[BlockWriter, ...]:
    assert sp is not None
    return (
        sp.BlockWriterV2(block_size, compacted=compacted, want_hashes=want_hashes),
        BlockWriterPy(block_size, compacted=compacted, want_hashes=want_hashes),
    )


def _state(w: BlockWriter) -> tuple[Any, ...]:
    return (w.num_rows, w.num_puts, w.num_deletes, w.num_merges, w.raw_key_size,
            w.raw_val_size, w.first_key, w.first_seq, w.last_key, w.last_seq, w.open_size,
            w.open_rows)


def _drive(w: BlockWriter, rows: list[Row], cuts: list[int], per_row: bool) -> list[Any]:
    """Feed rows in slices (add_rows, or add per row) and record everything observable."""
    trace: list[Any] = []
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    for start, end in zip(bounds, bounds[1:], strict=False):
        if per_row:
            pending = [w.add(r) for r in rows[start:end]]
            trace.append(pending)
        else:
            trace.append(w.add_rows(rows, start, end))
        trace.append((_state(w), w.take_blocks()))
    w.finish_block()
    trace.append((_state(w), w.take_blocks(), w.hashes(), w.bloom(10), w.bloom(7)))
    return trace


@needs_native
@DIFF
@given(row_lists, block_sizes, st.booleans(), st.lists(st.integers(0, 60), max_size=4),
       st.booleans())
def test_block_writer_matches_reference(
    rows: list[Row], block_size: int, want_hashes: bool, cuts: list[int], per_row: bool
) -> None:
    rows = compacted(rows)
    nat, py = _writers(block_size, True, want_hashes)
    assert _drive(nat, rows, cuts, per_row) == _drive(py, rows, cuts, per_row)


@needs_native
@DIFF
@given(row_lists, block_sizes, st.lists(st.integers(0, 60), max_size=4))
def test_wal_block_writer_matches_reference(
    rows: list[Row], block_size: int, cuts: list[int]
) -> None:
    nat, py = _writers(block_size, False, False)  # WAL: any order, seq index keys
    assert _drive(nat, rows, cuts, False) == _drive(py, rows, cuts, False)


@needs_native
@DIFF
@given(row_lists, block_sizes)
def test_native_blocks_equal_the_reference_builder(rows: list[Row], block_size: int) -> None:
    """Cross-check against BlockBuilderV2 directly (the code the golden tests verified)."""
    rows = compacted(rows)
    nat, _ = _writers(block_size, True, False)
    nat.add_rows(rows)
    nat.finish_block()
    expected = []
    b = BlockBuilderV2(block_size)
    for r in rows:
        if not b.add(r):
            expected.append(b.finish())
            b = BlockBuilderV2(block_size)
            b.add(r)
    expected.append(b.finish())
    got = [blk[0] for blk in nat.take_blocks()]
    assert got == expected
    assert [r for blk in got for r in decode_block_v2(blk)] == rows


BAD_ROWS: list[Any] = [
    (b"", 1, VALUE, b"v", None, None),  # empty key
    (b"\x00", 1, VALUE, b"v", None, None),  # before every generated key: out of order
    (b"zz", -1, VALUE, b"v", None, None),
    (b"zz", 1 << 64, VALUE, b"v", None, None),
    (b"zz", 1, 3, b"v", None, None),
    (b"zz", 1, -1, b"v", None, None),
    (b"zz", 1, VALUE, b"v", 1 << 63, None),
    (b"zz", 1, VALUE, b"v", None, I64_MIN - 1),
    (b"zz", 1, VALUE, None, None, None),
    (b"zz", 1, VALUE, "text", None, None),
    ("zz", 1, VALUE, b"v", None, None),
    (b"zz", "1", VALUE, b"v", None, None),
    (b"zz", 1, VALUE, b"v", 1.5, None),
    (b"zz", 1, VALUE, b"v", None),
    (b"zz", 1, VALUE, b"v", None, None, None),
    None,
]
OUT_OF_ORDER = BAD_ROWS[1]


@needs_native
@DIFF
@given(st.lists(rows_of(), min_size=2, max_size=30), st.sampled_from(BAD_ROWS), st.data())
def test_rejected_rows_leave_both_writers_alike(
    rows: list[Row], bad: Any, data: st.DataObject
) -> None:
    rows = [r for r in compacted(rows) if b"\x01" <= r[0] < b"zz"]
    assume(rows)
    at = data.draw(st.integers(1 if bad is OUT_OF_ORDER else 0, len(rows)))
    block_size = data.draw(block_sizes)
    traces = []
    for w in _writers(block_size, True, True):
        w.add_rows(rows, 0, at)
        with pytest.raises((ValueError, TypeError)):
            w.add_rows([bad])
        with pytest.raises((ValueError, TypeError)):
            w.add(bad)
        traces.append(_drive(w, rows[at:], [], False))
    assert traces[0] == traces[1]


@needs_native
def test_writer_rejects_equal_key_with_non_decreasing_seq_naming_both_keys() -> None:
    for w in _writers(4096, True, False):
        w.add((b"k", 5, VALUE, b"", None, None))
        with pytest.raises(ValueError, match=r"b'k'@5 after b'k'@5"):
            w.add((b"k", 5, VALUE, b"", None, None))
        with pytest.raises(ValueError, match=r"b'j'@1 after b'k'@5"):
            w.add((b"j", 1, VALUE, b"", None, None))
        w.add((b"k", 4, VALUE, b"", None, None))
        assert w.num_rows == 2


@needs_native
def test_writer_accepts_list_rows_and_bytes_like_fields_like_the_reference() -> None:
    rows: list[Any] = [
        [b"a", 2, VALUE, bytearray(b"v1"), None, 7],
        (bytearray(b"b"), 1, MERGE, memoryview(b"v2"), -5, None),
        (b"c", 1, TOMBSTONE, None, 3, 4),  # a tombstone's value is never read
    ]
    outs = []
    for w in _writers(4096, True, True):
        for r in rows:
            w.add(r)
        w.finish_block()
        outs.append((w.take_blocks(), _state(w), w.hashes()))
    assert outs[0] == outs[1]


@needs_native
def test_writer_argument_errors() -> None:
    assert sp is not None
    with pytest.raises(ValueError):
        sp.BlockWriterV2(-1)
    w = sp.BlockWriterV2(4096)
    with pytest.raises(TypeError):
        w.add_rows(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        w.add_rows([], -1)
    assert w.add_rows([], 5, 2) == 0
    assert w.take_blocks() == [] and w.hashes() == b"" and w.first_key is None


@needs_native
def test_writer_restart_offset_limit_matches_reference() -> None:
    """Only a huge block size lets a restart point pass offset 0xFFFF: both refuse it."""
    rows = [(b"k%03d" % i, 1, VALUE, b"x" * 5000, None, None) for i in range(17)]
    for w in _writers(1 << 40, True, False):
        with pytest.raises(ValueError, match="u16"):
            w.add_rows(rows)
        assert w.num_rows == 16


# ------------------------------------------------------------------------ whole SSTs


def _reference_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    def factory(block_size: int, *, version: int = 2, compacted: bool = True,
                want_hashes: bool = False, prefix_lens: tuple[int, ...] = ()) -> BlockWriter:
        return BlockWriterPy(block_size, compacted=compacted, want_hashes=want_hashes,
                             prefix_lens=prefix_lens, version=version)

    monkeypatch.setattr(sst_module, "new_block_writer", factory)


sst_options = st.builds(
    SstWriterOptions,
    block_size=st.sampled_from([1, 64, 512, 4096, 65535]),
    codec=st.sampled_from([CompressionCodec.NONE, CompressionCodec.SNAPPY]),
    min_filter_keys=st.sampled_from([0, 1, 5, 1000]),
    bits_per_key=st.sampled_from([0, 3, 10, 16]),
    sst_type=st.sampled_from(list(SstType)),
    filter_format=st.sampled_from(list(FilterFormat)),
)


@needs_native
@DIFF
@given(row_lists, sst_options, st.booleans())
def test_sst_writer_bytes_match_reference_writer(
    rows: list[Row], options: SstWriterOptions, batch: bool
) -> None:
    if options.sst_type == SstType.COMPACTED:
        rows = compacted(rows)

    def encode() -> bytes:
        w = SstWriter(options)
        if batch:
            w.add_rows(rows)
        else:
            for r in rows:
                w.add(r)
        return w.finish().to_bytes()

    native_bytes = encode()
    with pytest.MonkeyPatch.context() as mp:
        _reference_writer(mp)
        assert encode() == native_bytes
    assert parse_sst(native_bytes).rows() == rows


@needs_native
def test_golden_ssts_reencode_identically_with_the_reference_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The golden re-encoding of test_sst.py, with the Python block writer in-process."""
    native_out = {}
    for path in _golden_ssts():
        parsed = parse_sst(path.read_bytes())
        if parsed.format_version != 2:
            continue
        opts = SstWriterOptions(
            block_size=65535 if parsed.info.sst_type == SstType.WAL else 1024,
            codec=CompressionCodec.NONE, sst_type=parsed.info.sst_type, min_filter_keys=1,
        )
        native_out[path] = (parsed.rows(), opts, sst_module.encode_sst(parsed.rows(), opts))
    _reference_writer(monkeypatch)
    for rows, opts, enc in native_out.values():
        assert sst_module.encode_sst(rows, opts).to_bytes() == enc.to_bytes()


def test_no_native_turns_the_extension_off() -> None:
    """SLATELIB_NO_NATIVE=1 turns the extension off; ``make test-pure`` then runs the golden,
    round-trip and corruption tests of block/bloom/SST, the compaction tasks that decode
    fetched blocks as memoryviews, and the rest of the unit suite on the pure-Python path
    (executors that get slatelib without its extension, e.g. from a --py-files zip, run it)."""
    env = dict(os.environ, SLATELIB_NO_NATIVE="1")
    probe = subprocess.run(
        [sys.executable, "-c", "from slatelib.format import native; print(native.HAVE_NATIVE)"],
        cwd=REPO, env=env, capture_output=True, text=True, check=True,
    )
    assert probe.stdout.strip() == "False"
