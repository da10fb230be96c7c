"""The manifest's sequence tracker blob: (seq, unix seconds) samples.

Format §5.6; the design is SlateDB RFC-0012.

Layout: ``u8 version (1) | u32 LE n | Gorilla(seqs) | Gorilla(timestamps)``. Each Gorilla
stream is a bit stream written most significant bit first: a 32-bit count, then (when the
count is not 0) the first value as 64 bits, then per further value its delta-of-delta
``dod`` as ``0`` (dod 0), ``10``+7 bits, ``110``+9 bits, ``1110``+12 bits, or ``1111``+the
low 32 bits; the stream is padded with zero bits to a byte boundary. Values are i64 (seqs
are u64 reinterpreted), and arithmetic wraps at 64 bits, as in 0.17.0.

The manifest codec keeps the blob as opaque bytes; this module decodes and encodes it
(byte-identically to 0.17.0) and implements the sampling rule as the pure :func:`track`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from slatelib.errors import CorruptObjectError, InvalidArgumentError

SEQ_TRACKER_VERSION = 1
SEQ_TRACKER_CAPACITY = 8192
SEQ_TRACKER_INTERVAL_S = 60
EMPTY_SEQ_TRACKER = bytes([SEQ_TRACKER_VERSION]) + bytes(12)

_MASK64 = (1 << 64) - 1
_SIGN64 = 1 << 63
# dod range upper bound -> (prefix bits, payload width)
_CODES = ((63, "10", 7), (255, "110", 9), (2047, "1110", 12))
_WIDTH_BY_ONES = (7, 9, 12, 32)  # payload width after 1, 2, 3 or 4 leading one bits

Pair = tuple[int, int]


def _i64(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v & _SIGN64 else v


# ------------------------------------------------------------------------------ encode
def _gorilla(values: Sequence[int]) -> bytes:
    bits = [format(len(values), "032b")]
    if values:
        bits.append(format(values[0] & _MASK64, "064b"))
        prev, prev_delta = values[0], 0
        for v in values[1:]:
            delta = _i64(v - prev)
            dod = _i64(delta - prev_delta)
            if dod == 0:
                bits.append("0")
            else:
                for bound, prefix, width in _CODES:
                    if -bound <= dod <= bound:
                        bits.append(prefix + format(dod & ((1 << width) - 1), f"0{width}b"))
                        break
                else:
                    bits.append("1111" + format(dod & 0xFFFFFFFF, "032b"))
            prev, prev_delta = v, delta
    s = "".join(bits)
    nbytes = (len(s) + 7) // 8
    return int(s.ljust(nbytes * 8, "0"), 2).to_bytes(nbytes, "big")


def encode_seq_tracker(pairs: Sequence[Pair]) -> bytes:
    """Encode (seq, unix seconds) pairs as 0.17.0 does.

    Raises:
        InvalidArgumentError: a seq is not a u64, a timestamp not an i64, or there are more
            than 2**32 - 1 pairs.
    """
    if len(pairs) > 0xFFFFFFFF:
        raise InvalidArgumentError("too many sequence tracker pairs")
    seqs: list[int] = []
    stamps: list[int] = []
    for seq, ts in pairs:
        if not isinstance(seq, int) or not 0 <= seq <= _MASK64:
            raise InvalidArgumentError(f"sequence number must be a u64, got {seq!r}")
        if not isinstance(ts, int) or not -_SIGN64 <= ts < _SIGN64:
            raise InvalidArgumentError(f"timestamp must be an i64, got {ts!r}")
        seqs.append(_i64(seq))
        stamps.append(ts)
    return (bytes([SEQ_TRACKER_VERSION]) + struct.pack("<I", len(pairs))
            + _gorilla(seqs) + _gorilla(stamps))


# ------------------------------------------------------------------------------ decode
class _Bits:
    """MSB-first bit reader over a byte string (as a '0'/'1' text for fast slicing)."""

    __slots__ = ("bits", "pos", "path")

    def __init__(self, data: bytes, path: str | None) -> None:
        self.bits = format(int.from_bytes(data, "big"), f"0{8 * len(data)}b") if data else ""
        self.pos = 0
        self.path = path

    def read(self, n: int, what: str) -> int:
        end = self.pos + n
        if end > len(self.bits):
            raise CorruptObjectError(f"sequence tracker truncated reading {what}", path=self.path)
        v = int(self.bits[self.pos:end], 2)
        self.pos = end
        return v


def _ungorilla(data: bytes, path: str | None) -> tuple[int, list[int]]:
    """Decode one stream; return (bytes consumed, values as i64)."""
    r = _Bits(data, path)
    count = r.read(32, "count")
    values: list[int] = []
    if count:
        prev = _i64(r.read(64, "first value"))
        values.append(prev)
        prev_delta = 0
        for _ in range(count - 1):
            ones = 0
            while ones < 4 and r.read(1, "prefix"):
                ones += 1
            dod = 0
            if ones:
                width = _WIDTH_BY_ONES[ones - 1]
                raw = r.read(width, "delta of delta")
                dod = raw - (1 << width) if raw >> (width - 1) else raw
            prev_delta = _i64(prev_delta + dod)
            prev = _i64(prev + prev_delta)
            values.append(prev)
    return (r.pos + 7) // 8, values


def decode_seq_tracker(data: bytes, *, path: str | None = None) -> list[Pair]:
    """Decode the blob into (seq, unix seconds) pairs.

    Raises:
        CorruptObjectError: empty, an unknown version byte (0.17.0 cannot read it either),
            truncated, or the counts disagree.
    """
    data = bytes(data)
    if not data:
        raise CorruptObjectError("empty sequence tracker", path=path)
    if data[0] != SEQ_TRACKER_VERSION:
        raise CorruptObjectError(f"unsupported sequence tracker version {data[0]}", path=path)
    if len(data) < 5:
        raise CorruptObjectError("sequence tracker too short for its length", path=path)
    n = struct.unpack_from("<I", data, 1)[0]
    used, seqs = _ungorilla(data[5:], path)
    _, stamps = _ungorilla(data[5 + used:], path)
    if len(seqs) != n or len(stamps) != n:
        raise CorruptObjectError(
            f"sequence tracker holds {len(seqs)} seqs and {len(stamps)} timestamps, expected {n}",
            path=path,
        )
    return [(s & _MASK64, t) for s, t in zip(seqs, stamps, strict=True)]


# ------------------------------------------------------------------------------ sampling
def track(pairs: Sequence[Pair], seq: int, ts: int) -> list[Pair]:
    """Record ``(seq, ts)`` the way 0.17.0's tracker does; return the new pairs.

    A sample is dropped when it comes less than 60 s after the last recorded one; when the
    tracker then holds more than 8192 pairs it is halved by keeping every other pair
    (indexes 0, 2, 4, ...).

    Raises:
        InvalidArgumentError: ``seq`` or ``ts`` goes backwards relative to the last pair.
    """
    out = list(pairs)
    if out:
        last_seq, last_ts = out[-1]
        if ts - last_ts < SEQ_TRACKER_INTERVAL_S:
            return out
        if seq < last_seq:
            raise InvalidArgumentError(f"sequence numbers must not decrease ({seq} < {last_seq})")
    out.append((seq, ts))
    if len(out) > SEQ_TRACKER_CAPACITY:
        out = out[::2]
    return out


def track_all(pairs: Sequence[Pair], samples: Iterable[Pair]) -> list[Pair]:
    """Apply :func:`track` for each sample in order (0.17.0's ``extend_from``).

    Raises:
        InvalidArgumentError: a sample goes backwards (see :func:`track`).
    """
    out = list(pairs)
    for seq, ts in samples:
        out = track(out, seq, ts)
    return out
