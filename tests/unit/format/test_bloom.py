"""Bloom filters bit-identical to 0.17.0: SipHash-1-3 vectors, probes, filter bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slatelib.format.bloom import (
    BloomFilter,
    build_bloom,
    decode_composite,
    encode_composite,
    num_probes_for,
    siphash13,
)


def test_siphash13_matches_spec_vectors() -> None:
    assert siphash13(b"") == 0xD1FBA762150C532C
    assert siphash13(b"a") == 0x407448D2B89B1813
    assert siphash13(b"key:0000") == 0x84F4F39CF635FDD0


def test_num_probes_uses_single_precision() -> None:
    assert [num_probes_for(b) for b in (10, 7, 12, 16, 3)] == [6, 4, 8, 11, 2]


def test_filter_of_three_keys_matches_spec() -> None:
    assert build_bloom([b"key:0000", b"key:0001", b"key:0002"], 10).hex() == "000629bfc904"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=32), min_size=1, max_size=200))
def test_every_added_key_may_be_contained(keys: list[bytes]) -> None:
    bf = BloomFilter.decode(build_bloom(keys, 10))
    assert all(bf.might_contain(k) for k in keys)


def test_false_positive_rate_is_about_one_percent() -> None:
    keys = [b"in:%06d" % i for i in range(5000)]
    bf = BloomFilter.decode(build_bloom(keys, 10))
    fp = sum(bf.might_contain(b"out:%06d" % i) for i in range(20000))
    assert fp / 20000 < 0.03


def test_empty_filter_contains_nothing() -> None:
    assert not BloomFilter.decode(build_bloom([], 10)).might_contain(b"x")


def test_composite_round_trip() -> None:
    block = encode_composite([("_bf", b"\x00\x06abc"), ("_bf:p=fixed4", b"\x00\x02z")])
    assert decode_composite(block) == {"_bf": b"\x00\x06abc", "_bf:p=fixed4": b"\x00\x02z"}
