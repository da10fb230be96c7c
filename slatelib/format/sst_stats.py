"""The SST stats block: ``SstStats`` with one ``BlockStats`` per data block (format §7.10).

``SstStats { num_puts (0), num_deletes (1), num_merges (2), raw_key_size (3),
raw_val_size (4): u64; block_stats (5): [BlockStats] }`` and
``BlockStats { num_puts (0), num_deletes (1), num_merges (2): u16 }``.

Like the index, an SST written by compaction may have tens of thousands of blocks, so
:func:`encode_sst_stats` lays the buffer out directly (as the ``flatbuffers`` Builder would
for 0.17.0's creation order: each BlockStats table, the vector if non-empty, the SstStats
table; format §5.7) and :func:`encode_sst_stats_with_builder` is the reference it is tested
against.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from slatelib.errors import InvalidArgumentError
from slatelib.format.flatbuf import (
    U16_MAX,
    U32,
    Buffer,
    Table,
    add_offset_vector,
    check_uint,
    corrupt_on_error,
    finish,
    new_builder,
)

_ZEROS = tuple(bytes(i) for i in range(8))
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")


@dataclass(frozen=True, slots=True)
class SstStats:
    """Row counts and raw sizes of an SST; ``block_stats`` is (puts, deletes, merges) per block."""

    num_puts: int = 0
    num_deletes: int = 0
    num_merges: int = 0
    raw_key_size: int = 0
    raw_val_size: int = 0
    block_stats: tuple[tuple[int, int, int], ...] = ()

    @property
    def num_rows(self) -> int:
        return self.num_puts + self.num_deletes + self.num_merges


# ------------------------------------------------------------------------------ decode
def decode_sst_stats(buf: bytes | bytearray | memoryview, *, path: str | None = None) -> SstStats:
    """Decode an (uncompressed) stats block payload.

    Raises:
        CorruptObjectError: the buffer is truncated or malformed.
    """
    with corrupt_on_error("SstStats", path):
        b = Buffer(buf, path=path)
        root = b.root()
        blocks = root.vector(5, 4)
        return SstStats(
            num_puts=root.u64(0),
            num_deletes=root.u64(1),
            num_merges=root.u64(2),
            raw_key_size=root.u64(3),
            raw_val_size=root.u64(4),
            block_stats=() if blocks is None else _block_stats(b, *blocks),
        )


def _block_stats(b: Buffer, start: int, n: int) -> tuple[tuple[int, int, int], ...]:
    """Decode the BlockStats vector, caching the field layout of each distinct vtable."""
    data = b.data
    end = b.end
    rels = struct.unpack_from(f"<{n}I", data, start)
    out: list[tuple[int, int, int]] = [(0, 0, 0)] * n
    layouts: dict[int, tuple[struct.Struct, int, int, int, int]] = {}
    unpack_i32 = _I32.unpack_from
    pos = start
    for i in range(n):
        t = pos + rels[i]
        pos += 4
        if t + 4 > end:
            b.check(t, 4, "BlockStats")
        vt = t - unpack_i32(data, t)[0]
        lay = layouts.get(vt)
        if lay is None:
            lay = layouts[vt] = _stats_layout(b.table_at(t))
        st, size, ip, idl, im = lay
        if t + size > end:
            b.check(t, size, "BlockStats")
        vals = (*st.unpack_from(data, t), 0)
        out[i] = (vals[ip], vals[idl], vals[im])
    return tuple(out)


def _stats_layout(t: Table) -> tuple[struct.Struct, int, int, int, int]:
    """A Struct reading the present u16 fields of this vtable's tables, their size, and the
    index of num_puts/num_deletes/num_merges in its result (-1: absent, reads as 0)."""
    present = sorted((t.field_pos(slot, 2) - t.pos, slot) for slot in range(3) if t.has(slot))
    fmt, at, index = "<", 0, [-1, -1, -1]
    for i, (rel, slot) in enumerate(present):
        fmt += f"{rel - at}xH" if rel > at else "H"
        at = rel + 2
        index[slot] = i
    return struct.Struct(fmt), t.size, index[0], index[1], index[2]


# ------------------------------------------------------------------------------ encode
def _check(stats: SstStats) -> None:
    for name in ("num_puts", "num_deletes", "num_merges", "raw_key_size", "raw_val_size"):
        check_uint(getattr(stats, name), 64, name)
    for block in stats.block_stats:
        if len(block) != 3 or not all(isinstance(v, int) and 0 <= v <= U16_MAX for v in block):
            raise InvalidArgumentError(f"block stats must be three u16 counts, got {block!r}")


def _block_layout(present: tuple[bool, bool, bool], cur_mod4: int) -> tuple[
        int, int, tuple[int, ...], bytes]:
    """(padding after soffset, object size, vtable key, vtable bytes) for one BlockStats."""
    slots = [0, 0, 0]
    cur = cur_mod4
    for slot in (2, 1, 0):  # add order: num_merges, num_deletes, num_puts
        if present[slot]:
            cur += 2
            slots[slot] = cur
    pad = -cur & 3
    cur += pad + 4
    obj_size = cur - cur_mod4
    voffs = [cur - s if s else 0 for s in slots]
    while voffs and voffs[-1] == 0:
        voffs.pop()
    key = (*reversed(voffs), obj_size)
    vt_bytes = struct.pack(f"<{2 + len(voffs)}H", 4 + 2 * len(voffs), obj_size, *voffs)
    return pad, obj_size, key, vt_bytes


_LAYOUTS = {
    (p, d, m, c): _block_layout((p, d, m), c)
    for p in (False, True) for d in (False, True) for m in (False, True) for c in (0, 2)
}


def encode_sst_stats(stats: SstStats) -> bytes:
    """Encode stats byte-identically to 0.17.0.

    Raises:
        InvalidArgumentError: a counter does not fit its field (u64; u16 per block).
    """
    _check(stats)
    chunks: list[bytes] = []  # back to front
    append = chunks.append
    vtables: dict[tuple[int, ...], int] = {}
    tables: list[int] = []
    pack_u16 = _U16.pack
    pack_i32 = _I32.pack
    cur = 0
    minalign = 1
    for puts, deletes, merges in stats.block_stats:
        pad, obj_size, key, vt_bytes = _LAYOUTS[(puts != 0, deletes != 0, merges != 0, cur & 3)]
        minalign = 4
        cur += obj_size
        vt = vtables.get(key)
        fields = b"".join(pack_u16(v) for v in (puts, deletes, merges) if v)
        append(pack_i32(len(vt_bytes) if vt is None else vt - cur) + _ZEROS[pad] + fields)
        tables.append(cur)
        if vt is None:
            append(vt_bytes)
            cur += len(vt_bytes)
            vtables[key] = cur
    vec = 0
    if tables:
        # StartVector(4, n, 4): Prep(4, 4n) pads to a multiple of 4
        pad = -cur & 3
        if pad:
            append(_ZEROS[pad])
            cur += pad
        n = len(tables)
        append(struct.pack(f"<I{n}I", n, *[cur + 4 * (n - i) - t for i, t in enumerate(tables)]))
        cur += 4 * n + 4
        vec = cur
    return _finish_stats(chunks, cur, vec, vtables, minalign, stats)


def _finish_stats(chunks: list[bytes], cur: int, vec: int, vtables: dict[tuple[int, ...], int],
                  minalign: int, stats: SstStats) -> bytes:
    """The SstStats table (u64 fields then block_stats), then ``Finish``."""
    obj_end = cur
    body: list[bytes] = []  # back to front
    slots = [0] * 6
    for slot, value in ((4, stats.raw_val_size), (3, stats.raw_key_size), (2, stats.num_merges),
                        (1, stats.num_deletes), (0, stats.num_puts)):
        if value:
            minalign = 8
            pad = -cur & 7
            body.append(_ZEROS[pad])
            body.append(_U64.pack(value))
            cur += pad + 8
            slots[slot] = cur
    if vec:
        pad = -cur & 3
        body.append(_ZEROS[pad])
        cur += pad
        body.append(U32.pack(cur + 4 - vec))
        cur += 4
        slots[5] = cur
    pad = -cur & 3
    minalign = max(minalign, 4)
    body.append(_ZEROS[pad])
    cur += pad + 4
    root = cur
    voffs = [root - s if s else 0 for s in slots]
    while voffs and voffs[-1] == 0:
        voffs.pop()
    key = (*reversed(voffs), root - obj_end)
    vt = vtables.get(key)
    vt_bytes = struct.pack(f"<{2 + len(voffs)}H", 4 + 2 * len(voffs), root - obj_end, *voffs)
    body.append(_I32.pack(len(vt_bytes) if vt is None else vt - root))
    if vt is None:
        body.append(vt_bytes)
        cur += len(vt_bytes)
    pad = -(cur + 4) & (minalign - 1)
    body.append(U32.pack(cur + pad + 4 - root) + _ZEROS[pad])
    chunks.extend(body)
    chunks.reverse()
    return b"".join(chunks)


def encode_sst_stats_with_builder(stats: SstStats) -> bytes:
    """Reference encoder using the ``flatbuffers`` Builder (slow; for tests and tools).

    Raises:
        InvalidArgumentError: a counter does not fit its field.
    """
    _check(stats)
    b = new_builder()
    tables = []
    for puts, deletes, merges in stats.block_stats:
        b.StartObject(3)
        b.PrependUint16Slot(2, merges, 0)
        b.PrependUint16Slot(1, deletes, 0)
        b.PrependUint16Slot(0, puts, 0)
        tables.append(b.EndObject())
    vec = add_offset_vector(b, tables) if tables else None
    b.StartObject(6)
    b.PrependUint64Slot(4, stats.raw_val_size, 0)
    b.PrependUint64Slot(3, stats.raw_key_size, 0)
    b.PrependUint64Slot(2, stats.num_merges, 0)
    b.PrependUint64Slot(1, stats.num_deletes, 0)
    b.PrependUint64Slot(0, stats.num_puts, 0)
    if vec is not None:
        b.PrependUOffsetTRelativeSlot(5, vec, 0)
    return finish(b, b.EndObject())
