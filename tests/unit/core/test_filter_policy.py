"""Bloom filter policy names and prefix extractors as 0.17 writes them (format §7.9), and
recovering a filter's bits per key from its probes and size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slatelib.core.filter_policy import (
    FilterPolicySpec,
    PrefixExtractorSpec,
    bits_per_key_candidates,
    hash_count_bounds,
    load_prefix_extractor,
    parse_policy_list,
    parse_policy_name,
    parse_prefix_extractors,
    probes_for_bits,
    resolve_policy,
)
from slatelib.errors import InvalidArgumentError, UnsupportedFeatureError

EXTRACTORS = {"fixed4": PrefixExtractorSpec("fixed4", fixed=4)}


def test_policy_names_round_trip() -> None:
    for name, parsed in [("_bf", (None, True)), ("_bf:p=fixed4", ("fixed4", True)),
                         ("_bf:p=fixed4:wh=0", ("fixed4", False)),
                         ("_bf:p=a:b", ("a:b", True))]:
        assert parse_policy_name(name) == parsed
    for other in ("bf", "_bf:x", "_bf:p=", "rocks.bloom", "_bf:p=:wh=0"):
        assert parse_policy_name(other) is None


def test_resolve_policy_names_the_missing_extractor_and_the_ways_out() -> None:
    assert resolve_policy("_bf:p=fixed4:wh=0", 8, EXTRACTORS) == FilterPolicySpec(
        8, EXTRACTORS["fixed4"], whole_key=False)
    with pytest.raises(UnsupportedFeatureError,
                       match=r"'_bf:p=tenant'.*'tenant'.*\[sst.prefix_extractors\].*"
                             r"filter_policies"):
        resolve_policy("_bf:p=tenant", 10, EXTRACTORS)
    with pytest.raises(UnsupportedFeatureError, match="'ribbon'.*filter_policies"):
        resolve_policy("ribbon", 10, EXTRACTORS)


def test_policy_lists_of_the_settings() -> None:
    got = parse_policy_list(" _bf@7, _bf:p=fixed4:wh=0 ", 10, EXTRACTORS)
    assert [(p.name, p.bits_per_key) for p in got] == [("_bf", 7), ("_bf:p=fixed4:wh=0", 10)]
    assert parse_policy_list("", 10, EXTRACTORS) == ()
    with pytest.raises(InvalidArgumentError, match="twice"):
        parse_policy_list("_bf,_bf@3", 10, EXTRACTORS)
    with pytest.raises(InvalidArgumentError, match="not an integer"):
        parse_policy_list("_bf@ten", 10, EXTRACTORS)


def test_prefix_extractor_settings() -> None:
    got = parse_prefix_extractors([("f", "fixed:3"), ("t", "pkg.mod:fn")])
    assert got["f"] == PrefixExtractorSpec("f", fixed=3)
    assert got["t"].target == "pkg.mod:fn"
    for bad in ("fixed:x", "fixed:0", "nocolon", ":x"):
        with pytest.raises(InvalidArgumentError):
            parse_prefix_extractors([("b", bad)])
    fn = load_prefix_extractor(got["f"])
    assert (fn(b"abcd"), fn(b"ab")) == (3, None)
    obj = load_prefix_extractor(PrefixExtractorSpec(
        "o", target="tests.unit.format._prefixes:FirstTwo"))
    assert (obj(b"xyz"), obj(b"x")) == (2, None)
    with pytest.raises(InvalidArgumentError, match="cannot load"):
        load_prefix_extractor(PrefixExtractorSpec("m", target="no_such_module_x:f"))
    with pytest.raises(InvalidArgumentError, match="returned 3"):
        load_prefix_extractor(PrefixExtractorSpec(
            "bad", target="tests.unit.format._prefixes:too_long"))(b"ab")


def test_probes_follow_single_precision() -> None:
    assert [probes_for_bits(b) for b in (10, 7, 12, 16, 3)] == [6, 4, 8, 11, 2]


@given(st.integers(1, 40), st.integers(0, 5000))
def test_the_true_bits_per_key_is_always_a_candidate(bits: int, hashes: int) -> None:
    nbytes = (hashes * bits + 7) // 8
    assert bits in bits_per_key_candidates(probes_for_bits(bits), nbytes, hashes, hashes)


def test_a_known_hash_count_settles_bits_the_probes_leave_open() -> None:
    # 6 and 7 bits both give 4 probes; 1000 hashes make 750 or 875 bytes.
    assert probes_for_bits(6) == probes_for_bits(7) == 4
    assert bits_per_key_candidates(4, 875, 1000, 1000) == [7]
    assert bits_per_key_candidates(4, 750, 1000, 1000) == [6]
    lo, hi = hash_count_bounds(600, prefix=True, whole_key=False)
    assert (lo, hi) == (0, 600)
    assert bits_per_key_candidates(4, 100, lo, hi) == [6, 7]  # unsettled: both fit
    assert bits_per_key_candidates(4, 0, 0, 0) == [6, 7]


def test_policies_check_their_parameters() -> None:
    with pytest.raises(InvalidArgumentError):
        FilterPolicySpec(0)
    with pytest.raises(InvalidArgumentError, match="prefix extractor"):
        FilterPolicySpec(10, None, whole_key=False)
    with pytest.raises(InvalidArgumentError, match="not both"):
        PrefixExtractorSpec("x", fixed=2, target="a:b")
