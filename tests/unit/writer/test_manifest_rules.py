"""The writer's manifest changes: epoch claim, flush commit rebased on a compactor, checkpoints."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from slatelib.core.checkpoints import (
    WRITER_CHECKPOINT_NAME,
    is_writer_checkpoint,
    writer_checkpoint,
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
from slatelib.errors import (
    FencedError,
    InvalidArgumentError,
    InvalidDbStateError,
    UnsupportedFeatureError,
)
from slatelib.format.seq_tracker import decode_seq_tracker
from slatelib.ids import Ulid
from slatelib.writer.manifest_rules import (
    L0Flush,
    check_openable,
    plan_checkpoint_move,
    plan_close,
    plan_flush_commit,
    plan_writer_claim,
    prune_external_sst_ids,
    read_deadline_s,
    reestablish_reason,
)

NOW = 1_750_000_000.0
LIFE = 3600.0


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
    out = plan_writer_claim(m, 9, cid, now_s=NOW, lifetime_s=LIFE)
    assert out is not None and out.writer_epoch == 5
    assert [c.id for c in out.checkpoints] == [user.id, cid]
    mine = out.checkpoint(cid)
    assert mine is not None and mine.manifest_id == 9 and mine.writer_epoch == 5
    assert mine.expire_time_s == NOW + LIFE and is_writer_checkpoint(mine)


def test_claim_is_idempotent_and_detects_a_later_claim() -> None:
    cid = uuid.uuid4()
    out = plan_writer_claim(Manifest(), 2, cid, now_s=NOW, lifetime_s=LIFE)
    assert out is not None
    assert plan_writer_claim(out, 3, cid, now_s=NOW, lifetime_s=LIFE) is None
    with pytest.raises(FencedError):
        plan_writer_claim(replace(out, writer_epoch=2), 3, cid, now_s=NOW, lifetime_s=LIFE)


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


def test_a_v1_manifest_naming_a_wal_store_opens_only_with_a_wal_store() -> None:
    m = replace(Manifest(), wal_object_store_uri="s3://wal")
    with pytest.raises(UnsupportedFeatureError, match="--wal-store"):
        check_openable(m, "db")
    check_openable(m, "db", separate_wal=True)


def test_a_close_records_the_last_wal_id_while_the_writer_owns_the_database() -> None:
    cid = uuid.uuid4()
    claimed = plan_writer_claim(Manifest(), 2, cid, now_s=NOW, lifetime_s=LIFE)
    assert claimed is not None and claimed.wal_id_last_seen == 0
    closed = plan_close(claimed, {cid}, epoch=1, last_wal_id=9)
    assert closed is not None and closed.checkpoints == () and closed.wal_id_last_seen == 9
    fenced = plan_close(replace(claimed, writer_epoch=2), {cid}, epoch=1, last_wal_id=9)
    assert fenced is not None and fenced.wal_id_last_seen == 0  # a newer writer owns it
    assert plan_close(replace(closed, wal_id_last_seen=9), {cid}, epoch=1, last_wal_id=9) is None


def test_flush_commit_prepends_l0_and_sets_the_bookkeeping_of_spec_5_5_4() -> None:
    m = replace(with_l0(Manifest(), 1), writer_epoch=3, last_l0_seq=10, replay_after_wal_id=4,
                wal_id_last_seen=5)
    cid = uuid.uuid4()
    out = plan_flush_commit(m, 8, flush_of(2, 20, 7, tracker=((11, 1000),)), epoch=3,
                            checkpoint_id=cid, now_s=NOW, lifetime_s=LIFE)
    assert out is not None
    assert [v.sst_id for v in out.l0] == [2, 1]
    assert [h.id for h in out.ssts] == [1, 2]
    assert (out.last_l0_seq, out.replay_after_wal_id, out.wal_id_last_seen) == (20, 7, 8)
    assert out.recent_snapshot_min_seq == 20 and out.last_l0_clock_tick == 1234
    assert decode_seq_tracker(out.sequence_tracker or b"") == [(11, 1000)]
    mine = out.checkpoint(cid)
    assert mine is not None and (mine.manifest_id, mine.expire_time_s) == (8, NOW + LIFE)


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
                            now_s=NOW, lifetime_s=LIFE)
    assert out is not None
    assert [v.sst_id for v in out.l0] == [3]
    assert out.compacted == (run,) and out.compactor_epoch == 7
    assert out.last_compacted_l0_sst_view_id == 2
    assert sorted(h.id for h in out.ssts) == [3, 9]


def test_flush_commit_is_idempotent_and_fenced_by_a_newer_epoch() -> None:
    m = replace(Manifest(), writer_epoch=2)
    out = plan_flush_commit(m, 2, flush_of(1, 5, 1), epoch=2, checkpoint_id=uuid.uuid4(),
                            now_s=NOW, lifetime_s=LIFE)
    assert out is not None
    assert plan_flush_commit(out, 3, flush_of(1, 5, 1), epoch=2, checkpoint_id=uuid.uuid4(),
                             now_s=NOW, lifetime_s=LIFE) is None
    with pytest.raises(FencedError):
        plan_flush_commit(replace(m, writer_epoch=3), 2, flush_of(1, 5, 1), epoch=2,
                          checkpoint_id=uuid.uuid4(), now_s=NOW, lifetime_s=LIFE)


def test_a_flush_whose_rows_all_expired_still_advances_the_replay_point() -> None:
    m = replace(Manifest(), writer_epoch=1, last_l0_seq=1)
    f = L0Flush(None, last_seq=4, replay_after_wal_id=6, wal_id_last_seen=6, last_tick=9)
    out = plan_flush_commit(m, 2, f, epoch=1, checkpoint_id=uuid.uuid4(), now_s=NOW,
                            lifetime_s=LIFE)
    assert out is not None and out.l0 == () and (out.last_l0_seq, out.replay_after_wal_id) == (4, 6)


def test_external_sst_ids_no_view_references_are_pruned() -> None:
    m = with_l0(Manifest(), 1)
    m = replace(m, external_dbs=(ExternalDb("parent", uuid.uuid4(), uuid.uuid4(), (Ulid(1), Ulid(7))),))
    assert prune_external_sst_ids(m).external_dbs[0].sst_ids == (1,)


def test_checkpoint_move() -> None:
    cid = uuid.uuid4()
    m = replace(Manifest(), writer_epoch=3)
    moved = plan_checkpoint_move(m, 4, epoch=3, checkpoint_id=cid, now_s=NOW, lifetime_s=LIFE)
    mine = None if moved is None else moved.checkpoint(cid)
    assert mine is not None and (mine.manifest_id, mine.expire_time_s) == (4, NOW + LIFE)
    assert plan_checkpoint_move(moved, 5, epoch=3, checkpoint_id=cid, now_s=NOW,  # type: ignore[arg-type]
                                lifetime_s=LIFE) is None
    with pytest.raises(FencedError):
        plan_checkpoint_move(m, 4, epoch=2, checkpoint_id=cid, now_s=NOW, lifetime_s=LIFE)


def test_a_writer_checkpoint_expiry_must_fit_the_manifest() -> None:
    with pytest.raises(InvalidArgumentError, match="checkpoint_lifetime"):
        writer_checkpoint(2, 1, now_s=NOW, lifetime_s=200 * 365 * 86400.0,
                                   checkpoint_id=uuid.uuid4())
    with pytest.raises(InvalidArgumentError, match="negative"):
        writer_checkpoint(2, 1, now_s=NOW, lifetime_s=-1, checkpoint_id=uuid.uuid4())


def test_the_writer_stops_reading_a_quarter_lifetime_before_its_checkpoint_expires() -> None:
    cp = Checkpoint(uuid.uuid4(), 3, int(NOW + LIFE), int(NOW), writer_epoch=1)
    assert read_deadline_s(cp, LIFE) == NOW + 0.75 * LIFE
    assert read_deadline_s(None, LIFE) == 0.0
    assert read_deadline_s(replace(cp, expire_time_s=None), LIFE) == float("inf")


def _writer_state(now_s: float) -> tuple[Manifest, Checkpoint]:
    cp = Checkpoint(uuid.uuid4(), 3, int(now_s + LIFE), int(now_s), writer_epoch=1)
    return replace(with_l0(Manifest(), 1), writer_epoch=1, checkpoints=(cp,)), cp


@pytest.mark.parametrize("elapsed_s, reason", [
    (0, None),
    (LIFE / 2 - 1, None),
    (LIFE / 2 + 1, "refresh due"),
    (LIFE * 2, "refresh due"),
])
def test_a_poll_refreshes_the_writer_checkpoint_after_half_its_lifetime(
    elapsed_s: float, reason: str | None
) -> None:
    m, cp = _writer_state(NOW)
    assert reestablish_reason(m, m, cp.id, lifetime_s=LIFE, now_s=NOW + elapsed_s) == reason


def test_a_poll_reestablishes_a_removed_checkpoint_or_after_a_compaction() -> None:
    m, cp = _writer_state(NOW)
    gone = replace(m, checkpoints=())
    assert reestablish_reason(m, gone, cp.id, lifetime_s=LIFE, now_s=NOW) == "checkpoint missing"
    assert reestablish_reason(m, m, None, lifetime_s=LIFE, now_s=NOW) == "checkpoint missing"
    compacted = replace(m.with_trees(l0=[], new_ssts=[]), checkpoints=m.checkpoints)
    assert reestablish_reason(m, compacted, cp.id, lifetime_s=LIFE, now_s=NOW) == "lsm changed"
