"""The writer's manifest changes: epoch claim, flush commit rebased on a compactor, checkpoints."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from slatelib.core.checkpoints import WRITER_CHECKPOINT_NAME, is_writer_checkpoint
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
from slatelib.errors import FencedError, InvalidDbStateError, UnsupportedFeatureError
from slatelib.format.seq_tracker import decode_seq_tracker
from slatelib.ids import Ulid
from slatelib.writer.manifest_rules import (
    L0Flush,
    check_openable,
    plan_checkpoint_move,
    plan_flush_commit,
    plan_writer_claim,
    prune_external_sst_ids,
)

NOW = 1_750_000_000.0


def handle(n: int) -> SstHandle:
    info = SsTableInfo(first_entry=b"a", last_entry=b"z", index_offset=10, index_len=5,
                       filter_offset=10, filter_len=0)
    return SstHandle(Ulid(n), info, 2)


def with_l0(m: Manifest, *ids: int) -> Manifest:
    return m.with_trees(l0=[SstView.identity(Ulid(i)) for i in ids],
                        new_ssts=[handle(i) for i in ids])


def flush_of(n: int, last_seq: int, wal: int, *, tracker: tuple = ()) -> L0Flush:
    return L0Flush(handle(n), last_seq=last_seq, replay_after_wal_id=wal, wal_id_last_seen=wal + 1,
                   last_tick=1234, tracker=tracker)


def test_claim_bumps_the_epoch_and_replaces_every_writer_checkpoint() -> None:
    old_writer = Checkpoint(uuid.uuid4(), 3, None, 1, writer_epoch=4)
    renamed = Checkpoint(uuid.uuid4(), 3, None, 1, name=WRITER_CHECKPOINT_NAME)  # metadata lost
    user = Checkpoint(uuid.uuid4(), 2, None, 1, name="keep")
    m = replace(Manifest(), writer_epoch=4, checkpoints=(old_writer, renamed, user))
    cid = uuid.uuid4()
    out = plan_writer_claim(m, 9, cid, now_s=NOW)
    assert out is not None and out.writer_epoch == 5
    assert [c.id for c in out.checkpoints] == [user.id, cid]
    mine = out.checkpoint(cid)
    assert mine is not None and mine.manifest_id == 9 and mine.writer_epoch == 5
    assert mine.expire_time_s is None and is_writer_checkpoint(mine)


def test_claim_is_idempotent_and_detects_a_later_claim() -> None:
    cid = uuid.uuid4()
    out = plan_writer_claim(Manifest(), 2, cid, now_s=NOW)
    assert out is not None
    assert plan_writer_claim(out, 3, cid, now_s=NOW) is None
    with pytest.raises(FencedError):
        plan_writer_claim(replace(out, writer_epoch=2), 3, cid, now_s=NOW)


@pytest.mark.parametrize("m, error", [
    (replace(Manifest(), initialized=False), InvalidDbStateError),
    (replace(Manifest(), destroyed_at_s=5), InvalidDbStateError),
    (replace(Manifest(), segment_extractor_name="fixed4"), UnsupportedFeatureError),
    (replace(Manifest(), segments=(Segment(b"a:", None, (), ()),)), UnsupportedFeatureError),
    (replace(Manifest(), wal_object_store_uri=""), UnsupportedFeatureError),
])
def test_databases_the_writer_cannot_open(m: Manifest, error: type[Exception]) -> None:
    with pytest.raises(error):
        check_openable(m, "db")


def test_flush_commit_prepends_l0_and_sets_the_bookkeeping_of_spec_5_5_4() -> None:
    m = replace(with_l0(Manifest(), 1), writer_epoch=3, last_l0_seq=10, replay_after_wal_id=4,
                wal_id_last_seen=5)
    cid = uuid.uuid4()
    out = plan_flush_commit(m, 8, flush_of(2, 20, 7, tracker=((11, 1000),)), epoch=3,
                            checkpoint_id=cid, now_s=NOW)
    assert out is not None
    assert [v.sst_id for v in out.l0] == [2, 1]
    assert [h.id for h in out.ssts] == [1, 2]
    assert (out.last_l0_seq, out.replay_after_wal_id, out.wal_id_last_seen) == (20, 7, 8)
    assert out.recent_snapshot_min_seq == 20 and out.last_l0_clock_tick == 1234
    assert decode_seq_tracker(out.sequence_tracker or b"") == [(11, 1000)]
    assert out.checkpoint(cid) is not None and out.checkpoint(cid).manifest_id == 8  # type: ignore[union-attr]


def test_flush_commit_rebases_on_a_compactor_commit() -> None:
    local = with_l0(replace(Manifest(), writer_epoch=2, last_l0_seq=10), 1, 2)
    run = SortedRun(0, (SstView.identity(Ulid(9)),))
    compacted = replace(
        Manifest().with_trees(l0=[], compacted=[run], new_ssts=[handle(9)]),
        writer_epoch=2, compactor_epoch=7, last_l0_seq=10,
        last_compacted_l0_sst_view_id=Ulid(2),
    )
    assert local.l0 != compacted.l0
    out = plan_flush_commit(compacted, 5, flush_of(3, 15, 3), epoch=2, checkpoint_id=uuid.uuid4(),
                            now_s=NOW)
    assert out is not None
    assert [v.sst_id for v in out.l0] == [3]
    assert out.compacted == (run,) and out.compactor_epoch == 7
    assert out.last_compacted_l0_sst_view_id == 2
    assert sorted(h.id for h in out.ssts) == [3, 9]


def test_flush_commit_is_idempotent_and_fenced_by_a_newer_epoch() -> None:
    m = replace(Manifest(), writer_epoch=2)
    out = plan_flush_commit(m, 2, flush_of(1, 5, 1), epoch=2, checkpoint_id=uuid.uuid4(), now_s=NOW)
    assert out is not None
    assert plan_flush_commit(out, 3, flush_of(1, 5, 1), epoch=2, checkpoint_id=uuid.uuid4(),
                             now_s=NOW) is None
    with pytest.raises(FencedError):
        plan_flush_commit(replace(m, writer_epoch=3), 2, flush_of(1, 5, 1), epoch=2,
                          checkpoint_id=uuid.uuid4(), now_s=NOW)


def test_a_flush_whose_rows_all_expired_still_advances_the_replay_point() -> None:
    m = replace(Manifest(), writer_epoch=1, last_l0_seq=1)
    f = L0Flush(None, last_seq=4, replay_after_wal_id=6, wal_id_last_seen=6, last_tick=9)
    out = plan_flush_commit(m, 2, f, epoch=1, checkpoint_id=uuid.uuid4(), now_s=NOW)
    assert out is not None and out.l0 == () and (out.last_l0_seq, out.replay_after_wal_id) == (4, 6)


def test_external_sst_ids_no_view_references_are_pruned() -> None:
    m = with_l0(Manifest(), 1)
    m = replace(m, external_dbs=(ExternalDb("parent", uuid.uuid4(), uuid.uuid4(), (Ulid(1), Ulid(7))),))
    assert prune_external_sst_ids(m).external_dbs[0].sst_ids == (1,)


def test_checkpoint_move() -> None:
    cid = uuid.uuid4()
    m = replace(Manifest(), writer_epoch=3)
    moved = plan_checkpoint_move(m, 4, epoch=3, checkpoint_id=cid, now_s=NOW)
    assert moved is not None and moved.checkpoint(cid).manifest_id == 4  # type: ignore[union-attr]
    assert plan_checkpoint_move(moved, 5, epoch=3, checkpoint_id=cid, now_s=NOW) is None
    with pytest.raises(FencedError):
        plan_checkpoint_move(m, 4, epoch=2, checkpoint_id=cid, now_s=NOW)
