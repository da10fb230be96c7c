"""Filter policies of SstWriter (format §7.9): whole-key and prefix bloom filters, each
named as 0.17 names it, built bit for bit by the rule of format §7.9 on every writing
path: the native block writer (fixed prefixes hashed in C) and the Python one, with and
without the native SST finishing, and extractors running as Python code."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slatelib.format.sst as sst_module
from slatelib.core.filter_policy import FilterPolicySpec, PrefixExtractorSpec, fixed_prefix
from slatelib.core.manifest import FilterFormat, SstType
from slatelib.core.row import TOMBSTONE, VALUE, Row
from slatelib.errors import InvalidArgumentError
from slatelib.format import bloom
from slatelib.format.block import BlockWriterPy
from slatelib.format.native import BlockWriter
from slatelib.format.sst import SstWriter, SstWriterOptions, decode_region, parse_sst
from tests.unit.format import _prefixes

FIXED2 = PrefixExtractorSpec("fixed2", fixed=2)
FIXED1 = PrefixExtractorSpec("one", fixed=1)
COLON = PrefixExtractorSpec("colon", target="tests.unit.format._prefixes:upto_colon")
FIRST_TWO = PrefixExtractorSpec("two", target="tests.unit.format._prefixes:FirstTwo")

POLICY_SETS: list[tuple[FilterPolicySpec, ...]] = [
    (FilterPolicySpec(10),),
    (FilterPolicySpec(7, FIXED2, False),),
    (FilterPolicySpec(12, FIXED1),),
    (FilterPolicySpec(7, FIXED2, False), FilterPolicySpec(5)),
    (FilterPolicySpec(8, COLON, False), FilterPolicySpec(10, FIXED2), FilterPolicySpec(3)),
    (FilterPolicySpec(9, FIRST_TWO),),
    (),
]
FNS: dict[str, Callable[[bytes], int | None]] = {
    "fixed2": fixed_prefix(2), "one": fixed_prefix(1), "colon": _prefixes.upto_colon,
    "two": _prefixes.FirstTwo().prefix_len,
}


def expected_filters(rows: list[Row], policies: tuple[FilterPolicySpec, ...]
                     ) -> dict[str, bytes]:
    """format §7.9, step by step, with the reference SipHash and bloom builder."""
    out = {}
    for p in policies:
        hashes: list[int] = []
        last: bytes | None = None
        for row in rows:
            key = row[0]
            if p.prefix is not None:
                n = FNS[p.prefix.name](key)
                if n is not None and key[:n] != last:
                    hashes.append(bloom.siphash13_py(key[:n]))
                    last = key[:n]
            if p.whole_key:
                hashes.append(bloom.siphash13_py(key))
        out[p.name] = bloom.build_bloom_from_hashes_py(hashes, p.bits_per_key)
    return out


def filters_of(data: bytes) -> dict[str, bytes] | None:
    parsed = parse_sst(data)
    info = parsed.info
    if not info.filter_len:
        return None
    region = data[info.filter_offset:info.filter_offset + info.filter_len]
    payload = decode_region(region, info.compression, path=None, what="filter")
    return bloom.decode_composite(payload)


def _python_block_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    def factory(block_size: int, *, version: int = 2, compacted: bool = True,
                want_hashes: bool = False, prefix_lens: tuple[int, ...] = ()) -> BlockWriter:
        return BlockWriterPy(block_size, compacted=compacted, want_hashes=want_hashes,
                             prefix_lens=prefix_lens, version=version)
    monkeypatch.setattr(sst_module, "new_block_writer", factory)


keys = st.one_of(st.binary(min_size=1, max_size=6),
                 st.builds(lambda a, b: a + b":" + b, st.binary(min_size=0, max_size=3),
                           st.binary(min_size=0, max_size=3)))
row_lists = st.lists(st.tuples(keys, st.integers(1, 5), st.sampled_from([VALUE, TOMBSTONE])),
                     min_size=1, max_size=120)


def as_rows(raw: list[tuple[bytes, int, int]]) -> list[Row]:
    seen = {(k, s): (k, s, kind, b"" if kind == TOMBSTONE else b"v", None, 7)
            for k, s, kind in raw}
    return sorted(seen.values(), key=lambda r: (r[0], -r[1]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row_lists, st.sampled_from(POLICY_SETS), st.sampled_from([16, 64, 4096]))
def test_every_writing_path_builds_the_filters_of_format_7_9(
    raw: list[tuple[bytes, int, int]], policies: tuple[FilterPolicySpec, ...], block_size: int,
) -> None:
    rows = as_rows(raw)
    opts = SstWriterOptions(block_size=block_size, min_filter_keys=1, filter_policies=policies)
    want = expected_filters(rows, policies) if policies else None
    outputs = []
    for python_writer in (False, True):
        for native_finish in (True, False):
            with pytest.MonkeyPatch.context() as mp:
                if python_writer:
                    _python_block_writer(mp)
                w = SstWriter(opts, native_finish=native_finish)
                w.add_rows(rows)
                data = w.finish().to_bytes()
            got = filters_of(data)
            assert got == want
            if got is not None:
                assert list(got) == [p.name for p in policies]  # the configured order
            outputs.append(data)
    assert len(set(outputs)) == 1
    assert parse_sst(outputs[0]).rows() == rows


def test_filter_names_follow_0_17() -> None:
    assert FilterPolicySpec(10).name == "_bf"
    assert FilterPolicySpec(10, FIXED2).name == "_bf:p=fixed2"
    assert FilterPolicySpec(10, FIXED2, whole_key=False).name == "_bf:p=fixed2:wh=0"


def test_prefixes_are_hashed_once_per_run_across_blocks_and_rows_added_one_by_one() -> None:
    rows = [(b"aa%03d" % i, 1, VALUE, b"x" * 30, None, None) for i in range(50)]
    rows += [(b"ab", 2, VALUE, b"", None, None), (b"b", 1, VALUE, b"", None, None)]
    policy = (FilterPolicySpec(10, FIXED2, whole_key=False),)
    w = SstWriter(SstWriterOptions(block_size=64, min_filter_keys=1, filter_policies=policy))
    for r in rows:
        w.add(r)
    enc = w.finish()
    assert enc.num_blocks > 10
    data = (filters_of(enc.to_bytes()) or {})["_bf:p=fixed2:wh=0"]
    assert data == bloom.build_bloom_from_hashes_py(
        [bloom.siphash13_py(b"aa"), bloom.siphash13_py(b"ab")], 10)
    bf = bloom.BloomFilter.decode(data)
    assert bf.might_contain(b"aa") and bf.might_contain(b"ab")


def test_no_filter_below_min_filter_keys_and_none_in_wal_ssts() -> None:
    rows = as_rows([(b"k%d" % i, 1, VALUE) for i in range(5)])
    policies = (FilterPolicySpec(10, FIXED2),)
    w = SstWriter(SstWriterOptions(min_filter_keys=6, filter_policies=policies))
    w.add_rows(rows)
    assert filters_of(w.finish().to_bytes()) is None
    wal = SstWriter(SstWriterOptions(sst_type=SstType.WAL, block_size=65535,
                                     min_filter_keys=0, filter_policies=policies))
    wal.add_rows(sorted(rows, key=lambda r: r[1]))
    assert wal.finish().info.filter_len == 0


def test_bad_policy_sets_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="twice"):
        SstWriterOptions(filter_policies=(FilterPolicySpec(10), FilterPolicySpec(7)))
    with pytest.raises(InvalidArgumentError, match="legacy"):
        SstWriterOptions(filter_format=FilterFormat.LEGACY,
                         filter_policies=(FilterPolicySpec(10, FIXED2),))
    many = tuple(FilterPolicySpec(10, PrefixExtractorSpec(f"f{n}", fixed=n), False)
                 for n in range(1, 10))
    with pytest.raises(InvalidArgumentError, match="at most 8"):
        SstWriterOptions(filter_policies=many)


def test_an_extractor_returning_more_than_the_key_is_refused() -> None:
    bad = PrefixExtractorSpec("bad", target="tests.unit.format._prefixes:too_long")
    w = SstWriter(SstWriterOptions(min_filter_keys=1,
                                   filter_policies=(FilterPolicySpec(10, bad),)))
    with pytest.raises(InvalidArgumentError, match="bad.*returned 3 for a key of 2 bytes"):
        w.add_rows([(b"k1", 1, VALUE, b"", None, None)])
        w.finish()


def test_the_default_options_keep_one_whole_key_filter() -> None:
    rows = as_rows([(b"k%d" % i, 1, VALUE) for i in range(3)])
    w = SstWriter(SstWriterOptions(min_filter_keys=1))
    w.add_rows(rows)
    assert filters_of(w.finish().to_bytes()) == expected_filters(rows, (FilterPolicySpec(10),))
    assert SstWriterOptions(bits_per_key=0).policies == ()
