"""Choosing a compaction's output options from its inputs (docs/rfcs/0019-compaction-sst-options.md)."""

from __future__ import annotations

import pytest

from slatelib.core.db_sst_options import (
    FilterSample,
    SstChoices,
    SstSample,
    plan_sst_options,
)
from slatelib.core.filter_policy import FilterPolicySpec, PrefixExtractorSpec
from slatelib.core.manifest import CompressionCodec
from slatelib.errors import UnsupportedFeatureError

FIXED4 = PrefixExtractorSpec("fixed4", fixed=4)
EXTRACTORS = {"fixed4": FIXED4}
# 2000 rows at 7 bits: 1750 bytes, 4 probes; 20 prefixes at 10 bits: 25 bytes, 6 probes
WHOLE7 = FilterSample("_bf", 4, 1750)
PREFIX10 = FilterSample("_bf:p=fixed4:wh=0", 6, 25)


def sample(label: str = "new", *, codec: CompressionCodec = CompressionCodec.ZSTD,
           rows: int | None = 2000, filters: tuple[FilterSample, ...] | None = (PREFIX10,
                                                                                 WHOLE7),
           sizes: tuple[int, ...] | None = (1024,)) -> SstSample:
    return SstSample(label, codec, rows, filters, sizes)


def test_the_newest_input_gives_codec_block_size_and_filters() -> None:
    got = plan_sst_options([sample(), sample("old", codec=CompressionCodec.LZ4, sizes=(4096,))],
                           SstChoices(), EXTRACTORS)
    assert (got.codec, got.block_size) == (CompressionCodec.ZSTD, 1024)
    assert got.policies == (FilterPolicySpec(10, FIXED4, False), FilterPolicySpec(7))
    assert got.min_filter_keys == 1
    assert got.origin["compression_codec"] == got.origin["block_size"] == "database (new)"
    assert got.to_dict()["filter_policies"] == [
        {"name": "_bf:p=fixed4:wh=0", "bits_per_key": 10}, {"name": "_bf", "bits_per_key": 7}]


def test_settings_that_are_set_win() -> None:
    choices = SstChoices(block_size=65536, codec=CompressionCodec.NONE, min_filter_keys=5,
                         bits_per_key=12)
    got = plan_sst_options([sample()], choices, EXTRACTORS)
    assert (got.block_size, got.codec, got.min_filter_keys) == (65536, CompressionCodec.NONE, 5)
    assert [p.bits_per_key for p in got.policies] == [12, 12]
    assert set(got.origin.values()) == {"set", "database (new)"}
    only = plan_sst_options([sample()], SstChoices(policies=(FilterPolicySpec(3),)), {})
    assert only.policies == (FilterPolicySpec(3),) and only.origin["filter_policies"] == "set"


def test_a_filter_without_its_extractor_is_refused_unless_policies_are_set() -> None:
    with pytest.raises(UnsupportedFeatureError, match="fixed4"):
        plan_sst_options([sample()], SstChoices(), {})
    got = plan_sst_options([sample()], SstChoices(policies=()), {})
    assert got.policies == ()


def test_a_large_input_without_filter_means_the_database_writes_none() -> None:
    inputs = [sample("big", rows=5000, filters=None), sample("old")]
    assert plan_sst_options(inputs, SstChoices(), EXTRACTORS).policies == ()
    # small unfiltered inputs say nothing: the older filtered one decides
    inputs = [sample("small", rows=10, filters=None), sample("old")]
    got = plan_sst_options(inputs, SstChoices(), EXTRACTORS)
    assert got.origin["filter_policies"] == "database (old)" and len(got.policies) == 2
    # a larger min_filter_keys, once set, makes 5000 rows small
    inputs = [sample("big", rows=5000, filters=None), sample("old", rows=9000)]
    got = plan_sst_options(inputs, SstChoices(min_filter_keys=6000), EXTRACTORS)
    assert len(got.policies) == 2


def test_without_evidence_the_defaults_apply() -> None:
    got = plan_sst_options([sample(rows=10, filters=None, sizes=None)], SstChoices(), {})
    assert got.policies == (FilterPolicySpec(10),) and got.block_size == 4096
    assert got.origin["filter_policies"] == "default"
    none = plan_sst_options([], SstChoices(), {})
    assert (none.codec, none.block_size) == (CompressionCodec.NONE, 4096)


def test_min_filter_keys_is_the_smallest_the_inputs_allow() -> None:
    filtered = [sample(rows=2000), sample("b", rows=40)]
    assert plan_sst_options(filtered, SstChoices(), EXTRACTORS).min_filter_keys == 1
    mixed = [sample("small", rows=300, filters=None), *filtered]
    assert plan_sst_options(mixed, SstChoices(), EXTRACTORS).min_filter_keys == 40
    mixed = [sample("small", rows=30, filters=None), *filtered]
    assert plan_sst_options(mixed, SstChoices(), EXTRACTORS).min_filter_keys == 31
    assert plan_sst_options([sample(rows=10, filters=None)], SstChoices(),
                            EXTRACTORS).min_filter_keys == 1000


def test_ambiguous_block_sizes() -> None:
    one_block = (1024, 2048, 4096, 8192)
    got = plan_sst_options([sample(sizes=one_block), sample("b", sizes=(2048, 4096))],
                           SstChoices(), EXTRACTORS)
    assert got.block_size == 4096 and "ambiguous" in got.origin["block_size"]
    got = plan_sst_options([sample(sizes=(8192, 16384)), sample("b", sizes=(2048,))],
                           SstChoices(), EXTRACTORS)
    assert got.block_size == 2048  # the newest input that settles it
    got = plan_sst_options([sample(sizes=(8192, 16384))], SstChoices(), EXTRACTORS)
    assert got.block_size == 8192
    got = plan_sst_options([sample(sizes=()), sample("b", sizes=None)], SstChoices(), EXTRACTORS)
    assert (got.block_size, got.origin["block_size"]) == (4096, "default")
