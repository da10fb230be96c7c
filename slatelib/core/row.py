"""Row entries: the unit stored in SSTs and memtables.

A row is a plain tuple, for speed on the hot paths (decode, merge, encode):

    (key, seq, kind, value, expire_ts, create_ts)

``kind`` is one of :data:`VALUE`, :data:`TOMBSTONE`, :data:`MERGE`. ``value`` is ``b""``
for tombstones. ``expire_ts`` and ``create_ts`` are Unix milliseconds or None.
Compacted SSTs order rows by key ascending then seq descending; WAL SSTs by seq ascending.
"""

from __future__ import annotations

from typing import Final

Row = tuple[bytes, int, int, bytes, "int | None", "int | None"]

KEY: Final = 0
SEQ: Final = 1
KIND: Final = 2
VALUE_FIELD: Final = 3
EXPIRE_TS: Final = 4
CREATE_TS: Final = 5

VALUE: Final = 0
TOMBSTONE: Final = 1
MERGE: Final = 2

KIND_NAMES: Final = {VALUE: "value", TOMBSTONE: "tombstone", MERGE: "merge"}

# Row flags as stored (format §7.6).
FLAG_TOMBSTONE: Final = 0x01
FLAG_HAS_EXPIRE_TS: Final = 0x02
FLAG_HAS_CREATE_TS: Final = 0x04
FLAG_MERGE_OPERAND: Final = 0x08
KNOWN_FLAGS: Final = 0x0F

MAX_SEQ: Final = (1 << 64) - 1


def compacted_order_key(row: Row) -> tuple[bytes, int]:
    """Sort key of compacted SSTs: key ascending, seq descending."""
    return (row[0], -row[1])
