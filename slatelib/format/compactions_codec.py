"""Compactions file bytes <-> :class:`~slatelib.core.compactions.Compactions` (format §6).

``u16 BE version | FlatBuffer (root CompactionsV1)``. 0.17.0 writes version 2 and reads 1
and 2. Version 1 does not store the tiered ``destination``: it is inferred as the smallest
input run id, else 0, and a stored value is ignored. (Version 2 also introduced
``DrainSegmentSpec``, but 0.17.0 reads that union variant in version-1 files as well, so we
do too.) The model remembers the version it
was read from and :func:`encode_compactions` writes that version back (2 for anything
built fresh), so every file re-encodes byte-identically.

The native codec (``slatelib._manifest``, see :mod:`slatelib.format.manifest_native`)
encodes the whole file and decodes its big vectors (output SSTs, also of subcompactions;
L0 view ids and legacy SST ids); :func:`encode_compactions_py` and
:func:`decode_compactions_py` are the reference and the fallback: whatever the native code
refuses is redone by them, which raise the documented errors
(docs/rfcs/0010-manifest-codec.md, "The compactions file").
"""

from __future__ import annotations

import struct
from typing import Protocol

import flatbuffers

from slatelib.core.compactions import (
    COMPACTIONS_FORMAT_VERSION,
    CompactedSsTable,
    Compaction,
    Compactions,
    CompactionSpec,
    CompactionStatus,
    DrainSegmentSpec,
    Subcompaction,
    TieredCompactionContext,
    TieredCompactionSpec,
    WorkerSpec,
)
from slatelib.core.ranges import BytesRange
from slatelib.errors import CorruptObjectError, InvalidArgumentError, UnsupportedFormatVersionError
from slatelib.format import manifest_native
from slatelib.format.flatbuf import (
    Buffer,
    Table,
    add_bytes,
    add_offset_vector,
    add_string,
    add_u32_vector,
    check_uint,
    corrupt_on_error,
    finish,
    new_builder,
)
from slatelib.format.manifest_parts import add_compacted, read_compacted
from slatelib.format.shared_tables import (
    add_range,
    add_ulid,
    add_ulid_vector,
    read_range,
    read_ulid,
    read_ulids,
)
from slatelib.ids import Ulid

SUPPORTED_COMPACTIONS_VERSIONS = (1, 2)
SPEC_TIERED = 1
SPEC_DRAIN_SEGMENT = 2
CTX_NONE = 0
CTX_TIERED = 1
_VERSION = struct.Struct(">H")
_STATUS = {int(s): s for s in CompactionStatus}


# ------------------------------------------------------------------------------ decode
def decode_compactions(data: bytes | bytearray | memoryview, *,
                       path: str | None = None) -> Compactions:
    """Decode a compactions file (version 1 or 2).

    The output-SST and ULID vectors go through the native codec when it is built; anything
    it does not accept is decoded again by :func:`decode_compactions_py`, which raises the
    errors below.

    Raises:
        CorruptObjectError: shorter than 2 bytes, truncated or malformed, or an unknown
            status, spec or context type.
        UnsupportedFormatVersionError: the version prefix is neither 1 nor 2.
    """
    version = _check_prefix(data, path)
    ext = manifest_native.ext
    if ext is not None:
        try:
            return _decode(Buffer(data, start=2, path=path).root(), version,
                           _NativeVectors(ext))
        except Exception:  # noqa: BLE001 - the reference below raises the documented error
            pass
    return decode_compactions_py(data, path=path)


def decode_compactions_py(data: bytes | bytearray | memoryview, *,
                          path: str | None = None) -> Compactions:
    """:func:`decode_compactions` in pure Python (the reference of the native codec).

    Raises:
        CorruptObjectError: see :func:`decode_compactions`.
        UnsupportedFormatVersionError: see :func:`decode_compactions`.
    """
    version = _check_prefix(data, path)
    with corrupt_on_error("compactions file", path):
        return _decode(Buffer(data, start=2, path=path).root(), version, _PY_VECTORS)


def _check_prefix(data: bytes | bytearray | memoryview, path: str | None) -> int:
    if len(data) < 2:
        raise CorruptObjectError(f"compactions file too short ({len(data)} bytes)", path=path)
    version: int = _VERSION.unpack_from(data, 0)[0]
    if version not in SUPPORTED_COMPACTIONS_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"{path + ': ' if path else ''}unsupported compactions format version {version} "
            f"(supported: {SUPPORTED_COMPACTIONS_VERSIONS})"
        )
    return version


class _Vectors(Protocol):
    """How the big vectors of a compactions file are read: the reference or the native code."""

    def outputs(self, t: Table, slot: int) -> tuple[CompactedSsTable, ...]: ...
    def ulids(self, t: Table, slot: int) -> tuple[Ulid, ...]: ...


class _PyVectors:
    def outputs(self, t: Table, slot: int) -> tuple[CompactedSsTable, ...]:
        tables = t.tables(slot)
        return () if tables is None else tuple(CompactedSsTable(*read_compacted(x))
                                               for x in tables)

    def ulids(self, t: Table, slot: int) -> tuple[Ulid, ...]:
        return read_ulids(t, slot) or ()


_PY_VECTORS = _PyVectors()


class _NativeVectors:
    """``slatelib._manifest.read_compacted`` and ``read_ulids``; visible ranges (rare in
    outputs) are read by the reference code through a callback."""

    def __init__(self, ext: manifest_native.ManifestExt) -> None:
        self._ext = ext

    def outputs(self, t: Table, slot: int) -> tuple[CompactedSsTable, ...]:
        v = t.vector(slot, 4)
        if v is None:
            return ()
        buf = t.buf

        def range_at(pos: int) -> BytesRange:
            return read_range(buf.table_at(pos))

        return self._ext.read_compacted(buf.data, buf.start, v[0], v[1], range_at)

    def ulids(self, t: Table, slot: int) -> tuple[Ulid, ...]:
        v = t.vector(slot, 4)
        return () if v is None else self._ext.read_ulids(t.buf.data, t.buf.start, *v)


def _decode(root: Table, version: int, vectors: _Vectors) -> Compactions:
    return Compactions(
        compactor_epoch=root.u64(0),
        recent_compactions=tuple(
            _read_compaction(t, version, vectors)
            for t in root.req_tables(1, "recent_compactions")
        ),
        format_version=version,
    )


def _read_compaction(t: Table, version: int, vectors: _Vectors) -> Compaction:
    status = _STATUS.get(t.i8(3))
    if status is None:
        t.buf.fail(f"unknown compaction status {t.i8(3)}")
    worker = t.table(5)
    worker_id = None if worker is None else worker.string(0)
    return Compaction(
        id=read_ulid(t.req_table(0, "id")),
        spec=_read_spec(t, version, vectors),
        status=status,
        output_ssts=vectors.outputs(t, 4),
        worker=None if worker is None or worker_id is None else WorkerSpec(
            worker_id, worker.u64(1)),
        ctx=_read_ctx(t, vectors),
    )


def _read_spec(t: Table, version: int, vectors: _Vectors) -> CompactionSpec:
    kind, value = t.union(1, 2)
    spec = value if value is not None else t.missing("spec")
    if kind == SPEC_TIERED:
        runs = spec.u32s(1) or ()
        return TieredCompactionSpec(
            l0_view_ids=vectors.ulids(spec, 2),
            sorted_runs=runs,
            destination=spec.u32(4) if version >= 2 else min(runs, default=0),
            segment=spec.bytes_(3),
            ssts=vectors.ulids(spec, 0),
        )
    if kind == SPEC_DRAIN_SEGMENT:  # 0.17.0 accepts it in version-1 files too
        return DrainSegmentSpec(
            segment=spec.req_bytes(0, "segment"),
            l0_view_ids=vectors.ulids(spec, 1),
            sorted_runs=spec.u32s(2) or (),
        )
    t.buf.fail(f"unknown compaction spec type {kind}")


def _read_ctx(t: Table, vectors: _Vectors) -> TieredCompactionContext | None:
    kind, ctx = t.union(6, 7)
    if kind == CTX_NONE:
        return None
    if kind != CTX_TIERED:
        t.buf.fail(f"unknown compaction context type {kind}")
    if ctx is None:
        t.buf.fail("compaction context type set without a value")
    subs = ctx.tables(0) or []
    return TieredCompactionContext(
        subcompactions=tuple(
            Subcompaction(read_range(s.req_table(0, "range")), vectors.outputs(s, 1))
            for s in subs
        ),
        retention_min_seq=ctx.u64(1),
    )


# ------------------------------------------------------------------------------ encode
def encode_compactions(c: Compactions) -> bytes:
    """Encode byte-identically to 0.17.0, as version ``c.format_version`` (2 unless the value
    was decoded from a version-1 file).

    The native codec writes the file when it is built; whatever it refuses is encoded again
    by :func:`encode_compactions_py`, which raises the errors below.

    Raises:
        InvalidArgumentError: see :func:`encode_compactions_py`.
    """
    ext = manifest_native.ext
    if ext is not None:
        try:
            return ext.encode_compactions(c, _size_hint(c))
        except Exception:  # noqa: BLE001 - the reference below raises the documented error
            pass
    return encode_compactions_py(c)


def _size_hint(c: Compactions) -> int:
    """About the encoded size (the native builder starts with it; it grows when short)."""
    try:
        return 4096 + 256 * sum(len(x.output_ssts) + len(x.spec.l0_view_ids) // 4
                                for x in c.recent_compactions)
    except Exception:  # noqa: BLE001 - a malformed value: the encoders report it
        return 4096


def encode_compactions_py(c: Compactions) -> bytes:
    """:func:`encode_compactions` in pure Python (the reference of the native codec).

    Raises:
        InvalidArgumentError: a value is out of range, the version is not 1 or 2, or the
            state is not expressible in version 1 (a tiered destination other than the
            smallest input run id, else 0).
    """
    if c.format_version not in SUPPORTED_COMPACTIONS_VERSIONS:
        raise InvalidArgumentError(f"cannot write compactions format version {c.format_version}")
    check_uint(c.compactor_epoch, 64, "compactor_epoch")
    b = new_builder()
    items = [_add_compaction(b, x, c.format_version) for x in c.recent_compactions]
    vec = add_offset_vector(b, items)
    b.StartObject(2)
    b.PrependUint64Slot(0, c.compactor_epoch, 0)
    b.PrependUOffsetTRelativeSlot(1, vec, 0)
    return _VERSION.pack(c.format_version) + finish(b, b.EndObject())


def _add_outputs(b: flatbuffers.Builder, ssts: tuple[CompactedSsTable, ...]) -> int:
    return add_offset_vector(
        b, [add_compacted(b, s.id, s.info, s.visible_range, s.format_version) for s in ssts])


def _add_compaction(b: flatbuffers.Builder, c: Compaction, version: int) -> int:
    if c.status not in _STATUS.values():
        raise InvalidArgumentError(f"invalid compaction status {c.status!r}")
    cid = add_ulid(b, c.id)
    spec_type, spec = _add_spec(b, c.spec, version)
    worker = None
    if c.worker is not None:
        wid = add_string(b, c.worker.worker_id)
        b.StartObject(2)
        b.PrependUint64Slot(1, check_uint(c.worker.last_heartbeat_ms, 64, "last_heartbeat_ms"), 0)
        b.PrependUOffsetTRelativeSlot(0, wid, 0)
        worker = b.EndObject()
    ctx = None if c.ctx is None else _add_ctx(b, c.ctx)
    outputs = _add_outputs(b, c.output_ssts)
    b.StartObject(8)
    if ctx is not None:
        b.PrependUOffsetTRelativeSlot(7, ctx, 0)
    if worker is not None:
        b.PrependUOffsetTRelativeSlot(5, worker, 0)
    b.PrependUOffsetTRelativeSlot(4, outputs, 0)
    b.PrependUOffsetTRelativeSlot(2, spec, 0)
    b.PrependUOffsetTRelativeSlot(0, cid, 0)
    b.PrependUint8Slot(6, CTX_NONE if ctx is None else CTX_TIERED, 0)
    b.PrependInt8Slot(3, int(c.status), 0)
    b.PrependUint8Slot(1, spec_type, 0)
    return int(b.EndObject())


def _add_spec(b: flatbuffers.Builder, spec: CompactionSpec, version: int) -> tuple[int, int]:
    if isinstance(spec, TieredCompactionSpec):
        check_uint(spec.destination, 32, "destination")
        if version < 2 and spec.destination != min(spec.sorted_runs, default=0):
            raise InvalidArgumentError(
                "a version-1 compactions file cannot store a destination other than the "
                "smallest input run id")
        legacy = add_ulid_vector(b, spec.ssts) if spec.ssts else None
    elif isinstance(spec, DrainSegmentSpec):
        if spec.segment is None:
            raise InvalidArgumentError("a drain-segment compaction spec needs a segment")
        legacy = None
    else:
        raise InvalidArgumentError(f"unknown compaction spec {spec!r}")
    views = add_ulid_vector(b, spec.l0_view_ids) if spec.l0_view_ids else None
    runs = add_u32_vector(b, spec.sorted_runs, "sorted run id") if spec.sorted_runs else None
    segment = None if spec.segment is None else add_bytes(b, spec.segment)
    if isinstance(spec, DrainSegmentSpec):
        b.StartObject(3)
        if runs is not None:
            b.PrependUOffsetTRelativeSlot(2, runs, 0)
        if views is not None:
            b.PrependUOffsetTRelativeSlot(1, views, 0)
        b.PrependUOffsetTRelativeSlot(0, segment, 0)
        return SPEC_DRAIN_SEGMENT, int(b.EndObject())
    b.StartObject(5)
    if version >= 2:
        b.PrependUint32Slot(4, spec.destination, 0)
    if segment is not None:
        b.PrependUOffsetTRelativeSlot(3, segment, 0)
    if views is not None:
        b.PrependUOffsetTRelativeSlot(2, views, 0)
    if runs is not None:
        b.PrependUOffsetTRelativeSlot(1, runs, 0)
    if legacy is not None:
        b.PrependUOffsetTRelativeSlot(0, legacy, 0)
    return SPEC_TIERED, int(b.EndObject())


def _add_ctx(b: flatbuffers.Builder, ctx: TieredCompactionContext) -> int:
    subs = None
    if ctx.subcompactions:
        offsets = []
        for s in ctx.subcompactions:
            rng = add_range(b, s.range)
            outs = _add_outputs(b, s.output_ssts) if s.output_ssts else None
            b.StartObject(2)
            if outs is not None:
                b.PrependUOffsetTRelativeSlot(1, outs, 0)
            b.PrependUOffsetTRelativeSlot(0, rng, 0)
            offsets.append(b.EndObject())
        subs = add_offset_vector(b, offsets)
    b.StartObject(2)
    b.PrependUint64Slot(1, check_uint(ctx.retention_min_seq, 64, "retention_min_seq"), 0)
    if subs is not None:
        b.PrependUOffsetTRelativeSlot(0, subs, 0)
    return int(b.EndObject())


__all__ = [
    "COMPACTIONS_FORMAT_VERSION",
    "SUPPORTED_COMPACTIONS_VERSIONS",
    "decode_compactions",
    "decode_compactions_py",
    "encode_compactions",
    "encode_compactions_py",
]
