"""The worker side of 0.17's coordinator/worker protocol: which entries are claimable,
and the versions a worker writes (claim, heartbeat, Compacted, release), resuming from a
context, and the spec built from a claimed entry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slatelib.core.compaction_worker import (
    RangeWork,
    claim,
    claimable,
    compacted,
    declined_reason,
    heartbeat,
    outputs_in_order,
    owned,
    progress_context,
    release,
    remaining_work,
    reported,
    scheduled,
    spec_of,
)
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
from slatelib.core.ranges import Bound, BytesRange
from slatelib.errors import ConflictError, UnsupportedFeatureError
from tests.unit.core.test_compaction_plan import _handle, db, seg, segmented

ME = "01JWORKER0000000000000000A"
OTHER = "01JWORKER0000000000000000B"


def entry(i: int, status: CompactionStatus = CompactionStatus.SCHEDULED,
          worker: str | None = None, **kw: object) -> Compaction:
    spec = kw.pop("spec", TieredCompactionSpec(l0_view_ids=(), sorted_runs=(), destination=i))
    return Compaction(id=i, spec=spec, status=status,  # type: ignore[arg-type]
                      worker=None if worker is None else WorkerSpec(worker, 1), **kw)  # type: ignore[arg-type]


def state(*entries: Compaction) -> Compactions:
    return Compactions(compactor_epoch=7, recent_compactions=entries)


def test_scheduled_unclaimed_tiered_entries_of_any_segment_are_claimable() -> None:
    s = state(entry(1), entry(2, CompactionStatus.SUBMITTED), entry(3, worker=OTHER),
              entry(4, CompactionStatus.RUNNING, OTHER),
              entry(5, spec=DrainSegmentSpec(segment=b"ab")),
              entry(6, spec=TieredCompactionSpec(destination=0, segment=b"ab")),
              entry(7, CompactionStatus.COMPACTED), entry(8))
    assert [c.id for c in claimable(s)] == [1, 6, 8]
    assert claimable(None) == []
    # the drain is Scheduled work this worker declines, with the reason
    assert [c.id for c in scheduled(s)] == [1, 5, 6, 8]
    assert "drain" in (declined_reason(s.recent_compactions[4]) or "")
    assert declined_reason(s.recent_compactions[5]) is None


def test_claim_marks_running_with_our_id_and_heartbeat_and_keeps_the_epoch() -> None:
    s = state(entry(1), entry(2), entry(3, CompactionStatus.COMPLETED))
    new, ids = claim(s, [1, 2], ME, 5000)
    assert ids == [1, 2] and new is not None
    assert new.compactor_epoch == 7
    for cid in (1, 2):
        c = new.compaction(cid)
        assert c is not None and c.status == CompactionStatus.RUNNING
        assert c.worker == WorkerSpec(ME, 5000)
    assert new.compaction(3) == s.compaction(3)


def test_claim_of_an_entry_taken_meanwhile_claims_nothing() -> None:
    s = state(entry(1, CompactionStatus.RUNNING, OTHER))
    assert claim(s, [1], ME, 5000) == (None, [])


def test_a_claim_whose_response_was_lost_is_recognised_as_ours() -> None:
    s, _ = claim(state(entry(1)), [1], ME, 5000)
    assert s is not None
    assert claim(s, [1], ME, 6000) == (None, [1])


def test_heartbeat_refreshes_ours_sets_context_and_names_the_lost() -> None:
    s, _ = claim(state(entry(1), entry(2), entry(3)), [1, 2, 3], ME, 1000)
    assert s is not None
    s = replace(s, recent_compactions=tuple(
        replace(c, worker=WorkerSpec(OTHER, 1)) if c.id == 2 else
        replace(c, status=CompactionStatus.SCHEDULED, worker=None) if c.id == 3 else c
        for c in s.recent_compactions))
    ctx = TieredCompactionContext((Subcompaction(BytesRange.all()),), 9)
    new, lost = heartbeat(s, ME, 2000, {1: ctx, 2: None, 3: None})
    assert lost == {2, 3} and new is not None
    c1 = new.compaction(1)
    assert c1 is not None and c1.worker == WorkerSpec(ME, 2000) and c1.ctx == ctx
    assert new.compaction(2) == s.compaction(2)
    again, _ = heartbeat(new, ME, 3000, {1: None})
    assert again is not None and again.compaction(1).ctx == ctx  # type: ignore[union-attr]
    assert heartbeat(s, ME, 2000, {2: None}) == (None, {2})


def test_compacted_records_outputs_clears_context_and_only_when_ours() -> None:
    s, _ = claim(state(entry(1)), [1], ME, 1000)
    assert s is not None
    s, _ = heartbeat(s, ME, 1500, {1: TieredCompactionContext((), 3)})
    assert s is not None
    outs = [_handle(), _handle()]
    new = compacted(s, 1, ME, 2000, outs)
    assert new is not None
    c = new.compaction(1)
    assert c is not None and c.status == CompactionStatus.COMPACTED and c.ctx is None
    assert [o.id for o in c.output_ssts] == [h.id for h in outs]
    assert c.worker == WorkerSpec(ME, 2000)
    assert compacted(new, 1, ME, 3000, outs) is None  # already reported
    assert reported(new, 1, ME, outs)
    assert not reported(new, 1, ME, outs[:1])
    assert not reported(s, 1, ME, outs)
    assert compacted(s, 1, OTHER, 2000, outs) is None


def test_release_hands_back_to_scheduled_keeping_the_context() -> None:
    ctx = TieredCompactionContext((Subcompaction(BytesRange.all()),), 4)
    s = state(entry(1, CompactionStatus.RUNNING, ME, ctx=ctx))
    new = release(s, 1, ME)
    assert new is not None
    c = new.compaction(1)
    assert c is not None and c.status == CompactionStatus.SCHEDULED and c.worker is None
    assert c.ctx == ctx
    assert release(s, 1, OTHER) is None
    assert owned(new, 1, ME) is None


def _sub(rng: BytesRange, *lasts: bytes) -> Subcompaction:
    outs = []
    for last in lasts:
        h = _handle(first=b"a", last=last)
        outs.append(CompactedSsTable(h.id, h.info))
    return Subcompaction(rng, tuple(outs))


def test_remaining_work_resumes_each_range_after_its_last_output() -> None:
    fresh = [BytesRange.half_open(None, b"m"), BytesRange.half_open(b"m", None)]
    assert remaining_work(None, fresh) == [RangeWork(r, (), r) for r in fresh]
    ctx = TieredCompactionContext((
        _sub(BytesRange.half_open(None, b"g"), b"c", b"f"),       # partly done
        _sub(BytesRange(Bound.included(b"g"), Bound.included(b"p")), b"p"),  # finished
        _sub(BytesRange.half_open(b"q", None)),                  # not started
    ), 5)
    work = remaining_work(ctx, fresh)
    assert [len(w.done) for w in work] == [2, 1, 0]
    assert work[0].todo == BytesRange(Bound.excluded(b"f"), Bound.excluded(b"g"))
    assert work[1].todo is None
    assert work[2].todo == BytesRange.half_open(b"q", None)
    more = {0: (_handle(first=b"fa", last=b"fz"),), 2: (_handle(), _handle())}
    order = outputs_in_order(work, more)
    assert [h.id for h in order] == (
        [s.id for s in ctx.subcompactions[0].output_ssts] + [more[0][0].id]
        + [ctx.subcompactions[1].output_ssts[0].id] + [h.id for h in more[2]])
    published = progress_context(work, more, 5)
    assert [len(s.output_ssts) for s in published.subcompactions] == [3, 1, 2]
    assert [s.range for s in published.subcompactions] == [s.range for s in ctx.subcompactions]
    assert published.retention_min_seq == 5


def test_a_range_ending_exactly_at_the_last_key_is_done() -> None:
    ctx = TieredCompactionContext((_sub(BytesRange.half_open(None, b"k"), b"k"),), 0)
    assert remaining_work(ctx, [])[0].todo is None


def test_spec_of_a_claimed_entry_uses_the_manifest_after_the_claim() -> None:
    m = replace(db([10, 20, 30], [(3, [5]), (1, [5, 5])]), recent_snapshot_min_seq=40,
                last_l0_clock_tick=77)
    views = tuple(v.id for v in m.l0[1:])
    e = entry(9, spec=TieredCompactionSpec(l0_view_ids=views, sorted_runs=(3,),
                                           destination=3))
    spec = spec_of(e, m)
    assert spec.l0_view_ids == views and spec.run_ids == (3,) and spec.destination == 3
    assert not spec.bottom  # run 1 is older than the destination
    assert spec.retention_min_seq == 40 and spec.clock_tick == 77
    bottom = entry(9, spec=TieredCompactionSpec(l0_view_ids=(), sorted_runs=(1,),
                                                destination=1))
    assert spec_of(bottom, m).bottom
    resumed = replace(e, ctx=TieredCompactionContext((), 12))
    assert spec_of(resumed, m).retention_min_seq == 12


def test_spec_of_refuses_sources_that_are_gone_or_reordered() -> None:
    m = db([10, 20], [(3, [5])])
    gone = entry(9, spec=TieredCompactionSpec(l0_view_ids=(12345,), destination=4))
    with pytest.raises(ConflictError, match="not in the latest manifest"):
        spec_of(gone, m)
    backwards = entry(9, spec=TieredCompactionSpec(
        l0_view_ids=tuple(reversed([v.id for v in m.l0])), destination=4))
    with pytest.raises(ConflictError):
        spec_of(backwards, m)
    drain = entry(9, spec=DrainSegmentSpec(segment=b"x"))
    with pytest.raises(UnsupportedFeatureError):
        spec_of(drain, m)


def test_spec_of_a_segment_entry_takes_that_segments_tree() -> None:
    m = segmented(seg(b"aaa:", [10, 10], runs=[(4, [5]), (2, [5])]), seg(b"bbb:", [10]))
    a = (m.segments or ())[0]
    e = entry(9, spec=TieredCompactionSpec(l0_view_ids=tuple(v.id for v in a.l0),
                                           sorted_runs=(4,), destination=4, segment=b"aaa:"))
    spec = spec_of(e, m)
    assert spec.segment == b"aaa:" and spec.l0_views == a.l0 and spec.run_ids == (4,)
    assert not spec.bottom  # run 2 of the segment is older
    last = entry(9, spec=TieredCompactionSpec(sorted_runs=(2,), destination=2,
                                              segment=b"aaa:"))
    assert spec_of(last, m).bottom
    # the same sources named under another segment, or a segment that is gone: a race
    wrong = replace(e, spec=replace(e.spec, segment=b"bbb:"))  # type: ignore[type-var]
    with pytest.raises(ConflictError, match="segment 'bbb:'"):
        spec_of(wrong, m)
    with pytest.raises(ConflictError, match="segment 'zzz:' is not in the latest"):
        spec_of(replace(e, spec=replace(e.spec, segment=b"zzz:")), m)  # type: ignore[type-var]
