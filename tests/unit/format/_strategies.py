"""Hypothesis strategies for the format tests: manifests, SST infos, ranges, compactions."""

from __future__ import annotations

import dataclasses
import uuid

from hypothesis import strategies as st

from slatelib.core.compactions import (
    CompactedSsTable,
    Compaction,
    Compactions,
    CompactionStatus,
    DrainSegmentSpec,
    Subcompaction,
    TieredCompactionContext,
    TieredCompactionSpec,
    WorkerSpec,
)
from slatelib.core.manifest import (
    Checkpoint,
    CompressionCodec,
    ExternalDb,
    FilterFormat,
    Manifest,
    Segment,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstType,
    SstView,
)
from slatelib.core.ranges import Bound, BytesRange
from slatelib.format.manifest_parts import view_problem
from slatelib.format.shared_tables import range_non_empty
from slatelib.ids import Ulid

U64 = st.integers(0, 2**64 - 1)
U32 = st.integers(0, 2**32 - 1)
U16 = st.integers(0, 2**16 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
# small values are the interesting ones (0 is the omitted default)
u64s = st.one_of(st.just(0), st.integers(1, 1000), U64)
ulids = st.one_of(st.just(0), st.integers(1, 2**80), st.integers(0, 2**128 - 1)).map(Ulid)
uuids = st.integers(0, 2**128 - 1).map(lambda i: uuid.UUID(int=i))
keys = st.binary(max_size=10)
texts = st.text(max_size=12)

bounds = st.one_of(
    st.just(Bound.unbounded()), keys.map(Bound.included), keys.map(Bound.excluded)
)
# 0.17.0 refuses empty ranges, and a view's range must start Included or Unbounded
ranges = st.builds(BytesRange, bounds, bounds).filter(range_non_empty)
view_ranges = st.builds(
    BytesRange, st.one_of(st.just(Bound.unbounded()), keys.map(Bound.included)), bounds
).filter(range_non_empty)
infos = st.builds(
    SsTableInfo,
    first_entry=st.none() | keys,
    last_entry=st.none() | keys,
    index_offset=u64s,
    index_len=u64s,
    filter_offset=u64s,
    filter_len=u64s,
    compression=st.sampled_from(CompressionCodec),
    sst_type=st.sampled_from(SstType),
    stats_offset=u64s,
    stats_len=u64s,
    filter_format=st.sampled_from(FilterFormat),
)

def _viewable(info: SsTableInfo) -> SsTableInfo:
    """0.17.0 needs a first_entry, not after the last_entry, in an SST a view references."""
    first = info.first_entry if info.first_entry is not None else b""
    last = info.last_entry
    if last is not None and last < first:
        first, last = last, first
    return dataclasses.replace(info, first_entry=first, last_entry=last)


checkpoints = st.builds(
    Checkpoint,
    id=uuids,
    manifest_id=u64s,
    expire_time_s=st.none() | st.integers(1, 2**32 - 1),
    create_time_s=st.one_of(st.just(0), U32),
    writer_epoch=st.none() | u64s,
    name=st.none() | texts,
)
external_dbs = st.builds(
    ExternalDb,
    path=texts,
    source_checkpoint_id=uuids,
    final_checkpoint_id=st.none() | uuids,
    sst_ids=st.lists(ulids, max_size=3).map(tuple),
)
trackers = st.one_of(st.none(), st.binary(max_size=20))


@st.composite
def manifests(draw: st.DrawFn, *, v1: bool = False) -> Manifest:
    """Random manifests; ``v1=True`` restricts them to what a V1 manifest can express."""
    ids = sorted(draw(st.lists(ulids, unique=True, max_size=5)))
    handles = {i: SstHandle(i, _viewable(draw(infos)), draw(st.none() | U16)) for i in ids}

    def view(sst_id: Ulid) -> SstView:
        v = SstView(sst_id if v1 else draw(ulids), sst_id, draw(st.none() | view_ranges))
        if view_problem(v, handles) is not None:  # the range misses the SST's keys
            v = dataclasses.replace(v, visible_range=None)
        return v

    def views(max_size: int = 3) -> tuple[SstView, ...]:
        if not ids:
            return ()
        return tuple(view(i) for i in draw(st.lists(st.sampled_from(ids), max_size=max_size)))

    def runs() -> tuple[SortedRun, ...]:
        return tuple(SortedRun(draw(U32), views()) for _ in range(draw(st.integers(0, 2))))

    l0 = views()
    compacted = runs()
    segments: tuple[Segment, ...] | None = ()
    if not v1:
        if draw(st.booleans()):
            segments = None
        else:
            segments = tuple(
                Segment(draw(st.binary(max_size=4)), draw(st.none() | ulids), views(), runs())
                for _ in range(draw(st.integers(0, 2)))
            )
    used = {v.sst_id for v in l0} | {v.sst_id for r in compacted for v in r.views}
    if v1:
        ssts = tuple(handles[i] for i in sorted(used))
    else:
        ssts = tuple(handles.values())  # may include unreferenced SSTs: they round-trip too
    return Manifest(
        ssts=ssts,
        l0=l0,
        compacted=compacted,
        checkpoints=tuple(draw(st.lists(checkpoints, max_size=3))),
        external_dbs=tuple(draw(st.lists(external_dbs, max_size=2))),
        initialized=draw(st.booleans()),
        writer_epoch=draw(u64s),
        compactor_epoch=draw(u64s),
        replay_after_wal_id=draw(u64s),
        wal_id_last_seen=draw(u64s),
        last_compacted_l0_sst_view_id=draw(st.none() | ulids),
        last_l0_clock_tick=draw(st.one_of(st.just(-(2**63)), st.just(0), I64)),
        last_l0_seq=draw(u64s),
        recent_snapshot_min_seq=draw(u64s),
        sequence_tracker=draw(trackers),
        segments=segments,
        segment_extractor_name=None if v1 else draw(st.none() | texts),
        manifest_id_field=draw(u64s),
        wal_object_store_uri=draw(st.none() | texts) if v1 else None,
        destroyed_at_s=None if v1 else draw(st.none() | u64s),
    )


outputs = st.lists(
    st.builds(CompactedSsTable, id=ulids, info=infos, visible_range=st.none() | ranges,
              format_version=st.none() | U16),
    max_size=2,
).map(tuple)
tiered_specs = st.builds(
    TieredCompactionSpec,
    l0_view_ids=st.lists(ulids, max_size=3).map(tuple),
    sorted_runs=st.lists(U32, max_size=3).map(tuple),
    destination=st.one_of(st.just(0), U32),
    segment=st.none() | st.binary(max_size=4),
    ssts=st.lists(ulids, max_size=2).map(tuple),
)
drain_specs = st.builds(
    DrainSegmentSpec,
    segment=st.binary(min_size=1, max_size=4),
    l0_view_ids=st.lists(ulids, max_size=3).map(tuple),
    sorted_runs=st.lists(U32, max_size=3).map(tuple),
)
contexts = st.builds(
    TieredCompactionContext,
    subcompactions=st.lists(st.builds(Subcompaction, ranges, outputs), max_size=2).map(tuple),
    retention_min_seq=u64s,
)
compactions_v2 = st.builds(
    Compaction,
    id=ulids,
    spec=st.one_of(tiered_specs, drain_specs),
    status=st.sampled_from(CompactionStatus),
    output_ssts=outputs,
    worker=st.none() | st.builds(WorkerSpec, texts, u64s),
    ctx=st.none() | contexts,
)
compactions_files = st.builds(
    Compactions,
    compactor_epoch=u64s,
    recent_compactions=st.lists(compactions_v2, max_size=3).map(tuple),
)
