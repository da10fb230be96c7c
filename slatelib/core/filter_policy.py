"""Bloom filter policies of an SST's composite filter block, and prefix extractors. Pure.

0.17 names each filter of a composite block after its policy (format §7.9): ``_bf`` (whole
keys), ``_bf:p=<extractor>`` (prefixes and whole keys), ``_bf:p=<extractor>:wh=0``
(prefixes only). A reader uses a filter only when one of its own policies has exactly that
name, so an SST written for a database must carry the database's names. The bits per key
are not stored: a filter stores ``num_probes`` (``floor(f32(bits) * 0.69)``) and its size
(``ceil(hashes * bits / 8)`` bytes), which :func:`bits_per_key_candidates` inverts.

A prefix extractor maps a key to the length of its prefix, or None (no prefix). slatelib
cannot run the extractor a database was written with (it is the application's code), so
extractors are configured by name (``[sst.prefix_extractors]``): ``fixed:N`` (the first N
bytes; shorter keys have none) or ``package.module:attr`` (a Python function
``f(key) -> int | None``, an object with ``prefix_len(key)``, or a class making one).

Pure, but for :func:`load_prefix_extractor`, which imports the application's module.
"""

from __future__ import annotations

import importlib
import math
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from slatelib.errors import InvalidArgumentError, UnsupportedFeatureError

BLOOM_NAME = "_bf"
_PREFIX_TAG = ":p="
_NO_WHOLE_KEY_TAG = ":wh=0"
MAX_FIXED_PREFIX = 0xFFFF
"""Longest ``fixed:N`` prefix accepted (keys longer than a u16 are rare; 0.17 has no limit)."""

PrefixFn = Callable[[bytes], "int | None"]
"""A prefix extractor as slatelib runs it: the length of ``key``'s prefix, or None."""


@dataclass(frozen=True, slots=True)
class PrefixExtractorSpec:
    """A named prefix extractor: ``fixed`` bytes, or a Python ``target`` (``pkg.mod:attr``).

    Exactly one of ``fixed`` and ``target`` is set. Picklable: executors load ``target``
    themselves (:func:`load_prefix_extractor`).
    """

    name: str
    fixed: int | None = None
    target: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidArgumentError("a prefix extractor needs a name")
        if (self.fixed is None) == (self.target is None):
            raise InvalidArgumentError(
                f"prefix extractor {self.name!r}: give a fixed length or a target, not both")
        if self.fixed is not None and not 1 <= self.fixed <= MAX_FIXED_PREFIX:
            raise InvalidArgumentError(
                f"prefix extractor {self.name!r}: fixed length {self.fixed} is not in "
                f"1..{MAX_FIXED_PREFIX}")

    @staticmethod
    def parse(name: str, text: str) -> PrefixExtractorSpec:
        """``fixed:N`` or ``package.module:attr``, as ``[sst.prefix_extractors]`` gives it.

        Raises:
            InvalidArgumentError: neither form.
        """
        value = text.strip()
        head, sep, tail = value.partition(":")
        if head == "fixed" and sep:
            try:
                n = int(tail)
            except ValueError:
                raise InvalidArgumentError(
                    f"[sst.prefix_extractors] {name}: {text!r} is not fixed:<length>") from None
            return PrefixExtractorSpec(name, fixed=n)
        if not sep or not head or not tail:
            raise InvalidArgumentError(
                f"[sst.prefix_extractors] {name}: {text!r} is neither fixed:<length> nor "
                "package.module:attr")
        return PrefixExtractorSpec(name, target=value)

    def describe(self) -> str:
        return f"fixed:{self.fixed}" if self.fixed is not None else str(self.target)


def parse_prefix_extractors(table: Iterable[tuple[str, str]]) -> dict[str, PrefixExtractorSpec]:
    """``[sst.prefix_extractors]`` (name -> ``fixed:N`` or ``pkg.mod:attr``) by name.

    Raises:
        InvalidArgumentError: a malformed entry.
    """
    return {name: PrefixExtractorSpec.parse(name, text) for name, text in table}


def fixed_prefix(n: int) -> PrefixFn:
    """The ``fixed:N`` extractor: the first ``n`` bytes of keys at least that long."""
    def prefix_len(key: bytes) -> int | None:
        return n if len(key) >= n else None
    return prefix_len


@lru_cache(maxsize=64)
def load_prefix_extractor(spec: PrefixExtractorSpec) -> PrefixFn:
    """The function that runs ``spec`` (imported once per process for a ``target``).

    Raises:
        InvalidArgumentError: the target cannot be imported or is not an extractor.
    """
    if spec.fixed is not None:
        return fixed_prefix(spec.fixed)
    assert spec.target is not None
    module_name, _, attr = spec.target.partition(":")
    try:
        obj: object = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidArgumentError(
            f"cannot load prefix extractor {spec.name!r} ({spec.target}): {exc}") from exc
    if isinstance(obj, type):
        obj = obj()
    method = getattr(obj, "prefix_len", None)
    fn = method if callable(method) else obj
    if not callable(fn):
        raise InvalidArgumentError(
            f"prefix extractor {spec.name!r} ({spec.target}) is neither a function nor an "
            "object with prefix_len(key)")
    return checked_prefix_fn(spec.name, fn)


def checked_prefix_fn(name: str, fn: Callable[[bytes], object]) -> PrefixFn:
    """``fn`` with its result checked: None or an int in ``0..len(key)``."""
    def prefix_len(key: bytes) -> int | None:
        n = fn(key)
        if n is None:
            return None
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= len(key):
            raise InvalidArgumentError(
                f"prefix extractor {name!r} returned {n!r} for a key of {len(key)} bytes "
                "(expected None or 0..len(key))")
        return n
    return prefix_len


@dataclass(frozen=True, slots=True)
class FilterPolicySpec:
    """One bloom filter policy: its bits per key, its prefix extractor (None: whole keys
    only) and whether whole keys are hashed too."""

    bits_per_key: int = 10
    prefix: PrefixExtractorSpec | None = None
    whole_key: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.bits_per_key <= 0xFFFF:
            raise InvalidArgumentError(
                f"bits per key must be in 1..65535, got {self.bits_per_key}")
        if self.prefix is None and not self.whole_key:
            raise InvalidArgumentError("a bloom policy without whole keys needs a prefix "
                                       "extractor")

    @property
    def name(self) -> str:
        """The filter's name in the composite block (format §7.9)."""
        return policy_name(None if self.prefix is None else self.prefix.name, self.whole_key)


def policy_name(prefix: str | None, whole_key: bool = True) -> str:
    """``_bf``, ``_bf:p=<prefix>`` or ``_bf:p=<prefix>:wh=0``."""
    if prefix is None:
        return BLOOM_NAME
    return BLOOM_NAME + _PREFIX_TAG + prefix + ("" if whole_key else _NO_WHOLE_KEY_TAG)


def parse_policy_name(name: str) -> tuple[str | None, bool] | None:
    """``(extractor name or None, whole_key)`` of a bloom filter name, or None when the
    name is not one 0.17's bloom policies write (e.g. an application's own policy)."""
    if name == BLOOM_NAME:
        return None, True
    if not name.startswith(BLOOM_NAME + _PREFIX_TAG):
        return None
    rest = name[len(BLOOM_NAME + _PREFIX_TAG):]
    whole = True
    if rest.endswith(_NO_WHOLE_KEY_TAG):
        rest, whole = rest[: -len(_NO_WHOLE_KEY_TAG)], False
    return (rest, whole) if rest else None


def resolve_policy(name: str, bits_per_key: int,
                   extractors: Mapping[str, PrefixExtractorSpec]) -> FilterPolicySpec:
    """The policy that writes filters named ``name``.

    Raises:
        UnsupportedFeatureError: ``name`` is not a bloom policy of 0.17, or names a prefix
            extractor that ``extractors`` (``[sst.prefix_extractors]``) does not configure.
    """
    parsed = parse_policy_name(name)
    if parsed is None:
        raise UnsupportedFeatureError(
            f"filter {name!r} is not a bloom filter policy slatelib can write (only _bf, "
            "_bf:p=<extractor> and _bf:p=<extractor>:wh=0); set [sst] filter_policies to "
            "the policies the outputs should carry")
    prefix, whole = parsed
    spec = None
    if prefix is not None:
        spec = extractors.get(prefix)
        if spec is None:
            raise UnsupportedFeatureError(
                f"filter {name!r} needs the prefix extractor {prefix!r}, which is not "
                f"configured: add it to [sst.prefix_extractors] ({prefix} = \"fixed:<N>\" or "
                f"\"package.module:attr\"; environment SLATELIB_SST__PREFIX_EXTRACTORS as a "
                "JSON object), or set [sst] filter_policies to the policies to write instead")
    return FilterPolicySpec(bits_per_key, spec, whole)


def parse_policy_list(text: str, bits_per_key: int,
                      extractors: Mapping[str, PrefixExtractorSpec]) -> tuple[FilterPolicySpec, ...]:
    """``[sst] filter_policies``: comma-separated policy names, each optionally
    ``@<bits per key>`` (``"_bf@10,_bf:p=fixed4:wh=0@8"``); ``""`` means no filters.

    Raises:
        InvalidArgumentError: a malformed entry or a repeated name.
        UnsupportedFeatureError: see :func:`resolve_policy`.
    """
    out: list[FilterPolicySpec] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, bits = part.rpartition("@")
        if not sep:
            name, bits_value = part, bits_per_key
        else:
            try:
                bits_value = int(bits)
            except ValueError:
                raise InvalidArgumentError(
                    f"[sst] filter_policies: {part!r}: bits per key {bits!r} is not an "
                    "integer") from None
        out.append(resolve_policy(name, bits_value, extractors))
    names = [p.name for p in out]
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"[sst] filter_policies names a policy twice: {names}")
    return tuple(out)


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def probes_for_bits(bits_per_key: int) -> int:
    """``floor(f32(bits_per_key) * f32(0.69))`` (format §7.9)."""
    return int(math.floor(_f32(_f32(float(bits_per_key)) * _f32(0.69))))


def bits_per_key_candidates(num_probes: int, nbytes: int, min_hashes: int,
                            max_hashes: int) -> list[int]:
    """Every bits-per-key value that gives a filter with ``num_probes`` probes and
    ``nbytes`` bytes of bits for some hash count in ``[min_hashes, max_hashes]``, ascending.

    ``num_probes`` allows one or two values (e.g. 6 probes: 9 or 10); the size usually
    settles it (exactly, when the hash count is known).
    """
    low = max(1, math.floor(num_probes / 0.69) - 1)
    out = []
    for b in range(low, low + 4):
        if probes_for_bits(b) != num_probes:
            continue
        # ceil(h * b / 8) == nbytes  <=>  8 * (nbytes - 1) < h * b <= 8 * nbytes
        h_lo = max(min_hashes, (8 * (nbytes - 1)) // b + 1 if nbytes > 0 else 0)
        h_hi = min(max_hashes, (8 * nbytes) // b)
        if nbytes == 0:
            h_lo, h_hi = max(min_hashes, 0), min(max_hashes, 0)
        if h_lo <= h_hi:
            out.append(b)
    return out


def hash_count_bounds(rows: int, prefix: bool, whole_key: bool) -> tuple[int, int]:
    """How many hashes a policy adds for an SST of ``rows`` rows: one per row for whole
    keys, and at most one per row (at least none) for prefixes."""
    lo = rows if whole_key else 0
    hi = (rows if whole_key else 0) + (rows if prefix else 0)
    return lo, hi
