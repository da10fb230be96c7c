"""Tables shared by manifest V1/V2 and compactions files (format §5.4): read and write.

Split out of :mod:`slatelib.format.manifest_codec` to keep modules small. Every ``add_*``
function creates its children first and then the table, in the canonical order of format §5.7;
every ``read_*`` function raises :class:`CorruptObjectError` on malformed input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import flatbuffers

from slatelib.core.manifest import (
    Checkpoint,
    ExternalDb,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstView,
)
from slatelib.core.ranges import UNBOUNDED, Bound, BoundKind, BytesRange
from slatelib.errors import InvalidArgumentError
from slatelib.format.flatbuf import (
    Table,
    add_bytes,
    add_offset_vector,
    add_string,
    check_uint,
)
from slatelib.format.shared_tables import (
    add_range,
    add_ulid,
    add_ulid_vector,
    add_uuid,
    range_non_empty,
    read_range,
    read_ulid,
    read_uuid,
)
from slatelib.format.sst_info import add_sst_info, read_sst_info
from slatelib.ids import Ulid

CHECKPOINT_METADATA_NONE = 0
CHECKPOINT_METADATA_WRITER = 1

CompactedParts = tuple[Ulid, SsTableInfo, BytesRange | None, int | None]


# ------------------------------------------------------------------------- SST entries
def read_handle_v2(t: Table) -> SstHandle:
    """``CompactedSsTableV2 {id (0, req), info (1, req), format_version (2, optional u16)}``.

    Raises:
        CorruptObjectError: malformed or missing required fields.
    """
    return SstHandle(
        read_ulid(t.req_table(0, "id")),
        read_sst_info(t.req_table(1, "info")),
        t.opt_u16(2),
    )


def add_handle_v2(b: flatbuffers.Builder, h: SstHandle) -> int:
    """id Ulid, SsTableInfo, then the table: info (1), id (0), format_version (2).

    Raises:
        InvalidArgumentError: a field is out of range.
    """
    sid = add_ulid(b, h.id)
    info = add_sst_info(b, h.info)
    b.StartObject(3)
    b.PrependUOffsetTRelativeSlot(1, info, 0)
    b.PrependUOffsetTRelativeSlot(0, sid, 0)
    if h.format_version is not None:
        b.PrependUint16Slot(2, check_uint(h.format_version, 16, "format_version"), None)
    return int(b.EndObject())


def read_compacted(t: Table) -> CompactedParts:
    """``CompactedSsTable {id (0, req), info (1, req), visible_range (2), format_version (3)}``.

    Raises:
        CorruptObjectError: malformed or missing required fields.
    """
    rng = t.table(2)
    return (
        read_ulid(t.req_table(0, "id")),
        read_sst_info(t.req_table(1, "info")),
        None if rng is None else read_range(rng),
        t.opt_u16(3),
    )


def add_compacted(b: flatbuffers.Builder, sst_id: int, info: SsTableInfo,
                  visible_range: BytesRange | None, format_version: int | None) -> int:
    """id Ulid, SsTableInfo, visible_range (if any), then the table:
    visible_range (2), info (1), id (0), format_version (3).

    Raises:
        InvalidArgumentError: a field is out of range.
    """
    sid = add_ulid(b, sst_id)
    inf = add_sst_info(b, info)
    rng = None if visible_range is None else add_range(b, visible_range)
    b.StartObject(4)
    if rng is not None:
        b.PrependUOffsetTRelativeSlot(2, rng, 0)
    b.PrependUOffsetTRelativeSlot(1, inf, 0)
    b.PrependUOffsetTRelativeSlot(0, sid, 0)
    if format_version is not None:
        b.PrependUint16Slot(3, check_uint(format_version, 16, "format_version"), None)
    return int(b.EndObject())


# ----------------------------------------------------------------------- views and runs
def view_problem(v: SstView, known: Mapping[Ulid, SstHandle]) -> str | None:
    """Why 0.17.0 would refuse this view (it panics building it), or None when it is valid.

    0.17.0 requires: the SST is listed in ``ssts``; its info has a ``first_entry`` not after
    its ``last_entry``; a visible range starts Included or Unbounded and overlaps the SST's
    physical range ``[first_entry, last_entry]``.
    """
    h = known.get(v.sst_id)
    if h is None:
        return f"view {v.id} references unknown SST id {v.sst_id}"
    first, last = h.info.first_entry, h.info.last_entry
    if first is None:
        return f"SST {v.sst_id} of view {v.id} has no first_entry"
    physical = BytesRange(Bound.included(first),
                          UNBOUNDED if last is None else Bound.included(last))
    if not range_non_empty(physical):
        return f"SST {v.sst_id} has first_entry after last_entry"
    r = v.visible_range
    if r is None:
        return None
    if not range_non_empty(r):
        return f"view {v.id} has an empty visible range {r}"
    if r.start.kind == BoundKind.EXCLUDED:
        return f"view {v.id} has a visible range with an excluded start bound"
    if not range_non_empty(physical.intersect(r)):
        return f"visible range {r} of view {v.id} does not overlap its SST"
    return None


def read_view(t: Table, known: Mapping[Ulid, SstHandle]) -> SstView:
    """``CompactedSsTableView {id (0, req), sst_id (1, req), visible_range (2)}``.

    Raises:
        CorruptObjectError: malformed, or a view 0.17.0 refuses (see :func:`view_problem`),
            e.g. its ``sst_id`` is not in the manifest's ``ssts``.
    """
    sst_id = read_ulid(t.req_table(1, "sst_id"))
    rng = t.table(2)
    view = SstView(read_ulid(t.req_table(0, "id")), sst_id,
                   None if rng is None else read_range(rng))
    problem = view_problem(view, known)
    if problem is not None:
        t.buf.fail(problem)
    return view


def read_views(tables: list[Table], known: Mapping[Ulid, SstHandle]) -> tuple[SstView, ...]:
    """A vector of views.

    Raises:
        CorruptObjectError: see :func:`read_view`.
    """
    return tuple(read_view(t, known) for t in tables)


def read_run_v2(t: Table, known: Mapping[Ulid, SstHandle]) -> SortedRun:
    """``SortedRunV2 {id (0, u32), ssts (1, req)}``.

    Raises:
        CorruptObjectError: see :func:`read_view`.
    """
    return SortedRun(t.u32(0), read_views(t.req_tables(1, "ssts"), known))


def add_view(b: flatbuffers.Builder, v: SstView) -> int:
    """sst_id Ulid, visible_range (if any), view id Ulid, then the table:
    visible_range (2), sst_id (1), id (0).

    Raises:
        InvalidArgumentError: an id or bound cannot be encoded.
    """
    sst_id = add_ulid(b, v.sst_id)
    rng = None if v.visible_range is None else add_range(b, v.visible_range)
    vid = add_ulid(b, v.id)
    b.StartObject(3)
    if rng is not None:
        b.PrependUOffsetTRelativeSlot(2, rng, 0)
    b.PrependUOffsetTRelativeSlot(1, sst_id, 0)
    b.PrependUOffsetTRelativeSlot(0, vid, 0)
    return int(b.EndObject())


def add_views(b: flatbuffers.Builder, views: Sequence[SstView]) -> int:
    """Each view, then the vector.

    Raises:
        InvalidArgumentError: see :func:`add_view`.
    """
    return add_offset_vector(b, [add_view(b, v) for v in views])


def add_runs_v2(b: flatbuffers.Builder, runs: Sequence[SortedRun]) -> int:
    """For each run: its views, their vector, the run (ssts (1), id (0)); then the vector.

    Raises:
        InvalidArgumentError: see :func:`add_view`, or a run id does not fit in u32.
    """
    offsets = []
    for run in runs:
        views = add_views(b, run.views)
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(1, views, 0)
        b.PrependUint32Slot(0, check_uint(run.id, 32, "sorted run id"), 0)
        offsets.append(b.EndObject())
    return add_offset_vector(b, offsets)


# ------------------------------------------------------------------------- checkpoints
def read_checkpoint(t: Table) -> Checkpoint:
    """``Checkpoint`` (format §5.4); ``WriterCheckpoint`` metadata becomes ``writer_epoch``.

    Raises:
        CorruptObjectError: malformed, missing id, or an invalid metadata union.
    """
    kind, meta = t.union(4, 5)
    writer_epoch = None
    if kind == CHECKPOINT_METADATA_WRITER:
        if meta is None:
            t.buf.fail("checkpoint metadata type WriterCheckpoint without a value")
        writer_epoch = meta.u64(0)
    elif kind != CHECKPOINT_METADATA_NONE:
        t.buf.fail(f"unknown checkpoint metadata type {kind}")
    expire = t.u32(2)
    return Checkpoint(
        id=read_uuid(t.req_table(0, "id")),
        manifest_id=t.u64(1),
        expire_time_s=expire or None,
        create_time_s=t.u32(3),
        writer_epoch=writer_epoch,
        name=t.string(6),
    )


def add_checkpoint(b: flatbuffers.Builder, c: Checkpoint) -> int:
    """id Uuid, name (if any), WriterCheckpoint (if any), then the table: manifest_id (1),
    name (6), metadata (5), create_time (3), expire_time (2), id (0), metadata_type (4).

    Raises:
        InvalidArgumentError: a field is out of range (times are u32 seconds; 0 expiry is
            not allowed because it means "never", which is spelled None).
    """
    if c.expire_time_s is not None and not 0 < c.expire_time_s <= 0xFFFFFFFF:
        raise InvalidArgumentError(f"checkpoint expire time must be 1..u32, got {c.expire_time_s}")
    check_uint(c.create_time_s, 32, "checkpoint create time")
    check_uint(c.manifest_id, 64, "checkpoint manifest_id")
    cid = add_uuid(b, c.id)
    name = None if c.name is None else add_string(b, c.name)
    meta = None
    if c.writer_epoch is not None:
        b.StartObject(1)
        b.PrependUint64Slot(0, check_uint(c.writer_epoch, 64, "writer epoch"), 0)
        meta = b.EndObject()
    b.StartObject(7)
    b.PrependUint64Slot(1, c.manifest_id, 0)
    if name is not None:
        b.PrependUOffsetTRelativeSlot(6, name, 0)
    if meta is not None:
        b.PrependUOffsetTRelativeSlot(5, meta, 0)
    b.PrependUint32Slot(3, c.create_time_s, 0)
    b.PrependUint32Slot(2, c.expire_time_s or 0, 0)
    b.PrependUOffsetTRelativeSlot(0, cid, 0)
    b.PrependUint8Slot(4, CHECKPOINT_METADATA_NONE if meta is None else CHECKPOINT_METADATA_WRITER, 0)
    return int(b.EndObject())


def add_checkpoints(b: flatbuffers.Builder, checkpoints: Sequence[Checkpoint]) -> int:
    """Each checkpoint, then the vector.

    Raises:
        InvalidArgumentError: see :func:`add_checkpoint`.
    """
    return add_offset_vector(b, [add_checkpoint(b, c) for c in checkpoints])


# ------------------------------------------------------------------------ external DBs
def read_external_db(t: Table) -> ExternalDb:
    """``ExternalDb {path (0, req), source_checkpoint_id (1, req), final_checkpoint_id (2),
    sst_ids (3, req)}``.

    Raises:
        CorruptObjectError: malformed or missing required fields.
    """
    final = t.table(2)
    ids = [read_ulid(x) for x in t.req_tables(3, "sst_ids")]
    return ExternalDb(
        path=t.req_string(0, "path"),
        source_checkpoint_id=read_uuid(t.req_table(1, "source_checkpoint_id")),
        final_checkpoint_id=None if final is None else read_uuid(final),
        sst_ids=tuple(ids),
    )


def add_external_dbs(b: flatbuffers.Builder, dbs: Sequence[ExternalDb]) -> int:
    """For each: path, source Uuid, final Uuid (if any), sst id Ulids and their vector, the
    table (sst_ids (3), final (2), source (1), path (0)); then the vector.

    Raises:
        InvalidArgumentError: a field cannot be encoded.
    """
    offsets = []
    for db in dbs:
        path = add_string(b, db.path)
        source = add_uuid(b, db.source_checkpoint_id)
        final = None if db.final_checkpoint_id is None else add_uuid(b, db.final_checkpoint_id)
        ids = add_ulid_vector(b, db.sst_ids)
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(3, ids, 0)
        if final is not None:
            b.PrependUOffsetTRelativeSlot(2, final, 0)
        b.PrependUOffsetTRelativeSlot(1, source, 0)
        b.PrependUOffsetTRelativeSlot(0, path, 0)
        offsets.append(b.EndObject())
    return add_offset_vector(b, offsets)


def add_tracker(b: flatbuffers.Builder, tracker: bytes | None) -> int | None:
    """The sequence tracker byte vector, or None when absent."""
    return None if tracker is None else add_bytes(b, tracker)
