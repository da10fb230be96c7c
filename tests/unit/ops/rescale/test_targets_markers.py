"""Detach's first write: the target's expired checkpoints and the claim markers of failed
compaction runs go in one manifest CAS (docs/rfcs/0020-house-second-step.md, "manifest")."""

from __future__ import annotations

import uuid
from dataclasses import replace

from slatelib.core.compactor_claim import ClaimRecord, ClaimState
from slatelib.db_manifest import DbManifest
from slatelib.objstore import open_store
from slatelib.ops.rescale.targets import drop_superseded_claim_markers
from slatelib.store.claim_store import ClaimStore
from slatelib.testing.clock import FakeClock
from tests.compaction_fixtures import NOW_MS, new_db

ROOT = "t"


def test_expired_checkpoints_and_stale_markers_go_in_one_version() -> None:
    store = open_store(f"memory://{uuid.uuid4().hex}/")
    new_db(store, ROOT)
    clock = FakeClock(NOW_MS)
    db = DbManifest(store, ROOT)
    marker, kept = uuid.uuid4(), uuid.uuid4()
    ClaimStore(store, ROOT).put(ClaimRecord(
        epoch=1, run_id="r", state=ClaimState.CLAIMING, base_manifest_id=1, marker=marker,
        mode="job", host="h", pid=1, at_ms=NOW_MS))
    db.create_checkpoint(clock=clock, lifetime_s=86_400, checkpoint_id=marker)
    expired, _ = db.create_checkpoint(clock=clock, lifetime_s=1)
    db.create_checkpoint(clock=clock, lifetime_s=86_400, checkpoint_id=kept)
    db.update(lambda cur: replace(cur.value, compactor_epoch=2), clock=clock)
    clock.advance(10)
    before = db.read_latest().id
    assert drop_superseded_claim_markers(store, ROOT, clock) == 1
    after = db.read_latest()
    assert after.id == before + 1  # one CAS for both removals
    assert [c.id for c in after.value.checkpoints] == [kept]
    assert expired.id not in {c.id for c in after.value.checkpoints}
