"""The SST options of a database, read back from its SSTs, for compaction outputs. Pure.

0.17 stores none of a database's SST options in the manifest: its block size, codec,
filter policies and ``min_filter_keys`` are the writer's configuration. A compaction by
slatelib keeps them by reading its input SSTs, newest first (the inputs written under the
database's current configuration): the codec of the newest input
(``SsTableInfo.compression_format``), the block size its data blocks were cut with
(:mod:`slatelib.format.block_size`), the filter names of the newest input that has a filter
block, with each filter's bits per key recovered from its probes and size
(:func:`slatelib.core.filter_policy.bits_per_key_candidates`). Settings that are *set*
(:class:`SstChoices`) win over what the inputs show. The rules, and where they can guess
wrong, are in docs/rfcs/0019-compaction-sst-options.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slatelib.core.filter_policy import (
    FilterPolicySpec,
    PrefixExtractorSpec,
    bits_per_key_candidates,
    hash_count_bounds,
    parse_policy_name,
    probes_for_bits,
    resolve_policy,
)
from slatelib.core.manifest import CompressionCodec

DEFAULT_BLOCK_SIZE = 4096
DEFAULT_MIN_FILTER_KEYS = 1000
DEFAULT_BITS_PER_KEY = 10

SET, DATABASE, DEFAULT = "set", "database", "default"
"""Where an option came from: the settings, the input SSTs, or 0.17's default."""


@dataclass(frozen=True, slots=True)
class FilterSample:
    """One filter of a sampled SST's filter block: its name, probes and bit-array bytes."""

    name: str
    num_probes: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class SstSample:
    """What one input SST shows of the options it was written with.

    ``rows``: rows in the SST (from its stats; None without stats). ``filters``: its filter
    block's filters in order (None: no filter block). ``block_sizes``: 0.17 block sizes
    consistent with its first data blocks (None: not sampled, or a v1 SST).
    """

    label: str
    codec: CompressionCodec
    rows: int | None
    filters: tuple[FilterSample, ...] | None
    block_sizes: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class SstChoices:
    """The ``[sst]`` settings that are set (None: keep the database's)."""

    block_size: int | None = None
    codec: CompressionCodec | None = None
    min_filter_keys: int | None = None
    bits_per_key: int | None = None
    policies: tuple[FilterPolicySpec, ...] | None = None


@dataclass(frozen=True)
class DbSstOptions:
    """The options of a compaction's output SSTs, and where each came from."""

    block_size: int
    codec: CompressionCodec
    min_filter_keys: int
    policies: tuple[FilterPolicySpec, ...]
    origin: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """For reports: every option, its value and its origin."""
        return {
            "block_size": self.block_size,
            "compression_codec": self.codec.name.lower(),
            "min_filter_keys": self.min_filter_keys,
            "filter_policies": [{"name": p.name, "bits_per_key": p.bits_per_key}
                                for p in self.policies],
            "origin": dict(self.origin),
        }


def plan_sst_options(samples: Sequence[SstSample], choices: SstChoices,
                     extractors: Mapping[str, PrefixExtractorSpec]) -> DbSstOptions:
    """The output options for inputs sampled newest first (see the module docstring).

    Raises:
        UnsupportedFeatureError: the inputs carry a filter slatelib cannot write (not a
            bloom policy, or a prefix extractor missing from ``extractors``) and
            ``choices.policies`` is not set.
    """
    origin: dict[str, str] = {}
    codec, origin["compression_codec"] = _codec(samples, choices)
    block_size, origin["block_size"] = _block_size(samples, choices)
    threshold = choices.min_filter_keys or DEFAULT_MIN_FILTER_KEYS
    decisive = _decisive(samples, threshold)
    if choices.policies is not None:
        policies = tuple(p if choices.bits_per_key is None
                         else FilterPolicySpec(choices.bits_per_key, p.prefix, p.whole_key)
                         for p in choices.policies)
        origin["filter_policies"] = SET
    elif decisive is None:
        policies = (FilterPolicySpec(choices.bits_per_key or DEFAULT_BITS_PER_KEY),)
        origin["filter_policies"] = DEFAULT
    else:
        policies = tuple(
            resolve_policy(f.name, choices.bits_per_key or _bits_per_key(f, decisive.rows),
                           extractors)
            for f in decisive.filters or ())
        origin["filter_policies"] = f"{DATABASE} ({decisive.label})"
    if choices.min_filter_keys is not None:
        min_filter_keys, origin["min_filter_keys"] = choices.min_filter_keys, SET
    else:
        min_filter_keys, origin["min_filter_keys"] = _min_filter_keys(samples, decisive)
    return DbSstOptions(block_size, codec, min_filter_keys, policies, origin)


def _codec(samples: Sequence[SstSample], choices: SstChoices) -> tuple[CompressionCodec, str]:
    if choices.codec is not None:
        return choices.codec, SET
    if samples:
        return samples[0].codec, f"{DATABASE} ({samples[0].label})"
    return CompressionCodec.NONE, DEFAULT


def _block_size(samples: Sequence[SstSample], choices: SstChoices) -> tuple[int, str]:
    """The set size; else the newest input whose blocks allow one size only; else a size
    every sampled input allows (4096 if it is one, else the smallest); else 4096."""
    if choices.block_size is not None:
        return choices.block_size, SET
    sampled = [s for s in samples if s.block_sizes]
    for s in sampled:
        if s.block_sizes is not None and len(s.block_sizes) == 1:
            return s.block_sizes[0], f"{DATABASE} ({s.label})"
    if sampled:
        common = set.intersection(*(set(s.block_sizes or ()) for s in sampled))
        if common:
            size = DEFAULT_BLOCK_SIZE if DEFAULT_BLOCK_SIZE in common else min(common)
            return size, f"{DATABASE} ({sampled[0].label}, ambiguous)"
    return DEFAULT_BLOCK_SIZE, DEFAULT


def _decisive(samples: Sequence[SstSample], threshold: int) -> SstSample | None:
    """The newest input that shows the database's filter policies: one with a filter
    block, or one of at least ``threshold`` rows without one (the database writes no
    filters). None when no input shows them (every input too small for a filter)."""
    for s in samples:
        if s.filters is not None or (s.rows is not None and s.rows >= threshold):
            return s
    return None


def _bits_per_key(f: FilterSample, rows: int | None) -> int:
    """The largest bits-per-key value consistent with the filter's probes and size."""
    parsed = parse_policy_name(f.name)
    prefix, whole = (None, True) if parsed is None else (parsed[0], parsed[1])
    if rows is None:
        lo, hi = 0, 1 << 62
    else:
        lo, hi = hash_count_bounds(rows, prefix is not None, whole)
    found = bits_per_key_candidates(f.num_probes, f.nbytes, lo, hi)
    if found:
        return found[-1]
    by_probes = [b for b in range(1, 4 * (f.num_probes + 2)) if probes_for_bits(b) == f.num_probes]
    return by_probes[-1] if by_probes else DEFAULT_BITS_PER_KEY


def _min_filter_keys(samples: Sequence[SstSample], decisive: SstSample | None,
                     ) -> tuple[int, str]:
    """The smallest value the inputs allow: one more than the largest input without a
    filter block (the database's ``min_filter_keys`` is above it), 1 when every sampled
    input has one, never above the smallest input with the same filters. Erring low only
    gives small outputs a filter the official compactor might have left out; erring high
    would drop filters."""
    if decisive is None or not decisive.filters:
        return DEFAULT_MIN_FILTER_KEYS, DEFAULT
    names = [f.name for f in decisive.filters]
    filtered = [s.rows for s in samples if s.rows is not None and s.filters is not None
                and [f.name for f in s.filters] == names]
    unfiltered = [s.rows for s in samples if s.rows is not None and s.filters is None]
    value = max(unfiltered, default=0) + 1
    if filtered:
        value = min(value, min(filtered))
    return max(1, value), f"{DATABASE} (the smallest the inputs allow)"
