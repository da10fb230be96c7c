"""The fence of :func:`slatelib.ops.compaction.commit.fence_compactor`: its I/O (reading the
compactions file and the claim records, writing our claim record) happens before the CAS
loop, so a retried CAS repeats none of it (docs/rfcs/0020-house-second-step.md, "manifest")."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from slatelib.core.manifest import Manifest
from slatelib.db_manifest import DbManifest
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.compaction import commit
from slatelib.ops.compaction.commit import fence_compactor
from slatelib.store.claim_store import ClaimStore
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.sequenced import Versioned
from slatelib.testing.clock import FakeClock
from tests.compaction_fixtures import NOW_MS, new_db

ROOT = "db"


class RacedManifest(DbManifest):
    """A manifest whose first ``races`` CAS writes lose to a writer's flush (a version at
    the same compactor epoch written right before ours)."""

    def __init__(self, store: ObjectStore, root: str, races: int) -> None:
        super().__init__(store, root)
        self.races = races

    def write(self, version_id: int, value: Manifest) -> Versioned[Manifest]:
        if self.races > 0:
            self.races -= 1
            cur = self.read_latest()
            flushed = replace(cur.value, wal_id_last_seen=cur.value.wal_id_last_seen + 1)
            super().write(cur.id + 1, flushed)
        return super().write(version_id, value)


@pytest.fixture
def store() -> ObjectStore:
    s = open_store(f"memory://{uuid.uuid4().hex}/")
    new_db(s, ROOT)
    return s


def test_a_retried_fence_cas_does_its_side_effects_once(
        store: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    puts: list[str] = []
    reads: list[int] = []
    real_put, real_read = ClaimStore.put, CompactionsStore.try_read_latest

    def put(self: ClaimStore, record: object) -> None:
        puts.append(getattr(record, "state", "?"))
        real_put(self, record)  # type: ignore[arg-type]

    def read(self: CompactionsStore) -> object:
        reads.append(1)
        return real_read(self)

    monkeypatch.setattr(ClaimStore, "put", put)
    monkeypatch.setattr(CompactionsStore, "try_read_latest", read)
    ms = RacedManifest(store, ROOT, races=3)
    before = ms.read_latest()
    claim = fence_compactor(ms, CompactionsStore(store, ROOT), clock=FakeClock(NOW_MS),
                            timeout_s=30)
    assert ms.races == 0  # three CAS attempts conflicted, the fourth landed
    assert claim.manifest.id == before.id + 4 and claim.epoch == before.value.compactor_epoch + 1
    assert puts == ["claiming", "claimed"]  # one claim record, not one per attempt
    # the judgement read the compactions file once; claim_compactions reads it once more
    assert len(reads) == 2


def test_a_fence_racing_another_compactor_judges_the_new_epoch(
        store: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conflict with a newer compactor epoch is not a retry but a new decision: the run
    judges that epoch (foreign: refused) instead of fencing it blindly."""
    class Fenced(DbManifest):
        done = False

        def write(self, version_id: int, value: Manifest) -> Versioned[Manifest]:
            if not self.done:
                self.done = True
                cur = self.read_latest()
                super().write(cur.id + 1, replace(
                    cur.value, compactor_epoch=cur.value.compactor_epoch + 1))
            return super().write(version_id, value)

    from slatelib.errors import CompactorActiveError
    with pytest.raises(CompactorActiveError):
        fence_compactor(Fenced(store, ROOT), CompactionsStore(store, ROOT),
                        clock=FakeClock(NOW_MS), timeout_s=30)


def test_the_fence_step_is_a_pure_function_of_the_version() -> None:
    from slatelib.core.compactor_claim import ClaimRecord, ClaimState
    s = open_store(f"memory://{uuid.uuid4().hex}/")
    new_db(s, ROOT)
    cur = DbManifest(s, ROOT).read_latest()
    record = ClaimRecord(epoch=cur.value.compactor_epoch + 1, run_id="r",
                         state=ClaimState.CLAIMING, base_manifest_id=cur.id,
                         marker=uuid.uuid4(), mode="job", host="h", pid=1, at_ms=NOW_MS)
    step = commit.fence_step(record, frozenset(), FakeClock(NOW_MS))
    first, second = step(cur), step(cur)
    assert first == second and first is not None
    assert first.compactor_epoch == record.epoch and first.checkpoint(record.marker)
