"""``[sst]`` settings: what is set, and the options of SSTs slatelib creates."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelib.config import Settings, SstSettings, load_settings
from slatelib.core.filter_policy import FilterPolicySpec, PrefixExtractorSpec
from slatelib.core.manifest import CompressionCodec
from slatelib.errors import InvalidArgumentError
from slatelib.format.sst import SstWriterOptions
from slatelib.store.sst_options import sst_choices, sst_writer_options


def test_nothing_is_set_by_default_and_new_ssts_use_0_17_defaults() -> None:
    c = sst_choices(Settings())
    assert (c.block_size, c.codec, c.min_filter_keys, c.bits_per_key, c.policies) == (
        None, None, None, None, None)
    assert sst_writer_options(Settings()) == SstWriterOptions(
        filter_policies=(FilterPolicySpec(10),))


def test_a_key_given_is_set_even_at_its_default_value() -> None:
    s = load_settings(env={"SLATELIB_SST__BLOCK_SIZE": "4096",
                           "SLATELIB_SST__COMPRESSION_CODEC": "none"})
    c = sst_choices(s)
    assert (c.block_size, c.codec) == (4096, CompressionCodec.NONE)


def test_policies_and_extractors_from_the_environment() -> None:
    s = load_settings(env={
        "SLATELIB_SST__PREFIX_EXTRACTORS": '{"fixed4": "fixed:4"}',
        "SLATELIB_SST__FILTER_POLICIES": "_bf:p=fixed4:wh=0@8,_bf",
        "SLATELIB_SST__FILTER_BITS_PER_KEY": "12",
    })
    fixed4 = PrefixExtractorSpec("fixed4", fixed=4)
    assert sst_choices(s).policies == (FilterPolicySpec(8, fixed4, False), FilterPolicySpec(12))
    assert sst_writer_options(s).policies == sst_choices(s).policies


def test_zero_bits_per_key_still_means_no_filter() -> None:
    s = Settings(sst=SstSettings(filter_bits_per_key=0))
    assert sst_choices(s).policies == () and sst_writer_options(s).policies == ()


def test_bad_settings_are_refused_naming_the_key() -> None:
    for sst, match in [
        (SstSettings(filter_policies="_bf:p=nope"), r"filter_policies.*'nope'"),
        (SstSettings(block_size=0), "block_size"),
        (SstSettings(filter_bits_per_key=-1), "filter_bits_per_key"),
        (SstSettings(compression_codec="brotli"), "brotli"),
        (SstSettings(prefix_extractors=(("x", "fixed:y"),)), "x"),
    ]:
        with pytest.raises(InvalidArgumentError, match=match):
            sst_writer_options(Settings(sst=sst))


def test_policies_and_extractors_from_a_settings_file(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text('[sst]\nfilter_policies = "_bf:p=fixed4:wh=0@8"\n'
                 '[sst.prefix_extractors]\nfixed4 = "fixed:4"\n')
    fixed4 = PrefixExtractorSpec("fixed4", fixed=4)
    assert sst_choices(load_settings(f, env={})).policies == (
        FilterPolicySpec(8, fixed4, False),)
