"""The SST index block: ``SsTableIndex { block_meta: [BlockMeta] }`` (format §7.8).

``BlockMeta { offset: u64 (slot 0), first_key: [ubyte] (slot 1, required) }``, one per data
block. ``first_key`` is the block's separator key (compacted SSTs; block 0 has an empty one)
or its first seq as 8 bytes BE (WAL SSTs); this module does not interpret it.

Compaction writes SSTs with tens of thousands of blocks, so both directions are hand-written
for speed: :func:`encode_sst_index` lays out the buffer exactly as the ``flatbuffers``
``Builder`` would for 0.17.0's creation order (first-key vector of block i, then BlockMeta i,
for every i; then the vector and the table, format §5.7) without calling it, and
:func:`encode_sst_index_with_builder` is the reference it is tested against.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import flatbuffers

from slatelib.errors import InvalidArgumentError
from slatelib.format import native
from slatelib.format.flatbuf import (
    I32,
    U32,
    U64_MAX,
    Buffer,
    add_offset_vector,
    corrupt_on_error,
    finish,
    new_builder,
)

_U16X4 = struct.Struct("<4H")
_U16X3 = struct.Struct("<3H")
_META_FULL = struct.Struct("<iIQ")  # soffset, first_key uoffset, offset
_META_NO_OFFSET = struct.Struct("<iI")
_TABLE = struct.Struct("<iI")
_U64 = struct.Struct("<Q")
_ZEROS = tuple(bytes(i) for i in range(8))
_INDEX_METAS = native.speedups.index_metas if native.speedups is not None else None
"""``_speedups.index_metas``: the BlockMeta loop in C. It returns what :func:`_decode_metas`
returns, or None for anything it does not check as strictly (then the Python loop runs and
names the problem); ``tests/unit/format/test_sst_index.py`` holds the two together."""


@dataclass(frozen=True, slots=True)
class SstIndex:
    """Block offsets and block ``first_key``s, as two parallel tuples."""

    offsets: tuple[int, ...]
    first_keys: tuple[bytes, ...]

    def __len__(self) -> int:
        return len(self.offsets)

    def entries(self) -> list[tuple[int, bytes]]:
        """``(offset, first_key)`` per block, the input form of :func:`encode_sst_index`."""
        return list(zip(self.offsets, self.first_keys, strict=True))

    def block_for_key(self, key: bytes) -> int:
        """Index of the last block whose ``first_key <= key``; -1 if there is none."""
        return bisect_right(self.first_keys, key) - 1


# ------------------------------------------------------------------------------ decode
def decode_sst_index(buf: bytes | bytearray | memoryview, *, path: str | None = None) -> SstIndex:
    """Decode an (uncompressed) index block payload.

    Raises:
        CorruptObjectError: the buffer is truncated or malformed, or a BlockMeta lacks its
            required ``first_key``.
    """
    with corrupt_on_error("SsTableIndex", path):
        b = Buffer(buf, path=path)
        root = b.root()
        vec = root.vector(0, 4)
        if vec is None:
            root.missing("block_meta")
        start, n = vec
        if _INDEX_METAS is not None:
            fast = _INDEX_METAS(b.data, start, n)
            if fast is not None:
                return SstIndex(*fast)
        return _decode_metas(b, start, n)


def _decode_metas(b: Buffer, start: int, n: int) -> SstIndex:
    data = b.data
    end = b.end
    rels = struct.unpack_from(f"<{n}I", data, start)
    offsets = [0] * n
    keys = [b""] * n
    layouts: dict[int, tuple[int, int, int]] = {}  # vtable position -> (offset, key, size)
    unpack_i32 = I32.unpack_from
    unpack_u32 = U32.unpack_from
    unpack_full = _META_FULL.unpack_from
    pos = start
    for i in range(n):
        t = pos + rels[i]
        pos += 4
        if t + 16 <= end:
            soff, krel, offset = unpack_full(data, t)
        else:
            b.check(t, 4, "BlockMeta")
            soff = unpack_i32(data, t)[0]
            krel = offset = -1
        lay = layouts.get(t - soff)
        if lay is None:
            lay = _meta_layout(b, t)
            layouts[t - soff] = lay
        off_rel, key_rel, size = lay
        if t + size > end:
            b.check(t, size, "BlockMeta")
        if off_rel != 8 or key_rel != 4 or krel < 0:  # not the canonical layout
            offset = int(_U64.unpack_from(data, t + off_rel)[0]) if off_rel else 0
            krel = unpack_u32(data, t + key_rel)[0]
        k = t + key_rel + krel
        if k + 4 > end:
            b.check(k, 4, "first_key")
        klen = unpack_u32(data, k)[0]
        if k + 4 + klen > end:
            b.check(k + 4, klen, "first_key")
        offsets[i] = offset
        keys[i] = data[k + 4:k + 4 + klen]
    return SstIndex(tuple(offsets), tuple(keys))


def _meta_layout(b: Buffer, t: int) -> tuple[int, int, int]:
    """Validate the vtable of the BlockMeta at ``t``: (offset field rel, key field rel, size)."""
    table = b.table_at(t)
    off_pos = table.field_pos(0, 8)
    key_pos = table.field_pos(1, 4)
    if not key_pos:
        table.missing("first_key")
    return (off_pos - t if off_pos else 0), key_pos - t, table.size


# ------------------------------------------------------------------------------ encode
def encode_sst_index(entries: Sequence[tuple[int, bytes]]) -> bytes:
    """Encode ``(block offset, first_key)`` pairs byte-identically to 0.17.0.

    The buffer is assembled back to front from chunks, mirroring the Builder step by step:
    positions are the builder's ``Offset()`` (bytes written so far) and vtables are
    deduplicated by content, as the Builder does.

    Raises:
        InvalidArgumentError: an offset does not fit in u64.
    """
    chunks: list[bytes] = []  # back to front, as the builder writes
    append = chunks.append
    pack_u32 = U32.pack
    pack_full = _META_FULL.pack
    pack_short = _META_NO_OFFSET.pack
    pack_vt = _U16X4.pack
    vtables: dict[tuple[int, ...], int] = {}
    metas: list[int] = []
    cur = 0
    minalign = 4
    for offset, key in entries:
        # first-key vector: Prep(4, len), the bytes, the u32 length
        klen = len(key)
        pad = -(cur + klen) & 3
        if pad:
            append(_ZEROS[pad])
        append(bytes(key))
        append(pack_u32(klen))
        cur += pad + klen + 4
        key_off = cur
        # BlockMeta: [offset u64 after Prep(8)], first_key uoffset, soffset
        if offset:
            if not 0 < offset <= U64_MAX:
                raise InvalidArgumentError(f"block offset must fit in u64, got {offset!r}")
            minalign = 8
            pad = -cur & 7
            obj_size = 16 + pad
            vt_key: tuple[int, int, int] = (4, 8, obj_size)
        else:
            obj_size = 8
            vt_key = (4, 0, 8)
        cur += obj_size  # now the object's offset
        uoff = cur - 4 - key_off
        vt = vtables.get(vt_key)
        soff = 8 if vt is None else vt - cur
        if offset:
            append(pack_full(soff, uoff, offset) + _ZEROS[pad])
        else:
            append(pack_short(soff, uoff))
        metas.append(cur)
        if vt is None:
            append(pack_vt(8, obj_size, vt_key[1], 4))
            cur += 8
            vtables[vt_key] = cur
    return _finish_index(chunks, cur, metas, vtables, minalign)


def _finish_index(chunks: list[bytes], cur: int, metas: list[int],
                  vtables: dict[tuple[int, ...], int], minalign: int) -> bytes:
    """The ``block_meta`` vector, the SsTableIndex table, then ``Finish``."""
    n = len(metas)
    # StartVector(4, n, 4) needs no padding: every BlockMeta ends 4-aligned
    chunks.append(struct.pack(f"<I{n}I", n, *[cur + 4 * (n - i) - m for i, m in enumerate(metas)]))
    cur += 4 * n + 4
    # SsTableIndex: block_meta uoffset (the vector follows directly: 4), soffset
    cur += 8
    root = cur
    vt = vtables.get((4, 8))
    if vt is None:
        chunks.append(_TABLE.pack(6, 4))
        chunks.append(_U16X3.pack(6, 8, 4))
        cur += 6
    else:  # pragma: no cover - no BlockMeta vtable has this key
        chunks.append(_TABLE.pack(vt - cur, 4))
    pad = -(cur + 4) & (minalign - 1)
    chunks.append(U32.pack(cur + pad + 4 - root) + _ZEROS[pad])
    chunks.reverse()
    return b"".join(chunks)


def encode_sst_index_with_builder(entries: Sequence[tuple[int, bytes]]) -> bytes:
    """Reference encoder using the ``flatbuffers`` Builder (slow; for tests and tools).

    Raises:
        InvalidArgumentError: an offset does not fit in u64.
    """
    b: flatbuffers.Builder = new_builder()
    metas: list[int] = []
    for offset, key in entries:
        if not 0 <= offset <= U64_MAX:
            raise InvalidArgumentError(f"block offset must fit in u64, got {offset!r}")
        key_off = b.CreateByteVector(bytes(key))
        b.StartObject(2)
        b.PrependUint64Slot(0, offset, 0)
        b.PrependUOffsetTRelativeSlot(1, key_off, 0)
        metas.append(b.EndObject())
    vec = add_offset_vector(b, metas)
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, vec, 0)
    return finish(b, b.EndObject())
