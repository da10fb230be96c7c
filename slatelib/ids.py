"""Identifiers: ULIDs (SST, view and compaction ids), UUIDs (checkpoints), numeric ids.

A ULID is kept as a plain ``int`` (the 128-bit value), which is fast to compare and hash;
its text form is 26 characters of Crockford base32. The top 48 bits are the creation time
in Unix milliseconds, which SlateDB's GC (SlateDB RFC-0029) reads as the object's age, so new ULIDs
must come from the current wall clock.
"""

from __future__ import annotations

import random
import re
import uuid
from typing import NewType

from slatelib.errors import InvalidArgumentError

Ulid = NewType("Ulid", int)

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE = {c: i for i, c in enumerate(CROCKFORD)}
_DECODE.update({c.lower(): i for i, c in enumerate(CROCKFORD)})
ULID_MAX = (1 << 128) - 1
_ULID_TEXT = re.compile(r"[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}", re.ASCII)
_TO_BASE32 = str.maketrans({c: "0123456789abcdefghijklmnopqrstuv"[i] for c, i in _DECODE.items()})
ID_WIDTH = 20


# Two Crockford digits (10 bits) per entry: a ULID is 13 lookups.
_PAIRS = [CROCKFORD[i >> 5] + CROCKFORD[i & 31] for i in range(1024)]
_LOW70 = (1 << 70) - 1


def ulid_to_str(value: int) -> str:
    """Format a 128-bit ULID as 26 upper-case Crockford base32 characters."""
    if not 0 <= value <= ULID_MAX:
        raise InvalidArgumentError(f"ULID out of range: {value}")
    # Unrolled (a manifest walk formats one name per SST): 13 pairs from two smaller ints.
    p = _PAIRS
    hi, lo = value >> 70, value & _LOW70
    return (p[hi >> 50] + p[(hi >> 40) & 1023] + p[(hi >> 30) & 1023] + p[(hi >> 20) & 1023]
            + p[(hi >> 10) & 1023] + p[hi & 1023] + p[lo >> 60] + p[(lo >> 50) & 1023]
            + p[(lo >> 40) & 1023] + p[(lo >> 30) & 1023] + p[(lo >> 20) & 1023]
            + p[(lo >> 10) & 1023] + p[lo & 1023])


def ulid_from_str(text: str) -> Ulid:
    """Parse a 26-character Crockford base32 ULID.

    Raises:
        InvalidArgumentError: the text is not a valid ULID.
    """
    if len(text) != 26:
        raise InvalidArgumentError(f"not a ULID (length {len(text)}): {text!r}")
    if _ULID_TEXT.fullmatch(text):
        # int() in base 32 after mapping the Crockford digits to 0-9a-v (GC and `slate ls`
        # parse one name per listed SST); only valid digits get here.
        v = int(text.translate(_TO_BASE32), 32)
        if v > ULID_MAX:
            raise InvalidArgumentError(f"not a ULID (overflow): {text!r}")
        return Ulid(v)
    v = 0
    for c in text:
        d = _DECODE.get(c)
        if d is None:
            raise InvalidArgumentError(f"not a ULID (bad character {c!r}): {text!r}")
        v = (v << 5) | d
    if v > ULID_MAX:
        raise InvalidArgumentError(f"not a ULID (overflow): {text!r}")
    return Ulid(v)


def try_parse_ulid(text: str) -> Ulid | None:
    """Parse a ULID, or return None when the text is not one."""
    try:
        return ulid_from_str(text)
    except InvalidArgumentError:
        return None


def ulid_time_ms(value: int) -> int:
    """The 48-bit millisecond timestamp embedded in a ULID."""
    return value >> 80


class UlidGenerator:
    """Mints ULIDs from a millisecond clock, monotonically increasing per generator.

    Within one millisecond the random part is incremented, as the ULID spec's monotonic
    mode does, so ids minted by one process sort in creation order.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.SystemRandom()
        self._last = 0

    def new(self, now_ms: int) -> Ulid:
        if not 0 <= now_ms < (1 << 48):
            raise InvalidArgumentError(f"timestamp out of ULID range: {now_ms}")
        candidate = (now_ms << 80) | self._rng.getrandbits(80)
        if candidate <= self._last:
            if ulid_time_ms(self._last) >= now_ms and self._last < ULID_MAX:
                candidate = self._last + 1
        self._last = candidate
        return Ulid(candidate)


def parse_uuid(text: str) -> uuid.UUID:
    """Parse a checkpoint id.

    Raises:
        InvalidArgumentError: the text is not a UUID.
    """
    try:
        return uuid.UUID(text)
    except ValueError as exc:
        raise InvalidArgumentError(f"not a UUID: {text!r}") from exc


def format_id(value: int) -> str:
    """A u64 id as a 20-digit zero-padded decimal, the form used in object names."""
    if not 0 <= value < (1 << 64):
        raise InvalidArgumentError(f"id out of u64 range: {value}")
    return f"{value:0{ID_WIDTH}d}"


def parse_id(text: str) -> int | None:
    """Parse the numeric stem of a manifest/compactions/WAL object name (text before '.')."""
    if not text or not text.isdigit() or not text.isascii():
        return None
    value = int(text)
    return value if value < (1 << 64) else None
