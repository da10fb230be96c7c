"""SST writer options from settings: what every SST slatelib writes (L0 flushes, compaction
outputs, bulk loads) is encoded with.

SSTs slatelib's writer and bulk load create use the ``[sst]`` settings that are set and
0.17's defaults for the others (:func:`sst_writer_options`). A compaction keeps the
database's own options for what is not set (:func:`sst_choices`, then
:func:`slatelib.core.db_sst_options.plan_sst_options` over its inputs, then
:func:`writer_options_for`; docs/rfcs/0019-compaction-sst-options.md).
"""

from __future__ import annotations

from dataclasses import replace

from slatelib.config import (
    DEFAULT_FILTER_BITS_PER_KEY,
    DEFAULT_MIN_FILTER_KEYS,
    DEFAULT_SST_BLOCK_SIZE,
    DEFAULT_SST_CODEC,
    Settings,
)
from slatelib.core.db_sst_options import DbSstOptions, SstChoices
from slatelib.core.filter_policy import (
    FilterPolicySpec,
    PrefixExtractorSpec,
    parse_policy_list,
    parse_prefix_extractors,
)
from slatelib.errors import InvalidArgumentError, UnsupportedFeatureError
from slatelib.format.compression import parse_codec
from slatelib.format.sst import SstWriterOptions


def prefix_extractors(settings: Settings) -> dict[str, PrefixExtractorSpec]:
    """``[sst.prefix_extractors]`` by name.

    Raises:
        InvalidArgumentError: a malformed entry.
    """
    return parse_prefix_extractors(settings.sst.prefix_extractors)


def sst_choices(settings: Settings) -> SstChoices:
    """The ``[sst]`` settings that are set.

    Raises:
        InvalidArgumentError: an unknown codec, a bad size or a malformed policy list
            (a policy whose prefix extractor is not configured included).
    """
    s = settings.sst
    if s.block_size is not None and s.block_size < 1:
        raise InvalidArgumentError(f"[sst] block_size must be positive, got {s.block_size}")
    if s.min_filter_keys is not None and s.min_filter_keys < 0:
        raise InvalidArgumentError("[sst] min_filter_keys must not be negative")
    bits = s.filter_bits_per_key
    if bits is not None and not 0 <= bits <= 0xFFFF:
        raise InvalidArgumentError(f"[sst] filter_bits_per_key must be in 0..65535, got {bits}")
    extractors = prefix_extractors(settings)  # checked even when no policy names one
    policies: tuple[FilterPolicySpec, ...] | None = None
    if s.filter_policies is not None:
        try:
            policies = parse_policy_list(s.filter_policies, bits or DEFAULT_FILTER_BITS_PER_KEY,
                                         extractors)
        except UnsupportedFeatureError as exc:
            raise InvalidArgumentError(f"[sst] filter_policies: {exc}") from exc
    elif bits == 0:
        policies = ()  # 0 bits per key: no filters, as before filter_policies existed
    return SstChoices(
        block_size=s.block_size,
        codec=None if s.compression_codec is None else parse_codec(s.compression_codec),
        min_filter_keys=s.min_filter_keys,
        bits_per_key=bits or None,
        policies=policies,
    )


def sst_writer_options(settings: Settings) -> SstWriterOptions:
    """Options of SSTs slatelib creates from rows (writer flushes, bulk load): the
    ``[sst]`` settings that are set, 0.17's defaults for the others.

    Raises:
        InvalidArgumentError: see :func:`sst_choices`.
    """
    c = sst_choices(settings)
    bits = c.bits_per_key or DEFAULT_FILTER_BITS_PER_KEY
    return SstWriterOptions(
        block_size=DEFAULT_SST_BLOCK_SIZE if c.block_size is None else c.block_size,
        codec=parse_codec(DEFAULT_SST_CODEC) if c.codec is None else c.codec,
        min_filter_keys=DEFAULT_MIN_FILTER_KEYS if c.min_filter_keys is None
        else c.min_filter_keys,
        bits_per_key=bits,
        filter_policies=(FilterPolicySpec(bits),) if c.policies is None else c.policies,
    )


def settings_for(options: DbSstOptions, settings: Settings) -> Settings:
    """``settings`` with ``[sst]`` set to ``options`` (what a slatelib writer that adds SSTs
    to the database, such as a rescale's flush, must write)."""
    policies = ",".join(f"{p.name}@{p.bits_per_key}" for p in options.policies)
    return replace(settings, sst=replace(
        settings.sst, block_size=options.block_size,
        compression_codec=options.codec.name.lower(), min_filter_keys=options.min_filter_keys,
        filter_policies=policies))


def writer_options_for(options: DbSstOptions) -> SstWriterOptions:
    """The writer options of a compaction's outputs."""
    return SstWriterOptions(
        block_size=options.block_size, codec=options.codec,
        min_filter_keys=options.min_filter_keys,
        bits_per_key=options.policies[0].bits_per_key if options.policies else 0,
        filter_policies=options.policies,
    )
