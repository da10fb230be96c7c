"""Checking a rescale (pure): ranges that tile the key space, stats that add up, and the
native range stats (``slatelib._speedups.range_stats``) against the pure-Python reference."""

from __future__ import annotations

import hashlib
import random
import re
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatelib.core.manifest import (
    ExternalDb,
    Manifest,
    Segment,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstView,
)
from slatelib.core.ranges import BytesRange
from slatelib.core.rescale_check import (
    DIGEST_MOD,
    RangeStats,
    check_tiling,
    committed_problem,
    compare_stats,
    row_digest,
)
from slatelib.core.rescale_plan import shard_ranges
from slatelib.errors import InvalidDbStateError
from slatelib.format import native
from tests.unit.native_only import require_native

sp = native.speedups

# Row lengths around BLAKE2b's 128-byte block (the 4-byte key length is hashed first).
EDGE_LENGTHS = [0, 1, 3, 4, 7, 8, 9, 100, 123, 124, 125, 127, 128, 129, 252, 253, 256, 257,
                1000, 70_000]


def test_shard_ranges_tile_the_key_space() -> None:
    check_tiling(shard_ranges([b"g", b"p"]))


@pytest.mark.parametrize("ranges", [
    [BytesRange.half_open(None, b"g"), BytesRange.half_open(b"h", None)],          # gap
    [BytesRange.half_open(None, b"h"), BytesRange.half_open(b"g", None)],          # overlap
    [BytesRange.half_open(b"a", b"g"), BytesRange.half_open(b"g", None)],          # no -inf
    [BytesRange.half_open(None, b"g")],                                            # no +inf
    [],
])
def test_tiling_refuses_gaps_overlaps_and_short_covers(ranges: list[BytesRange]) -> None:
    with pytest.raises(InvalidDbStateError):
        check_tiling(ranges)


def test_range_stats_of_disjoint_parts_add_up() -> None:
    rows = [(bytes([i]), bytes([i]) * i) for i in range(1, 50)]
    whole = RangeStats.of(rows)
    parts = RangeStats.of(rows[:20]) + RangeStats.of(rows[20:])
    assert parts == whole and whole.keys == 49
    assert compare_stats("db-0", whole, parts) is None
    changed = RangeStats.of(rows[:-1] + [(rows[-1][0], b"other")])
    assert "db-0" in str(compare_stats("db-0", whole, changed))


def test_row_digest_is_blake2b_128_of_the_key_length_key_and_value() -> None:
    for key, value in [(b"", b""), (b"k", b""), (b"", b"v"), (b"key", b"value" * 100)]:
        ref = hashlib.blake2b(len(key).to_bytes(4, "little") + key + value, digest_size=16)
        assert row_digest(key, value) == int.from_bytes(ref.digest(), "little")
        assert RangeStats.of([(key, value)]) == RangeStats(1, len(key) + len(value),
                                                           row_digest(key, value))
    # the key length is hashed: moving a byte between key and value changes the digest
    assert row_digest(b"ab", b"c") != row_digest(b"a", b"bc")


# ------------------------------------------------------------------ native range stats


@pytest.fixture
def native_built() -> None:
    """As in tests/unit/format/test_native.py: without the extension the equivalence
    cannot be checked, which is a failure, not a skip."""
    require_native(sp is not None and hasattr(sp, "range_stats"),
                   "slatelib._speedups (with range_stats)")


needs_native = pytest.mark.usefixtures("native_built")


def native_stats(rows: object) -> RangeStats:
    assert sp is not None
    return RangeStats(*sp.range_stats(rows))  # type: ignore[attr-defined]


def edge_rows() -> list[tuple[bytes, bytes]]:
    rng = random.Random(7)
    return [(rng.randbytes(k), rng.randbytes(v)) for k in EDGE_LENGTHS for v in EDGE_LENGTHS
            if k < 1000 or v < 1000]


@needs_native
def test_native_row_digests_equal_the_reference_at_block_edges() -> None:
    for key, value in edge_rows():
        assert native_stats([(key, value)]) == RangeStats(
            1, len(key) + len(value), row_digest(key, value)), (len(key), len(value))


rows_strategy = st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=600)),
                         max_size=60)


@needs_native
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=rows_strategy, cut=st.integers(0, 60))
def test_native_range_stats_equal_the_reference_and_add_up(
        rows: list[tuple[bytes, bytes]], cut: int) -> None:
    whole = native_stats(rows)
    assert whole == RangeStats.of(rows)
    assert native_stats(iter(rows[:cut])) + native_stats(rows[cut:]) == whole
    assert RangeStats.of(rows[:cut]) + RangeStats.of(rows[cut:]) == whole


@needs_native
def test_native_digest_sum_wraps_at_2_128_as_the_reference() -> None:
    rng = random.Random(3)
    rows = [(rng.randbytes(16), rng.randbytes(100)) for _ in range(5000)]
    total = native_stats(rows)
    assert total == RangeStats.of(rows)
    assert sum(row_digest(k, v) for k, v in rows) >= DIGEST_MOD > total.digest  # it wrapped


@needs_native
def test_native_range_stats_take_any_iterable_of_bytes_like_pairs() -> None:
    rows = [(b"a", b"1"), (b"", b""), (b"c", b"3" * 300)]
    expected = RangeStats.of(rows)

    def gen() -> object:
        yield from rows

    assert native_stats(gen()) == expected
    assert native_stats([[k, v] for k, v in rows]) == expected
    assert native_stats([(memoryview(k), bytearray(v)) for k, v in rows]) == expected
    assert native_stats([]) == RangeStats()


@needs_native
@pytest.mark.parametrize("rows, error", [
    ([(b"a",)], ValueError),
    ([(b"a", b"b", b"c")], ValueError),
    ([("a", b"b")], TypeError),
    ([(b"a", None)], TypeError),
    ([1], TypeError),
    (5, TypeError),
])
def test_native_range_stats_refuse_what_is_not_rows(rows: object, error: type) -> None:
    with pytest.raises(error):
        native_stats(rows)


@needs_native
def test_native_range_stats_pass_on_the_iterators_error() -> None:
    def failing() -> object:
        yield b"k", b"v"
        raise KeyError("scan failed")

    with pytest.raises(KeyError, match="scan failed"):
        native_stats(failing())


# ------------------------------------------------------------------ committed outputs
def _handle(n: int, first: bytes, last: bytes) -> SstHandle:
    return SstHandle(n, SsTableInfo(first, last, 100 + n, 10, 0, 0))


OUTPUTS = [_handle(11, b"a", b"f"), _handle(12, b"g", b"m"), _handle(13, b"n", b"z")]


def _committed(outputs: list[SstHandle] = OUTPUTS, **fields: object) -> Manifest:
    run = SortedRun(0, tuple(SstView(h.id, h.id, None) for h in outputs))
    values: dict[str, object] = {"ssts": tuple(outputs), "compacted": (run,),
                                 "external_dbs": (ExternalDb("src", uuid.uuid4(), None, ()),)}
    values.update(fields)
    return Manifest(**values)  # type: ignore[arg-type]


def test_a_manifest_of_exactly_the_checked_outputs_passes() -> None:
    assert committed_problem(_committed(), OUTPUTS, ["src"]) is None


@pytest.mark.parametrize(("manifest", "problem"), [
    (_committed(OUTPUTS[:2]), "not checked|missing"),                                 # one left out
    (_committed([*OUTPUTS, _handle(14, b"zz", b"zzz")]), "not checked|missing"),      # an extra SST
    (_committed([OUTPUTS[1], OUTPUTS[0], OUTPUTS[2]]), "another order"),               # reordered
    (_committed(l0=(SstView(99, 11, None),)), "L0"),                                  # an L0 left
    (_committed(compacted=(SortedRun(0, tuple(SstView(h.id, h.id, None) for h in OUTPUTS)),
                           SortedRun(1, (SstView(98, 11, None),)))), "sorted runs"),  # two runs
    (_committed(compacted=(SortedRun(0, (SstView(11, 11, BytesRange.half_open(b"b", None)),
                                         SstView(12, 12, None), SstView(13, 13, None))),)),
     "clipped"),                                                                       # a view cut
    (_committed(ssts=(_handle(11, b"a", b"g"), *OUTPUTS[1:])), "handles"),             # other info
    (_committed(external_dbs=(ExternalDb("src", uuid.uuid4(), None, (7,)),)), "src"),  # still attached
    (_committed(segments=(Segment(b"p", None, (), ()),)), "segments"),
    (_committed(initialized=False), "not initialized"),
    (_committed(destroyed_at_s=1), "destroyed"),
])
def test_a_manifest_that_is_not_exactly_the_checked_outputs_is_named(
        manifest: Manifest, problem: str) -> None:
    got = committed_problem(manifest, OUTPUTS, ["src"])
    assert got is not None and re.search(problem, got), got
