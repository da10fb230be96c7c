"""Bloom filters, bit-identical to 0.17.0's (format §7.9). Pure.

Hash: SipHash-1-3 with key (0, 0) over the raw key bytes. Probes: enhanced double hashing
on the low and high 32 bits of the hash. ``num_probes = floor(f32(bits_per_key) * f32(0.69))``.
The filter block is either "composite" (a list of named filters) or "legacy" (one bloom).

``siphash13_py`` and ``build_bloom_from_hashes_py`` are the reference implementations; the
public names use the C extension when it is built (:mod:`slatelib.format.native`).
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from slatelib.errors import CorruptObjectError, InvalidArgumentError
from slatelib.format.native import speedups

DEFAULT_BITS_PER_KEY = 10
BLOOM_POLICY_NAME = "_bf"
_M64 = 0xFFFFFFFFFFFFFFFF


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash13_py(data: bytes, k0: int = 0, k1: int = 0) -> int:
    """Reference SipHash-1-3 (one compression round, three finalization rounds)."""
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    n = len(data)
    full = n - (n % 8)
    words = struct.unpack_from(f"<{full // 8}Q", data, 0) if full else ()
    tail = int.from_bytes(data[full:], "little") | ((n & 0xFF) << 56)
    for m in (*words, tail):
        v3 ^= m
        # one SipRound
        v0 = (v0 + v1) & _M64
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & _M64
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & _M64
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & _M64
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)
        v0 ^= m
    v2 ^= 0xFF
    for _ in range(3):
        v0 = (v0 + v1) & _M64
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & _M64
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & _M64
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & _M64
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)
    return v0 ^ v1 ^ v2 ^ v3


siphash13: Callable[[bytes], int] = siphash13_py if speedups is None else speedups.siphash13
"""SipHash-1-3 with key (0, 0) of ``data`` (format §7.9)."""


def siphash13_many(keys: Sequence[bytes]) -> array[int]:
    """SipHash-1-3 of every key, in order, as an ``array('Q')``."""
    if speedups is None:
        return array("Q", [siphash13_py(k) for k in keys])
    out = array("Q")
    out.frombytes(speedups.siphash13_many(keys if isinstance(keys, list | tuple) else list(keys)))
    return out


def num_probes_for(bits_per_key: int) -> int:
    """``(bits_per_key as f32 * 0.69_f32) as u16`` computed in single precision."""
    f069 = struct.unpack("<f", struct.pack("<f", 0.69))[0]
    bpk = struct.unpack("<f", struct.pack("<f", float(bits_per_key)))[0]
    prod = struct.unpack("<f", struct.pack("<f", bpk * f069))[0]
    return max(0, min(0xFFFF, int(math.floor(prod))))


def _probes(h: int, num_probes: int, nbits: int) -> Iterable[int]:
    x = (h & 0xFFFFFFFF) % nbits
    d = (h >> 32) % nbits
    for i in range(num_probes):
        d = (d + i) % nbits
        yield x
        x = (x + d) % nbits


def build_bloom_from_hashes(hashes: Sequence[int], bits_per_key: int) -> bytes:
    """Bloom filter data (``u16 BE num_probes`` + bit array) for precomputed u64 hashes.

    Raises:
        InvalidArgumentError: ``bits_per_key`` is negative, or a hash is not a u64.
    """
    if speedups is None:
        return build_bloom_from_hashes_py(hashes, bits_per_key)
    if not (isinstance(hashes, array) and hashes.typecode == "Q" and hashes.itemsize == 8):
        try:
            hashes = array("Q", hashes)
        except OverflowError as exc:
            raise InvalidArgumentError(f"bloom hashes must be u64: {exc}") from exc
    try:
        return speedups.bloom_build(hashes, bits_per_key)
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from exc


def build_bloom_from_hash_bytes(data: bytes, bits_per_key: int) -> bytes:
    """:func:`build_bloom_from_hashes` over hashes given as native-endian u64 bytes (what
    the block writers' ``hashes()`` and ``prefix_hashes(i)`` return).

    Raises:
        InvalidArgumentError: as :func:`build_bloom_from_hashes`, or a partial hash.
    """
    if len(data) % 8:
        raise InvalidArgumentError("hash bytes are not a multiple of 8")
    hashes = array("Q")
    hashes.frombytes(data)
    return build_bloom_from_hashes(hashes, bits_per_key)


def build_bloom_from_hashes_py(hashes: Sequence[int], bits_per_key: int) -> bytes:
    """Reference implementation of :func:`build_bloom_from_hashes`."""
    if bits_per_key < 0:
        raise InvalidArgumentError("bits_per_key must not be negative")
    num_probes = num_probes_for(bits_per_key)
    nbytes = (len(hashes) * bits_per_key + 7) // 8
    nbits = nbytes * 8
    buf = bytearray(nbytes)
    if nbits:
        for h in hashes:
            x = (h & 0xFFFFFFFF) % nbits
            d = (h >> 32) % nbits
            for i in range(num_probes):
                d = (d + i) % nbits
                buf[x >> 3] |= 1 << (x & 7)
                x = (x + d) % nbits
    return num_probes.to_bytes(2, "big") + bytes(buf)


def build_bloom(keys: Iterable[bytes], bits_per_key: int = DEFAULT_BITS_PER_KEY) -> bytes:
    """Whole-key bloom filter over ``keys`` (duplicates included, in row order)."""
    return build_bloom_from_hashes(siphash13_many(list(keys)), bits_per_key)


@dataclass(frozen=True, slots=True)
class BloomFilter:
    num_probes: int
    bits: bytes

    @staticmethod
    def decode(data: bytes, *, path: str | None = None) -> BloomFilter:
        if len(data) < 2:
            raise CorruptObjectError("bloom filter shorter than 2 bytes", path=path)
        return BloomFilter(int.from_bytes(data[:2], "big"), bytes(data[2:]))

    def might_contain_hash(self, h: int) -> bool:
        """Whether the key with (u64) hash ``h`` may be in the filter."""
        if speedups is not None:
            return speedups.bloom_check(self.bits, self.num_probes, h)
        return self.might_contain_hash_py(h)

    def might_contain_hash_py(self, h: int) -> bool:
        """Reference implementation of :meth:`might_contain_hash`."""
        bits = self.bits
        nbits = len(bits) * 8
        if nbits == 0:
            return False
        for p in _probes(h, self.num_probes, nbits):
            if not bits[p >> 3] & (1 << (p & 7)):
                return False
        return True

    def might_contain(self, key: bytes) -> bool:
        return self.might_contain_hash(siphash13(key))


def encode_composite(filters: Sequence[tuple[str, bytes]]) -> bytes:
    """Composite filter block: ``u16`` count, then per filter ``u16`` name length, name,
    ``u64`` data length, data (all big-endian)."""
    out = bytearray(len(filters).to_bytes(2, "big"))
    for name, data in filters:
        raw = name.encode()
        out += len(raw).to_bytes(2, "big") + raw + len(data).to_bytes(8, "big") + data
    return bytes(out)


def decode_composite(payload: bytes, *, path: str | None = None) -> dict[str, bytes]:
    """Named filters of a composite filter block.

    Raises:
        CorruptObjectError: the block is truncated or malformed.
    """
    try:
        count = int.from_bytes(payload[0:2], "big")
        if len(payload) < 2:
            raise IndexError
        pos = 2
        out: dict[str, bytes] = {}
        for _ in range(count):
            nlen = int.from_bytes(payload[pos : pos + 2], "big")
            name = payload[pos + 2 : pos + 2 + nlen].decode()
            pos += 2 + nlen
            dlen = int.from_bytes(payload[pos : pos + 8], "big")
            data = payload[pos + 8 : pos + 8 + dlen]
            if len(data) != dlen or pos + 8 > len(payload):
                raise IndexError
            pos += 8 + dlen
            out[name] = bytes(data)
        return out
    except (IndexError, UnicodeDecodeError) as exc:
        raise CorruptObjectError("malformed composite filter block", path=path) from exc


def decode_filter_block(
    payload: bytes, filter_format: int, *, path: str | None = None
) -> BloomFilter | None:
    """The whole-key bloom filter (policy ``_bf``) of a filter block, if it has one."""
    if filter_format == 0:
        return BloomFilter.decode(payload, path=path)
    data = decode_composite(payload, path=path).get(BLOOM_POLICY_NAME)
    return None if data is None else BloomFilter.decode(data, path=path)
