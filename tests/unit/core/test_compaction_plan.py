"""Compaction planning: policies, 0.17's size-tiered scheduler, explicit sources, run ids.

Manifests are built in memory; an SST's size (0.17's estimate: ``index_offset +
index_len``) is set directly.
"""

from __future__ import annotations

import uuid

import pytest

from slatelib.core.compaction_apply import (
    SourcesChangedError,
    apply_compaction,
    apply_compactions,
    insert_run,
    is_committed,
)
from slatelib.core.compaction_plan import (
    PlanOptions,
    Policy,
    fresh_run_id,
    order_sources,
    plan_compaction,
    plan_compactions,
)
from slatelib.core.compaction_source import SourceId, estimate_view_size
from slatelib.core.compactions import (
    Compaction,
    Compactions,
    CompactionStatus,
    TieredCompactionSpec,
    WorkerSpec,
)
from slatelib.core.manifest import (
    Checkpoint,
    ExternalDb,
    Manifest,
    Segment,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstView,
)
from slatelib.core.ranges import BytesRange
from slatelib.core.size_tiered import SizeTieredOptions, f32, scaled_u64
from slatelib.errors import (
    FencedError,
    InvalidArgumentError,
    InvalidDbStateError,
)
from slatelib.ids import Ulid

_next = [1000]


def _handle(size: int = 100, first: bytes = b"a", last: bytes = b"z") -> SstHandle:
    _next[0] += 1
    info = SsTableInfo(first_entry=first, last_entry=last, index_offset=size - 10,
                       index_len=10, filter_offset=size - 10, filter_len=0)
    return SstHandle(Ulid(_next[0] << 80), info)


def db(l0_sizes: list[int] = (), runs: list[tuple[int, list[int]]] = (),
       **fields: object) -> Manifest:
    """A manifest with L0 SSTs (newest first) and runs ``(id, [sst sizes])`` (desc id)."""
    handles = []
    l0 = []
    for size in l0_sizes:
        h = _handle(size)
        handles.append(h)
        l0.append(SstView.identity(h.id))
    compacted = []
    for run_id, sizes in runs:
        views = []
        for i, size in enumerate(sizes):
            h = _handle(size, bytes([97 + i]), bytes([97 + i]) + b"z")
            handles.append(h)
            views.append(SstView.identity(h.id))
        compacted.append(SortedRun(run_id, tuple(views)))
    m = Manifest().with_trees(l0=l0, compacted=compacted, new_ssts=handles)
    from dataclasses import replace

    return replace(m, recent_snapshot_min_seq=42, last_l0_clock_tick=777, **fields)


def plan(m: Manifest, policy: Policy | str, active: list[Compaction] = (),
         **opts: object) -> tuple[list[str], int, bool] | None:
    options = PlanOptions(Policy(policy), SizeTieredOptions(**opts))  # type: ignore[arg-type]
    spec = plan_compaction(m, Compactions(1, tuple(active)), options)
    return None if spec is None else ([str(s) for s in spec.sources], spec.destination,
                                      spec.bottom)


# -------------------------------------------------------------------------- l0 and full
def test_l0_policy_takes_every_l0_view_into_a_fresh_run_above_every_run() -> None:
    m = db([10, 10, 10], runs=[(4, [50]), (1, [80])])
    srcs, dst, bottom = plan(m, "l0")
    assert srcs == [str(SourceId.l0(v.id)) for v in m.l0]
    assert (dst, bottom) == (5, False)


def test_l0_policy_without_runs_writes_the_bottom_run_zero() -> None:
    assert plan(db([10, 10]), "l0")[1:] == (0, True)


def test_l0_policy_has_nothing_to_do_without_l0() -> None:
    assert plan(db(runs=[(0, [10])]), "l0") is None


def test_fresh_run_id_skips_in_flight_destinations() -> None:
    m = db([10], runs=[(3, [5])])
    busy = Compaction(Ulid(1), TieredCompactionSpec(destination=9))
    assert fresh_run_id(m, [busy]) == 10
    assert plan(m, "l0", [busy])[1] == 10


def test_full_policy_merges_everything_into_the_lowest_run() -> None:
    m = db([10, 10], runs=[(7, [50]), (2, [80, 80])])
    srcs, dst, bottom = plan(m, "full")
    assert len(srcs) == 4 and srcs[-2:] == ["sr:7", "sr:2"]
    assert (dst, bottom) == (2, True)


def test_full_policy_of_a_single_run_rewrites_it_in_place() -> None:
    assert plan(db(runs=[(3, [10])]), "full") == (["sr:3"], 3, True)


def test_spec_carries_the_retention_parameters_of_the_manifest() -> None:
    spec = plan_compaction(db([10]), None, PlanOptions(Policy.L0))
    assert (spec.retention_min_seq, spec.clock_tick) == (42, 777)


# ------------------------------------------------------------------------- size-tiered
def test_size_tiered_waits_for_min_compaction_sources_l0_views() -> None:
    assert plan(db([10, 10, 10]), "size-tiered") is None
    assert plan(db([10, 10, 10, 10]), "size-tiered")[1:] == (0, True)


def test_size_tiered_keeps_the_oldest_l0_views_beyond_max_sources() -> None:
    m = db([10] * 10)
    srcs, dst, _ = plan(m, "size-tiered", max_compaction_sources=8)
    assert srcs == [str(SourceId.l0(v.id)) for v in m.l0[2:]]


def test_size_tiered_merges_similar_sized_runs_into_the_last_of_them() -> None:
    m = db(runs=[(9, [10]), (8, [12]), (7, [15]), (6, [30]), (5, [1000])])
    assert plan(m, "size-tiered") == (["sr:9", "sr:8", "sr:7", "sr:6"], 6, False)


def test_size_tiered_stops_a_series_at_a_run_too_large_for_the_threshold() -> None:
    m = db(runs=[(9, [10]), (8, [10]), (7, [10]), (6, [41]), (5, [10])])
    assert plan(m, "size-tiered") is None  # 41 > 4 * 10 breaks the series at 3 runs
    assert plan(m, "size-tiered", include_size_threshold=4.1)[0][:4] == \
        ["sr:9", "sr:8", "sr:7", "sr:6"]


def test_size_tiered_applies_backpressure_when_the_next_run_already_heads_a_full_series() -> None:
    # L0 output (40) could be merged with run 9, which already starts 4 similar runs
    m = db([10, 10, 10, 10], runs=[(9, [40]), (8, [40]), (7, [40]), (6, [40])])
    got = plan(m, "size-tiered", max_compaction_sources=4)
    assert got == (["sr:9", "sr:8", "sr:7", "sr:6"], 6, True)


def test_size_tiered_avoids_sources_of_in_flight_compactions() -> None:
    m = db([10, 10, 10, 10])
    busy = Compaction(Ulid(1), TieredCompactionSpec(l0_view_ids=(m.l0[3].id,), destination=3))
    assert plan(m, "size-tiered", [busy]) is None


def test_size_tiered_consolidation_fallback_merges_runs_beyond_the_threshold() -> None:
    m = db(runs=[(9, [10]), (8, [1000]), (7, [10**6])])
    assert plan(m, "size-tiered") is None
    got = plan(m, "size-tiered", sorted_run_consolidation_threshold=2)
    assert got == (["sr:9", "sr:8"], 8, False)
    # 0.17: "must be 0 or at least 2" -- a threshold of 1 disables the fallback
    assert plan(m, "size-tiered", sorted_run_consolidation_threshold=1) is None


def test_f32_arithmetic_matches_rust_truncation() -> None:
    assert f32(0.1) != 0.1
    assert scaled_u64(3, 4.0) == 12
    assert scaled_u64(16777217, 1.0) == 16777216  # not representable in f32


@pytest.mark.parametrize("kwargs", [{"min_compaction_sources": 0},
                                    {"max_compaction_sources": 0},
                                    {"include_size_threshold": 0.0}])
def test_size_tiered_rejects_invalid_options(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidArgumentError):
        SizeTieredOptions(**kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- explicit sources
def test_explicit_sources_are_put_in_logical_order_with_destination_lowest_run() -> None:
    m = db([10, 10], runs=[(5, [10]), (3, [10])])
    given = [SourceId.run(5), SourceId.l0(m.l0[1].id), SourceId.l0(m.l0[0].id)]
    spec = plan_compaction(m, None, PlanOptions(Policy.SOURCES, sources=tuple(given)))
    assert [str(s) for s in spec.sources] == [str(SourceId.l0(m.l0[0].id)),
                                              str(SourceId.l0(m.l0[1].id)), "sr:5"]
    assert (spec.destination, spec.bottom) == (5, False)


def test_explicit_sources_must_be_consecutive() -> None:
    m = db([10], runs=[(5, [10]), (4, [10]), (3, [10])])
    with pytest.raises(InvalidArgumentError, match="consecutive"):
        order_sources(m, [SourceId.run(5), SourceId.run(3)])


def test_explicit_l0_sources_must_include_the_oldest_l0_view() -> None:
    m = db([10, 10, 10])
    with pytest.raises(InvalidArgumentError, match="oldest L0"):
        order_sources(m, [SourceId.l0(m.l0[0].id), SourceId.l0(m.l0[1].id)])
    assert order_sources(m, [SourceId.l0(m.l0[2].id)]) == (SourceId.l0(m.l0[2].id),)


@pytest.mark.parametrize("sources", [[], ["sr:9"], ["sr:5", "sr:5"]])
def test_explicit_sources_must_exist_once(sources: list[str]) -> None:
    m = db(runs=[(5, [10])])
    with pytest.raises(InvalidArgumentError):
        order_sources(m, [SourceId.parse(s) for s in sources])


def test_source_ids_parse_and_print() -> None:
    s = SourceId.parse("l0:01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert str(s) == "l0:01ARZ3NDEKTSV4RRFFQ69G5FAV" and s.is_l0
    assert SourceId.parse(" run:7 ") == SourceId.run(7)
    for bad in ("x:1", "sr:-1", "l0:nope", "sr"):
        with pytest.raises(InvalidArgumentError):
            SourceId.parse(bad)


def test_policy_names_parse() -> None:
    assert Policy.parse("size_tiered") == Policy.SIZE_TIERED
    with pytest.raises(InvalidArgumentError, match="unknown compaction policy"):
        Policy.parse("leveled")


# ------------------------------------------------------------------- refused databases
@pytest.mark.parametrize("fields", [{"initialized": False}, {"destroyed_at_s": 5}])
def test_uninitialized_or_destroyed_databases_are_refused(fields: dict[str, object]) -> None:
    with pytest.raises(InvalidDbStateError):
        plan_compaction(db([10], **fields), None, PlanOptions())


# ------------------------------------------------------------------ sizes of projections
def test_view_size_counts_the_visible_fraction_of_a_projected_sst() -> None:
    h = _handle(1000, b"a\x00", b"a\xff")
    half = SstView(Ulid(1), h.id, BytesRange.half_open(b"a\x80", None))
    assert estimate_view_size(SstView.identity(h.id), h.info) == 1000
    assert 490 <= estimate_view_size(half, h.info) <= 510


# ---------------------------------------------------------------------- apply (commit)
def _cp(manifest_id: int = 1) -> Checkpoint:
    return Checkpoint(uuid.uuid4(), manifest_id, 10_000, 1)


def test_apply_replaces_sources_with_the_output_run_in_id_order() -> None:
    m = db([10, 10], runs=[(6, [10]), (2, [10]), (1, [10])], compactor_epoch=3)
    spec = plan_compaction(m, None, PlanOptions(Policy.SOURCES, sources=(
        SourceId.l0(m.l0[0].id), SourceId.l0(m.l0[1].id), SourceId.run(6), SourceId.run(2))))
    out = [_handle(), _handle()]
    cp = _cp()
    got = apply_compaction(m, spec, out, epoch=3, checkpoint=cp)
    assert got.l0 == ()
    assert [r.id for r in got.compacted] == [2, 1]
    assert got.compacted[0].views == tuple(SstView.identity(h.id) for h in out)
    assert got.last_compacted_l0_sst_view_id == m.l0[0].id
    assert is_committed(got, cp.id) and not is_committed(m, cp.id)
    assert {h.id for h in out} <= set(got.sst_map)
    assert not (set(spec.l0_view_ids) & {v.id for v in got.l0})


def test_apply_rebases_onto_l0_views_flushed_meanwhile() -> None:
    m = db([10, 10], compactor_epoch=1)
    spec = plan_compaction(m, None, PlanOptions(Policy.L0))
    newer = _handle()
    later = m.with_trees(l0=(SstView.identity(newer.id), *m.l0), new_ssts=[newer])
    got = apply_compaction(later, spec, [_handle()], epoch=1, checkpoint=_cp())
    assert got.l0 == (SstView.identity(newer.id),)
    assert got.last_compacted_l0_sst_view_id == m.l0[0].id


def test_apply_refuses_when_fenced_or_a_source_is_gone() -> None:
    m = db([10, 10], compactor_epoch=1)
    spec = plan_compaction(m, None, PlanOptions(Policy.L0))
    from dataclasses import replace

    with pytest.raises(FencedError):
        apply_compaction(replace(m, compactor_epoch=2), spec, [], epoch=1, checkpoint=_cp())
    gone = m.with_trees(l0=m.l0[:1])
    with pytest.raises(SourcesChangedError):
        apply_compaction(gone, spec, [], epoch=1, checkpoint=_cp())


def test_apply_with_no_output_keeps_an_empty_run_as_0_17_does() -> None:
    # 0.17 commits the destination run even when every row was dropped
    # (tests/interop/test_compact_segments_interop.py checks it on official databases)
    m = db(runs=[(4, [10])], compactor_epoch=1)
    spec = plan_compaction(m, None, PlanOptions(Policy.FULL))
    got = apply_compaction(m, spec, [], epoch=1, checkpoint=_cp())
    assert got.compacted == (SortedRun(4, ()),) and got.ssts == ()


def test_apply_drops_dereferenced_external_sst_ids_but_keeps_the_entry() -> None:
    from dataclasses import replace

    m = db([10], runs=[(0, [10])], compactor_epoch=1)
    ext_l0 = m.l0[0].sst_id
    ext_run = m.compacted[0].views[0].sst_id
    m = replace(m, external_dbs=(ExternalDb("parent", uuid.uuid4(), uuid.uuid4(),
                                            (ext_l0, ext_run)),))
    spec = plan_compaction(m, None, PlanOptions(Policy.L0))
    got = apply_compaction(m, spec, [_handle()], epoch=1, checkpoint=_cp())
    assert got.external_dbs[0].sst_ids == (ext_run,)
    spec = plan_compaction(got, None, PlanOptions(Policy.FULL))
    got = apply_compaction(got, spec, [_handle()], epoch=1, checkpoint=_cp())
    assert got.external_dbs[0].sst_ids == () and got.external_dbs[0].path == "parent"


def test_insert_run_keeps_descending_ids() -> None:
    runs = [SortedRun(9, ()), SortedRun(5, ()), SortedRun(1, ())]
    got = insert_run(runs, SortedRun(5, ()), {5})
    assert [r.id for r in got] == [9, 5, 1]
    assert [r.id for r in insert_run(runs, SortedRun(10, ()), set())] == [10, 9, 5, 1]
    assert [r.id for r in insert_run(runs, SortedRun(0, ()), {1})] == [9, 5, 0]


# ------------------------------------------------------------ compactions-file transitions
def test_take_over_resets_scheduled_and_closes_the_fenced_coordinators_work() -> None:
    from slatelib.core.compaction_state import abandoned, finish, record, running, take_over
    from slatelib.core.compactions import CompactedSsTable

    spec = TieredCompactionSpec(destination=1)
    out = _handle()
    done_out = CompactedSsTable(out.id, out.info)
    state = Compactions(3, (
        Compaction(Ulid(1), spec, CompactionStatus.SCHEDULED, worker=WorkerSpec("w")),
        Compaction(Ulid(2), spec, CompactionStatus.RUNNING, worker=WorkerSpec("w")),
        Compaction(Ulid(3), spec, CompactionStatus.COMPACTED, output_ssts=(done_out,)),
        Compaction(Ulid(4), spec, CompactionStatus.COMPACTED, output_ssts=(done_out,)),
    ))
    assert abandoned(state)
    with pytest.raises(FencedError):
        take_over(state, 3)
    got = take_over(state, 4, committed=frozenset())
    assert [(c.id, c.status) for c in got.recent_compactions] == [
        (1, CompactionStatus.SUBMITTED), (4, CompactionStatus.FAILED)]
    assert got.compactor_epoch == 4 and not abandoned(got)
    got = take_over(state, 4, committed=frozenset({out.id}))
    assert [c.status for c in got.recent_compactions] == [
        CompactionStatus.SUBMITTED, CompactionStatus.COMPLETED]
    mine = running(9, spec, "worker", 5)
    got = record(got, 4, mine)
    assert got.compaction(Ulid(9)) == mine
    with pytest.raises(FencedError):
        record(replace_epoch(got, 5), 4, mine)
    done = finish(got, 4, 9, CompactionStatus.COMPLETED, [out])
    assert done is not None and done.compaction(Ulid(9)).status == CompactionStatus.COMPLETED
    assert finish(done, 4, 9, CompactionStatus.COMPLETED, [out]) is None  # idempotent


def replace_epoch(state: Compactions, epoch: int) -> Compactions:
    from dataclasses import replace

    return replace(state, compactor_epoch=epoch)


# ------------------------------------------------------------- segments (RFC-0024)
def seg(prefix: bytes, l0_sizes: list[int] = (), runs: list[tuple[int, list[int]]] = (),
        cursor: Ulid | None = None) -> tuple[Segment, list[SstHandle]]:
    """A segment with L0 SSTs (newest first) and runs ``(id, [sizes])``, and its handles."""
    handles, l0, compacted = [], [], []
    for size in l0_sizes:
        h = _handle(size, prefix + b"0", prefix + b"9")
        handles.append(h)
        l0.append(SstView.identity(h.id))
    for run_id, sizes in runs:
        views = []
        for i, size in enumerate(sizes):
            h = _handle(size, prefix + bytes([48 + i]), prefix + bytes([48 + i]) + b"z")
            handles.append(h)
            views.append(SstView.identity(h.id))
        compacted.append(SortedRun(run_id, tuple(views)))
    return Segment(prefix, cursor, tuple(l0), tuple(compacted)), handles


def segmented(*segments: tuple[Segment, list[SstHandle]], **fields: object) -> Manifest:
    from dataclasses import replace

    handles = [h for _, hs in segments for h in hs]
    m = replace(Manifest(), segments=tuple(s for s, _ in segments),
                segment_extractor_name="fixed4", recent_snapshot_min_seq=42,
                last_l0_clock_tick=777, **fields)
    return replace(m, ssts=tuple(sorted(handles, key=lambda h: h.id)))


def plans(m: Manifest, policy: str, active: list[Compaction] = (),
          **opts: object) -> list[tuple[bytes, list[str], int, bool]]:
    options = PlanOptions(Policy(policy), SizeTieredOptions(**opts))  # type: ignore[arg-type]
    return [(s.segment, [str(x) for x in s.sources], s.destination, s.bottom)
            for s in plan_compactions(m, Compactions(1, tuple(active)), options)]


def test_l0_policy_plans_one_compaction_per_segment_with_global_run_ids() -> None:
    m = segmented(seg(b"aaa:", [10, 10]), seg(b"bbb:", runs=[(0, [10])]), seg(b"ccc:", [10]))
    got = plans(m, "l0")
    a, c = m.segments[0], m.segments[2]
    assert got == [(b"aaa:", [str(SourceId.l0(v.id)) for v in a.l0], 1, True),
                   (b"ccc:", [str(SourceId.l0(c.l0[0].id))], 2, True)]


def test_full_policy_compacts_every_segment_into_its_lowest_run() -> None:
    m = segmented(seg(b"aaa:", [10], runs=[(3, [10]), (1, [10])]), seg(b"bbb:", runs=[(0, [9])]),
                  seg(b"ccc:", runs=[(2, [])]), seg(b"ddd:", cursor=Ulid(7)))
    got = plans(m, "full")
    assert [(p, d, b) for p, _, d, b in got] == [(b"aaa:", 1, True), (b"bbb:", 0, True)]
    assert got[0][1][-2:] == ["sr:3", "sr:1"]  # the empty run and the drain marker: nothing


def test_size_tiered_plans_each_tree_by_its_own_l0_and_runs_more_l0_first() -> None:
    m = segmented(seg(b"aaa:", [10, 10]), seg(b"bbb:", [10, 10, 10]), seg(b"ccc:", [10]),
                  seg(b"ddd:", runs=[(4, [10]), (0, [10])]))
    got = plans(m, "size-tiered", min_compaction_sources=2)
    # 0.17: the tree with the most L0 views takes the first fresh id
    assert [(p, d, b) for p, _, d, b in got] == [(b"bbb:", 5, True), (b"aaa:", 6, True),
                                                  (b"ddd:", 0, True)]


def test_size_tiered_in_flight_compactions_block_only_their_own_segment() -> None:
    m = segmented(seg(b"aaa:", [10, 10]), seg(b"bbb:", [10, 10]))
    a = m.segments[0]
    busy = Compaction(Ulid(1), TieredCompactionSpec(l0_view_ids=(a.l0[1].id,),
                                                    destination=8, segment=b"aaa:"))
    got = plans(m, "size-tiered", [busy], min_compaction_sources=2)
    assert [(p, d) for p, _, d, _ in got] == [(b"bbb:", 9)]


def test_explicit_sources_come_from_one_segment() -> None:
    m = segmented(seg(b"aaa:", [10, 10], runs=[(2, [10])]), seg(b"bbb:", [10]))
    a, b = m.segments
    spec = plan_compaction(m, None, PlanOptions(Policy.SOURCES, sources=(
        SourceId.run(2), SourceId.l0(a.l0[1].id))))
    assert (spec.segment, spec.destination, spec.bottom) == (b"aaa:", 2, True)
    assert spec.to_tiered().segment == b"aaa:"
    with pytest.raises(InvalidArgumentError, match="one tree"):
        order_sources(m, [SourceId.l0(a.l0[1].id), SourceId.l0(b.l0[0].id)])
    with pytest.raises(InvalidArgumentError, match="oldest L0"):
        order_sources(m, [SourceId.l0(a.l0[0].id)])
    with pytest.raises(InvalidArgumentError, match="not in the latest manifest"):
        order_sources(m, [SourceId.run(9)])


def test_apply_changes_only_the_compactions_segment_and_its_cursor() -> None:
    m = segmented(seg(b"aaa:", [10, 10], runs=[(0, [10])]), seg(b"bbb:", [10]),
                  compactor_epoch=1)
    spec = plan_compaction(m, None, PlanOptions(Policy.L0))
    out = [_handle(first=b"aaa:0", last=b"aaa:9")]
    got = apply_compaction(m, spec, out, epoch=1, checkpoint=_cp())
    a, b = got.segments
    assert b == m.segments[1] and got.l0 == () and got.compacted == ()
    assert a.l0 == () and [r.id for r in a.compacted] == [1, 0]
    assert a.compacted[0].views == (SstView.identity(out[0].id),)
    assert a.last_compacted_l0_sst_view_id == m.segments[0].l0[0].id
    assert got.last_compacted_l0_sst_view_id is None
    assert got.referenced_sst_ids() == {h.id for h in got.ssts}


def test_apply_rebases_onto_a_segment_flush_and_refuses_a_vanished_segment() -> None:
    from dataclasses import replace

    m = segmented(seg(b"aaa:", [10]), seg(b"bbb:", [10]), compactor_epoch=1)
    spec = plan_compaction(m, None, PlanOptions(Policy.L0))
    newer = _handle(first=b"aaa:1", last=b"aaa:2")
    a = m.segments[0]
    later = replace(m, segments=(replace(a, l0=(SstView.identity(newer.id), *a.l0)),
                                 m.segments[1]), ssts=tuple(sorted((*m.ssts, newer),
                                                                   key=lambda h: h.id)))
    got = apply_compaction(later, spec, [_handle()], epoch=1, checkpoint=_cp())
    assert got.segments[0].l0 == (SstView.identity(newer.id),)
    gone = replace(m, segments=m.segments[1:],
                   ssts=tuple(h for h in m.ssts if h.id != a.l0[0].sst_id))
    with pytest.raises(SourcesChangedError, match="segment 'aaa:'"):
        apply_compaction(gone, spec, [], epoch=1, checkpoint=_cp())


def test_apply_compactions_commits_several_segments_in_one_version() -> None:
    m = segmented(seg(b"aaa:", [10]), seg(b"bbb:", [10, 10]), compactor_epoch=2)
    specs = plan_compactions(m, None, PlanOptions(Policy.L0))
    outs = [[_handle()], []]
    cp = _cp()
    got = apply_compactions(m, specs, outs, epoch=2, checkpoint=cp)
    assert [(s.prefix, [r.id for r in s.compacted], len(s.l0)) for s in got.segments] == \
        [(b"aaa:", [0], 0), (b"bbb:", [1], 0)]
    assert got.segments[1].compacted[0].views == ()
    assert [c.id for c in got.checkpoints] == [cp.id]
    with pytest.raises(FencedError):
        apply_compactions(m, specs, outs, epoch=1, checkpoint=cp)
