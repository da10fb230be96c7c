"""Manifest bytes <-> :class:`~slatelib.core.manifest.Manifest` (format §5).

A manifest file is ``u16 BE version | FlatBuffer``. 0.17.0 writes version 2 (``ManifestV2``)
and reads versions 1 and 2; so do we. :func:`encode_manifest` reproduces 0.17.0's bytes
exactly (format §5.7); :func:`encode_manifest_v1` exists for tests and tools that need V1
inputs.

Extension: ``Manifest.destroyed_at_s`` (soft destroy, design doc 'checkpoints and clones') is stored
in slot 18 of ``ManifestV2``, a slot 0.17.0's schema does not have; it is written only when set, so
every other manifest stays byte-identical to 0.17.0's, and 0.17.0 readers skip it
(docs/rfcs/0002-destroyed-at-slot.md).
"""

from __future__ import annotations

import struct
import threading
import weakref
from typing import Protocol

import flatbuffers

from slatelib.core.manifest import ExternalDb, Manifest, Segment, SortedRun, SstHandle, SstView
from slatelib.errors import CorruptObjectError, InvalidArgumentError, UnsupportedFormatVersionError
from slatelib.format import manifest_native
from slatelib.format.flatbuf import (
    Buffer,
    Table,
    add_bytes,
    add_offset_vector,
    add_string,
    check_uint,
    corrupt_on_error,
    finish,
    new_builder,
)
from slatelib.format.manifest_parts import (
    add_checkpoints,
    add_compacted,
    add_external_dbs,
    add_handle_v2,
    add_runs_v2,
    add_tracker,
    add_views,
    read_checkpoint,
    read_compacted,
    read_external_db,
    read_handle_v2,
    read_run_v2,
    read_views,
    view_problem,
)
from slatelib.format.shared_tables import (
    add_ulid,
    read_range,
    read_ulid,
    read_uuid,
)
from slatelib.ids import Ulid

MANIFEST_FORMAT_VERSION = 2
MANIFEST_V1_FORMAT_VERSION = 1
SUPPORTED_MANIFEST_VERSIONS = (1, 2)
DESTROYED_AT_SLOT = 18  # slatelib extension, see docs/rfcs/0002-destroyed-at-slot.md
_VERSION = struct.Struct(">H")


# ------------------------------------------------------------------------------ decode
def decode_manifest(data: bytes | bytearray | memoryview, *, path: str | None = None) -> Manifest:
    """Decode a manifest file (version 1 or 2).

    Version 2 goes through the native codec when it is built (see
    :mod:`slatelib.format.manifest_native`); anything it does not accept is decoded again by
    the reference code, which raises the errors below.

    Raises:
        CorruptObjectError: shorter than 2 bytes, truncated, malformed, a view references an
            SST missing from ``ssts``, or a bound contradicts its type (format §5.4).
        UnsupportedFormatVersionError: the version prefix is neither 1 nor 2.
    """
    if len(data) < 2:
        raise CorruptObjectError(f"manifest too short ({len(data)} bytes)", path=path)
    version = _VERSION.unpack_from(data, 0)[0]
    if version not in SUPPORTED_MANIFEST_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"{path + ': ' if path else ''}unsupported manifest format version {version} "
            f"(supported: {SUPPORTED_MANIFEST_VERSIONS})"
        )
    cacheable = type(data) is bytes
    if cacheable:
        hit = _RECENT.find(data)  # type: ignore[arg-type]
        if hit is not None:
            return hit
    m = None
    if version == 2 and manifest_native.ext is not None:
        try:
            m = _decode_v2(Buffer(data, start=2, path=path).root(),
                           _NativeTrees(manifest_native.ext))
        except Exception:  # noqa: BLE001 - the reference below raises the documented error
            m = None
    if m is None:
        m = decode_manifest_py(data, path=path)
    if cacheable:
        _RECENT.add(data, m)  # type: ignore[arg-type]
    return m


class _RecentDecodes:
    """The manifests decoded last, by their exact bytes (docs/rfcs/0010-manifest-codec.md).

    A manifest object's bytes never change, and one operation often reads the same version
    more than once (a clone reads its parent's latest manifest before and after pinning
    it, a writer re-reads it while it fences): decoding 100k SSTs again is tens of ms,
    comparing the bytes is one ``memcmp``. Manifests are immutable, so the same object is
    returned. An entry holds the bytes only while its manifest is alive elsewhere (a weak
    reference), so the cache never keeps a large manifest in memory by itself.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: list[list[object]] = []  # [bytes, weakref to Manifest]
        self._lock = threading.Lock()

    def find(self, data: bytes) -> Manifest | None:
        with self._lock:
            for entry in self._entries:
                raw, ref = entry
                if isinstance(raw, bytes) and len(raw) == len(data) and raw == data:
                    m = ref()  # type: ignore[operator]
                    if isinstance(m, Manifest):
                        return m
        return None

    def clear(self) -> None:
        with self._lock:
            self._entries = []

    def add(self, data: bytes, m: Manifest) -> None:
        entry: list[object] = [data, None]

        def forget(_: object) -> None:
            entry[0] = None  # the manifest died: let its bytes go too

        entry[1] = weakref.ref(m, forget)
        with self._lock:
            self._entries = [entry, *(e for e in self._entries if e[0] is not None)]
            del self._entries[self._size:]


_RECENT = _RecentDecodes(4)


def clear_caches() -> None:
    """Forget the manifests decoded last and the tree the native encoder kept (benchmarks
    use it to time the codec cold; nothing else needs it: both caches are exact)."""
    _RECENT.clear()
    if manifest_native.ext is not None:
        manifest_native.ext.forget_tree()


def decode_manifest_py(data: bytes | bytearray | memoryview, *,
                       path: str | None = None) -> Manifest:
    """:func:`decode_manifest` in pure Python (the reference of the native codec).

    Raises:
        CorruptObjectError: see :func:`decode_manifest`.
        UnsupportedFormatVersionError: see :func:`decode_manifest`.
    """
    if len(data) < 2:
        raise CorruptObjectError(f"manifest too short ({len(data)} bytes)", path=path)
    version = _VERSION.unpack_from(data, 0)[0]
    if version not in SUPPORTED_MANIFEST_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"{path + ': ' if path else ''}unsupported manifest format version {version} "
            f"(supported: {SUPPORTED_MANIFEST_VERSIONS})"
        )
    with corrupt_on_error("manifest", path):
        root = Buffer(data, start=2, path=path).root()
        return _decode_v2(root, _PY_TREES) if version == 2 else _decode_v1(root)


# ssts, l0, compacted, last_compacted_l0_sst_view_id, and the SST map of ssts
_Tree = tuple[tuple[SstHandle, ...], tuple[SstView, ...], tuple[SortedRun, ...], "Ulid | None",
              dict[Ulid, SstHandle]]


class _Trees(Protocol):
    """How the big vectors of a V2 manifest are read: the reference or the native code."""

    def reused(self, root: Table) -> _Tree | None: ...
    def handles(self, root: Table) -> tuple[tuple[SstHandle, ...], dict[Ulid, SstHandle]]: ...
    def views(self, t: Table, slot: int, name: str,
              known: dict[Ulid, SstHandle]) -> tuple[SstView, ...]: ...
    def runs(self, t: Table, slot: int, name: str,
             known: dict[Ulid, SstHandle]) -> tuple[SortedRun, ...]: ...
    def external_db(self, t: Table) -> ExternalDb: ...


class _PyTrees:
    def reused(self, root: Table) -> _Tree | None:
        return None

    def handles(self, root: Table) -> tuple[tuple[SstHandle, ...], dict[Ulid, SstHandle]]:
        ssts = tuple(read_handle_v2(t) for t in root.req_tables(8, "ssts"))
        return ssts, {h.id: h for h in ssts}

    def views(self, t: Table, slot: int, name: str,
              known: dict[Ulid, SstHandle]) -> tuple[SstView, ...]:
        return read_views(t.req_tables(slot, name), known)

    def runs(self, t: Table, slot: int, name: str,
             known: dict[Ulid, SstHandle]) -> tuple[SortedRun, ...]:
        return tuple(read_run_v2(r, known) for r in t.req_tables(slot, name))

    def external_db(self, t: Table) -> ExternalDb:
        return read_external_db(t)


_PY_TREES = _PyTrees()


class _NativeTrees:
    def __init__(self, ext: manifest_native.ManifestExt) -> None:
        self._ext = ext

    @staticmethod
    def _vector(t: Table, slot: int, name: str) -> tuple[int, int]:
        v = t.vector(slot, 4)
        return v if v is not None else t.missing(name)

    def reused(self, root: Table) -> _Tree | None:
        """The tree the native encoder wrote last, when ``root``'s buffer ends with it."""
        vectors = [root.vector(slot, 4) for slot in (8, 9, 10)]
        if any(v is None for v in vectors):
            return None
        last = root.table(7)
        buf = root.buf
        ssts, l0, runs = (v[0] - 4 for v in vectors if v is not None)
        return self._ext.reuse_tree(buf.data, ssts, l0, runs, 0 if last is None else last.pos)

    def handles(self, root: Table) -> tuple[tuple[SstHandle, ...], dict[Ulid, SstHandle]]:
        buf = root.buf
        return self._ext.read_handles(buf.data, buf.start, *self._vector(root, 8, "ssts"))

    @staticmethod
    def _view_cb(buf: Buffer, known: dict[Ulid, SstHandle]) -> manifest_native.ViewCallback:
        """Views with a visible range are built by the reference code."""

        def view(view_id: Ulid, sst_id: Ulid, range_pos: int) -> SstView:
            v = SstView(view_id, sst_id, read_range(buf.table_at(range_pos)))
            problem = view_problem(v, known)
            if problem is not None:
                buf.fail(problem)
            return v

        return view

    def views(self, t: Table, slot: int, name: str,
              known: dict[Ulid, SstHandle]) -> tuple[SstView, ...]:
        buf = t.buf
        return self._ext.read_views(buf.data, buf.start, *self._vector(t, slot, name), known,
                                    self._view_cb(buf, known))

    def runs(self, t: Table, slot: int, name: str,
             known: dict[Ulid, SstHandle]) -> tuple[SortedRun, ...]:
        buf = t.buf
        return self._ext.read_runs(buf.data, buf.start, *self._vector(t, slot, name), known,
                                   self._view_cb(buf, known))

    def external_db(self, t: Table) -> ExternalDb:
        """:func:`read_external_db` with the ``sst_ids`` (every inherited SST) read natively."""
        final = t.table(2)
        ids = self._ext.read_ulids(t.buf.data, t.buf.start, *self._vector(t, 3, "sst_ids"))
        return ExternalDb(
            path=t.req_string(0, "path"),
            source_checkpoint_id=read_uuid(t.req_table(1, "source_checkpoint_id")),
            final_checkpoint_id=None if final is None else read_uuid(final),
            sst_ids=ids,
        )


def _decode_v2(root: Table, trees: _Trees) -> Manifest:
    reused = trees.reused(root)
    if reused is None:
        ssts, known = trees.handles(root)
        last = root.table(7)
        last_id = None if last is None else read_ulid(last)
        segments = root.tables(16)
        external = root.tables(1)
        l0 = trees.views(root, 9, "l0", known)
        compacted = trees.runs(root, 10, "compacted", known)
    else:
        ssts, l0, compacted, last_id, known = reused
        segments = root.tables(16)
        external = root.tables(1)
    m = Manifest(
        ssts=ssts,
        l0=l0,
        compacted=compacted,
        checkpoints=tuple(read_checkpoint(t) for t in root.req_tables(12, "checkpoints")),
        external_dbs=() if external is None else tuple(trees.external_db(t) for t in external),
        initialized=root.boolean(2),
        writer_epoch=root.u64(3),
        compactor_epoch=root.u64(4),
        replay_after_wal_id=root.u64(5),
        wal_id_last_seen=root.u64(6),
        last_compacted_l0_sst_view_id=last_id,
        last_l0_clock_tick=root.i64(11),
        last_l0_seq=root.u64(13),
        recent_snapshot_min_seq=root.u64(14),
        sequence_tracker=root.bytes_(15),
        segments=None if segments is None else tuple(
            _read_segment(t, known, trees) for t in segments),
        segment_extractor_name=root.string(17),
        manifest_id_field=root.u64(0),
        destroyed_at_s=root.opt_u64(DESTROYED_AT_SLOT),
    )
    m.prime_sst_map(known)
    return m


def _read_segment(t: Table, known: dict[Ulid, SstHandle], trees: _Trees) -> Segment:
    last = t.table(1)
    return Segment(
        prefix=t.req_bytes(0, "prefix"),
        last_compacted_l0_sst_view_id=None if last is None else read_ulid(last),
        l0=trees.views(t, 2, "l0", known),
        compacted=trees.runs(t, 3, "compacted", known),
    )


def _decode_v1(root: Table) -> Manifest:
    """V1 -> model (format §5.3): each CompactedSsTable becomes a handle plus an identity view."""
    handles: dict[Ulid, SstHandle] = {}

    def view(t: Table) -> SstView:
        sst_id, info, rng, fmt = read_compacted(t)
        handle = handles.setdefault(sst_id, SstHandle(sst_id, info, fmt))
        v = SstView(sst_id, sst_id, rng)
        problem = view_problem(v, {sst_id: handle})
        if problem is not None:
            t.buf.fail(problem)
        return v

    l0 = tuple(view(t) for t in root.req_tables(8, "l0"))
    runs = tuple(
        SortedRun(r.u32(0), tuple(view(t) for t in r.req_tables(1, "ssts")))
        for r in root.req_tables(9, "compacted")
    )
    last = root.table(7)
    external = root.tables(1)
    return Manifest(
        ssts=tuple(handles[i] for i in sorted(handles)),
        l0=l0,
        compacted=runs,
        checkpoints=tuple(read_checkpoint(t) for t in root.req_tables(11, "checkpoints")),
        external_dbs=() if external is None else tuple(read_external_db(t) for t in external),
        initialized=root.boolean(2),
        writer_epoch=root.u64(3),
        compactor_epoch=root.u64(4),
        replay_after_wal_id=root.u64(5),
        wal_id_last_seen=root.u64(6),
        last_compacted_l0_sst_view_id=None if last is None else read_ulid(last),
        last_l0_clock_tick=root.i64(10),
        last_l0_seq=root.u64(12),
        recent_snapshot_min_seq=root.u64(14),
        sequence_tracker=root.bytes_(15),
        segments=(),
        segment_extractor_name=None,
        manifest_id_field=root.u64(0),
        wal_object_store_uri=root.string(13),
    )


# ------------------------------------------------------------------------------ encode
def _check_scalars(m: Manifest) -> None:
    for name in ("writer_epoch", "compactor_epoch", "replay_after_wal_id", "wal_id_last_seen",
                 "last_l0_seq", "recent_snapshot_min_seq", "manifest_id_field"):
        check_uint(getattr(m, name), 64, name)
    if not -(1 << 63) <= m.last_l0_clock_tick < (1 << 63):
        raise InvalidArgumentError(f"last_l0_clock_tick must fit in i64: {m.last_l0_clock_tick}")
    if m.destroyed_at_s is not None:
        check_uint(m.destroyed_at_s, 64, "destroyed_at_s")


def _check_views(m: Manifest) -> None:
    known = m.sst_map
    for v in m.all_views():
        problem = view_problem(v, known)
        if problem is not None:
            raise InvalidArgumentError(f"0.17.0 cannot read this manifest: {problem}")


def _add_tree(b: flatbuffers.Builder, l0: tuple[SstView, ...], last: Ulid | None,
              runs: tuple[SortedRun, ...]) -> tuple[int, int | None, int]:
    """l0 views and vector, last-compacted Ulid, runs and vector (format §5.7 (2))."""
    l0_off = add_views(b, l0)
    last_off = None if last is None else add_ulid(b, last)
    return l0_off, last_off, add_runs_v2(b, runs)


def _add_segment(b: flatbuffers.Builder, s: Segment) -> int:
    prefix = add_bytes(b, s.prefix)
    l0, last, runs = _add_tree(b, s.l0, s.last_compacted_l0_sst_view_id, s.compacted)
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(3, runs, 0)
    b.PrependUOffsetTRelativeSlot(2, l0, 0)
    if last is not None:
        b.PrependUOffsetTRelativeSlot(1, last, 0)
    b.PrependUOffsetTRelativeSlot(0, prefix, 0)
    return int(b.EndObject())


def encode_manifest(m: Manifest) -> bytes:
    """Encode as a version-2 manifest, byte-identical to 0.17.0 (format §5.7).

    ``wal_object_store_uri`` has no V2 field and is dropped, as 0.17.0 does.
    ``destroyed_at_s`` goes to the extension slot 18 when set. The native codec writes the
    file when it is built (see :mod:`slatelib.format.manifest_native`); whatever it refuses
    is encoded again by the reference code, which raises the errors below.

    Raises:
        InvalidArgumentError: a value is out of range for its field, or a view references
            an SST missing from ``ssts``.
    """
    ext = manifest_native.ext
    if ext is not None:
        try:
            return ext.encode_v2(m, view_problem, 256 * len(m.ssts) + 4096)
        except Exception:  # noqa: BLE001 - the reference below raises the documented error
            pass
    return encode_manifest_py(m)


def encode_manifest_py(m: Manifest) -> bytes:
    """:func:`encode_manifest` in pure Python (the reference of the native codec).

    Raises:
        InvalidArgumentError: see :func:`encode_manifest`.
    """
    _check_scalars(m)
    _check_views(m)
    b = new_builder()
    ssts = add_offset_vector(b, [add_handle_v2(b, h) for h in m.ssts])
    l0, last, runs = _add_tree(b, m.l0, m.last_compacted_l0_sst_view_id, m.compacted)
    segments = None
    if m.segments is not None:
        segments = add_offset_vector(b, [_add_segment(b, s) for s in m.segments])
    extractor = None if m.segment_extractor_name is None else add_string(b, m.segment_extractor_name)
    checkpoints = add_checkpoints(b, m.checkpoints)
    external = add_external_dbs(b, m.external_dbs) if m.external_dbs else None
    tracker = add_tracker(b, m.sequence_tracker)
    b.StartObject(DESTROYED_AT_SLOT + 1)
    if m.destroyed_at_s is not None:
        b.PrependUint64Slot(DESTROYED_AT_SLOT, m.destroyed_at_s, None)
    _add_scalars(b, m, clock_slot=11, seq_slot=13)
    if extractor is not None:
        b.PrependUOffsetTRelativeSlot(17, extractor, 0)
    if segments is not None:
        b.PrependUOffsetTRelativeSlot(16, segments, 0)
    if tracker is not None:
        b.PrependUOffsetTRelativeSlot(15, tracker, 0)
    b.PrependUOffsetTRelativeSlot(12, checkpoints, 0)
    b.PrependUOffsetTRelativeSlot(10, runs, 0)
    b.PrependUOffsetTRelativeSlot(9, l0, 0)
    b.PrependUOffsetTRelativeSlot(8, ssts, 0)
    if last is not None:
        b.PrependUOffsetTRelativeSlot(7, last, 0)
    if external is not None:
        b.PrependUOffsetTRelativeSlot(1, external, 0)
    b.PrependBoolSlot(2, bool(m.initialized), False)
    return _VERSION.pack(MANIFEST_FORMAT_VERSION) + finish(b, b.EndObject())


def _add_scalars(b: flatbuffers.Builder, m: Manifest, *, clock_slot: int, seq_slot: int) -> None:
    """The u64/i64 fields common to V1 and V2, in their canonical order."""
    b.PrependUint64Slot(14, m.recent_snapshot_min_seq, 0)
    b.PrependUint64Slot(seq_slot, m.last_l0_seq, 0)
    b.PrependInt64Slot(clock_slot, m.last_l0_clock_tick, 0)
    b.PrependUint64Slot(6, m.wal_id_last_seen, 0)
    b.PrependUint64Slot(5, m.replay_after_wal_id, 0)
    b.PrependUint64Slot(4, m.compactor_epoch, 0)
    b.PrependUint64Slot(3, m.writer_epoch, 0)
    b.PrependUint64Slot(0, m.manifest_id_field, 0)


def _check_v1(m: Manifest) -> None:
    if m.segments or m.segment_extractor_name is not None:
        raise InvalidArgumentError("a manifest with segments cannot be written as V1")
    if m.destroyed_at_s is not None:
        raise InvalidArgumentError("destroyed_at_s cannot be written in a V1 manifest")
    views = [*m.l0, *(v for run in m.compacted for v in run.views)]
    for v in views:
        if v.id != v.sst_id:
            raise InvalidArgumentError(f"V1 manifests have identity views only (view {v.id})")
    if tuple(h.id for h in m.ssts) != tuple(sorted({v.sst_id for v in views})):
        raise InvalidArgumentError("V1 manifests list exactly the SSTs of their views, by id")


def encode_manifest_v1(m: Manifest) -> bytes:
    """Encode as a version-1 manifest (for tests and tools: 0.17.0 reads V1, never writes it).

    Each view becomes a ``CompactedSsTable`` carrying its SST's info and the view's
    ``visible_range``; ``last_compacted_l0_sst_view_id`` becomes ``l0_last_compacted``.

    Raises:
        InvalidArgumentError: the manifest is not expressible in V1 (segments, an extractor
            name, ``destroyed_at_s``, a non-identity view, ``ssts`` other than exactly the
            referenced SSTs sorted by id), or a value is out of range.
    """
    _check_scalars(m)
    _check_views(m)
    _check_v1(m)
    b = new_builder()
    known = m.sst_map

    def entry(v: SstView) -> int:
        h = known[v.sst_id]
        return add_compacted(b, h.id, h.info, v.visible_range, h.format_version)

    l0 = add_offset_vector(b, [entry(v) for v in m.l0])
    last = None if m.last_compacted_l0_sst_view_id is None else add_ulid(
        b, m.last_compacted_l0_sst_view_id)
    run_offsets = []
    for run in m.compacted:
        ssts = add_offset_vector(b, [entry(v) for v in run.views])
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(1, ssts, 0)
        b.PrependUint32Slot(0, check_uint(run.id, 32, "sorted run id"), 0)
        run_offsets.append(b.EndObject())
    runs = add_offset_vector(b, run_offsets)
    checkpoints = add_checkpoints(b, m.checkpoints)
    external = add_external_dbs(b, m.external_dbs) if m.external_dbs else None
    uri = None if m.wal_object_store_uri is None else add_string(b, m.wal_object_store_uri)
    tracker = add_tracker(b, m.sequence_tracker)
    b.StartObject(16)
    _add_scalars(b, m, clock_slot=10, seq_slot=12)
    if tracker is not None:
        b.PrependUOffsetTRelativeSlot(15, tracker, 0)
    if uri is not None:
        b.PrependUOffsetTRelativeSlot(13, uri, 0)
    b.PrependUOffsetTRelativeSlot(11, checkpoints, 0)
    b.PrependUOffsetTRelativeSlot(9, runs, 0)
    b.PrependUOffsetTRelativeSlot(8, l0, 0)
    if last is not None:
        b.PrependUOffsetTRelativeSlot(7, last, 0)
    if external is not None:
        b.PrependUOffsetTRelativeSlot(1, external, 0)
    b.PrependBoolSlot(2, bool(m.initialized), False)
    return _VERSION.pack(MANIFEST_V1_FORMAT_VERSION) + finish(b, b.EndObject())
