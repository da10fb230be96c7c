"""Who holds the compactor epoch (pure verdicts of :mod:`slatelib.core.compactor_claim`)."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from slatelib.core.checkpoints import add_checkpoint, new_checkpoint
from slatelib.core.compactor_claim import (
    Activity,
    ClaimRecord,
    ClaimState,
    Holder,
    fence_marker_landed,
    judge_claim,
)
from slatelib.core.manifest import Manifest
from slatelib.errors import CorruptObjectError

BASE = Manifest(initialized=True)


def record(epoch: int, state: ClaimState, base: int = 4, marker: uuid.UUID | None = None,
           ) -> ClaimRecord:
    return ClaimRecord(epoch=epoch, run_id="r1", state=state, base_manifest_id=base,
                       marker=marker or uuid.uuid4(), at_ms=1)


def fenced(epoch: int, marker: uuid.UUID | None) -> Manifest:
    m = replace(BASE, compactor_epoch=epoch)
    if marker is None:
        return m
    return add_checkpoint(m, new_checkpoint(m, 4, now_s=100.0, lifetime_s=60.0,
                                            checkpoint_id=marker))


def no_manifests(_: int) -> Manifest | None:
    return None


def test_epoch_zero_without_a_compactions_claim_is_free() -> None:
    v = judge_claim(BASE, [], no_manifests)
    assert v.holder == Holder.FREE and v.may_fence


def test_an_epoch_with_a_claimed_record_is_ours() -> None:
    v = judge_claim(fenced(3, None), [record(3, ClaimState.CLAIMED)], no_manifests)
    assert v.holder == Holder.OURS and v.may_fence


def test_an_epoch_without_a_record_is_foreign_and_refused_with_both_ways_out() -> None:
    v = judge_claim(fenced(3, None), [record(2, ClaimState.CLAIMED)], no_manifests,
                    activity=Activity(compactions_epoch=3, compactions_age_s=2.0,
                                      wal_age_s=0.5))
    assert v.holder == Holder.FOREIGN and not v.may_fence
    msg = v.refusal("tenants/a")
    for part in ("'tenants/a'", "epoch 3", "--takeover", "worker mode",
                 "compactor_options=None", "Closed(FENCED)", "last written 2s ago",
                 "newest WAL SST written 0.5s ago"):
        assert part in msg, (part, msg)


def test_a_claiming_record_counts_only_when_its_fence_manifest_carries_the_marker() -> None:
    marker = uuid.uuid4()
    rec = record(3, ClaimState.CLAIMING, base=4, marker=marker)
    ours = {5: fenced(3, marker)}
    assert judge_claim(fenced(3, None), [rec], ours.get).holder == Holder.OURS
    # a foreign compactor fenced from the same version: same epoch, no marker
    theirs = {5: fenced(3, None)}
    assert judge_claim(fenced(3, None), [rec], theirs.get).holder == Holder.FOREIGN
    # the fence version is gone: unknown, so foreign (the safe answer)
    assert judge_claim(fenced(3, None), [rec], no_manifests).holder == Holder.FOREIGN


def test_a_lost_record_never_counts() -> None:
    marker = uuid.uuid4()
    rec = record(3, ClaimState.LOST, marker=marker)
    assert judge_claim(fenced(3, None), [rec], {5: fenced(3, marker)}.get).holder == \
        Holder.FOREIGN


def test_a_compactions_file_ahead_of_the_manifest_is_a_starting_compactor() -> None:
    v = judge_claim(fenced(3, None), [record(3, ClaimState.CLAIMED)], no_manifests,
                    compactions_epoch=4)
    assert v.holder == Holder.FOREIGN and v.epoch == 4
    assert judge_claim(BASE, [], no_manifests, compactions_epoch=1).holder == Holder.FOREIGN
    assert judge_claim(BASE, [], no_manifests, compactions_epoch=0).holder == Holder.FREE


def test_fence_marker_landed_needs_both_the_epoch_and_the_marker() -> None:
    marker = uuid.uuid4()
    rec = record(3, ClaimState.CLAIMING, marker=marker)
    assert fence_marker_landed(fenced(3, marker), rec)
    assert not fence_marker_landed(fenced(4, marker), rec)
    assert not fence_marker_landed(fenced(3, uuid.uuid4()), rec)


def test_claim_records_round_trip_and_garbage_is_a_corrupt_object() -> None:
    rec = replace(record(7, ClaimState.CLAIMED), manifest_id=12, host="h", pid=9)
    assert ClaimRecord.from_json(rec.to_json(), path="p") == rec
    for bad in (b"", b"{}", b"[1]", b'{"epoch": "x"}', b"\xff"):
        with pytest.raises(CorruptObjectError, match="claims/x"):
            ClaimRecord.from_json(bad, path="claims/x")
