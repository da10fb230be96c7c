"""A compaction never fences a compactor that may be live, and checks everything before
its first write (reliability issue, D1 and D5): a refused run leaves every byte as it was."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

import pytest

from slatelib.core.compactions import Compactions
from slatelib.errors import (
    CompactorActiveError,
    CorruptObjectError,
    SstMissingError,
)
from slatelib.exit_codes import EXIT_COMPACTOR_ACTIVE, exit_code_for
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.compaction import run_compaction
from slatelib.paths import DbPaths
from slatelib.store.claim_store import ClaimStore
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash
from slatelib.txn import update_versioned
from tests.unit.ops.compaction.test_commit import ROOT, fill, manifest, scan, settings


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}/")


def snapshot(store: ObjectStore) -> dict[str, bytes]:
    return {m.path: store.get(m.path) for m in store.list("")}


def official_fence(store: ObjectStore, epoch_bump: int = 1) -> None:
    """What an official compactor does when it starts: bump the epoch in the manifest,
    then claim it in the compactions file."""
    written = update_versioned(ManifestStore(store, ROOT), lambda cur: replace(
        cur.value, compactor_epoch=cur.value.compactor_epoch + epoch_bump))
    cs = CompactionsStore(store, ROOT)
    latest = cs.try_read_latest()
    cs.write(1 if latest is None else latest.id + 1,
             Compactions(compactor_epoch=written.value.compactor_epoch))


def test_a_foreign_compactor_epoch_is_refused_before_any_write(store: ObjectStore) -> None:
    fill(store)
    official_fence(store)
    before = snapshot(store)
    with pytest.raises(CompactorActiveError) as err:
        run_compaction(ROOT, store, settings=settings(), policy="l0")
    assert exit_code_for(err.value) == EXIT_COMPACTOR_ACTIVE == 7
    assert "--takeover" in str(err.value) and "compactions file at epoch 1" in str(err.value)
    assert snapshot(store) == before


def test_a_foreign_epoch_is_refused_even_with_nothing_to_compact(store: ObjectStore) -> None:
    fill(store, l0s=0)
    official_fence(store)
    before = snapshot(store)
    with pytest.raises(CompactorActiveError):
        run_compaction(ROOT, store, settings=settings())
    assert snapshot(store) == before


def test_a_dry_run_reports_the_holder_and_writes_nothing(store: ObjectStore) -> None:
    fill(store)
    official_fence(store)
    before = snapshot(store)
    report = run_compaction(ROOT, store, settings=settings(), dry_run=True)
    assert report.status == "dry_run" and report.compactor["holder"] == "foreign"
    assert snapshot(store) == before


def test_takeover_fences_the_foreign_compactor_and_later_runs_need_no_takeover(
    store: ObjectStore, caplog: pytest.LogCaptureFixture,
) -> None:
    expected = fill(store)
    official_fence(store)
    with caplog.at_level(logging.WARNING):
        report = run_compaction(ROOT, store, settings=settings(), takeover=True)
    assert report.status == "committed" and report.compactor_epoch == 2
    assert report.compactor["holder"] == "foreign"
    assert "taking the compactor epoch over" in caplog.text
    assert scan(store) == expected
    # the fence's marker checkpoint was dropped by the commit
    assert manifest(store).checkpoints and all(
        c.id != r.marker for c in manifest(store).checkpoints
        for r in ClaimStore(store, ROOT).read_epoch(2))
    fill_more(store)
    again = run_compaction(ROOT, store, settings=settings(), policy="full")
    assert again.status == "committed" and again.compactor_epoch == 3
    assert again.compactor["holder"] == "ours"
    # records of the recent epochs are kept (a racing run may still judge one of them)
    paths = [m.path for m in store.list(DbPaths(ROOT).claims_dir)]
    assert {int(p.rsplit("/", 1)[1].split(".")[0]) for p in paths} == {2, 3}, paths


def fill_more(store: ObjectStore) -> None:
    from slatelib.core.row import VALUE
    from tests.compaction_fixtures import NOW_MS, flush_l0

    flush_l0(store, ROOT, [(b"k%03d" % k, 100, VALUE, b"late", None, NOW_MS) for k in range(5)])


def test_a_fresh_database_and_our_own_epoch_compact_without_takeover(store: ObjectStore) -> None:
    expected = fill(store)
    first = run_compaction(ROOT, store, settings=settings())
    assert first.compactor["holder"] == "free" and first.compactor_epoch == 1
    fill_more(store)
    second = run_compaction(ROOT, store, settings=settings(), policy="full")
    assert second.compactor["holder"] == "ours" and second.compactor_epoch == 2
    assert {k: v for k, v in scan(store).items() if v != b"late"} == \
        {k: v for k, v in expected.items() if k not in {b"k%03d" % i for i in range(5)}}


@pytest.mark.parametrize("crash_at", ["before-fence", "after-fence"])
def test_a_run_killed_while_claiming_leaves_an_epoch_the_next_run_recognises(
    store: ObjectStore, crash_at: str,
) -> None:
    """Killed right after its 'claiming' record (before the fence CAS), or right after the
    fence CAS (before the 'claimed' record): the next run without takeover goes on."""
    expected = fill(store)
    flaky = FlakyObjectStore(store)
    if crash_at == "before-fence":
        flaky.crash("put_if_absent", path="/manifest/", when="before")
    else:
        flaky.crash("put", path="/slatelib/claims/", when="before", skip=1)
    with pytest.raises(SimulatedCrash):
        run_compaction(ROOT, flaky, settings=settings(), clock=FakeClock())
    assert manifest(store).compactor_epoch == (0 if crash_at == "before-fence" else 1)
    report = run_compaction(ROOT, store, settings=settings(), clock=FakeClock())
    assert report.status == "committed" and report.compactor["holder"] in ("free", "ours")
    assert scan(store) == expected


def test_a_killed_runs_fence_is_recognised_by_its_marker_after_gc_and_the_marker_dropped(
    store: ObjectStore,
) -> None:
    """Killed after its fence CAS; then a writer moves the manifest on and GC deletes the
    fence version: the latest manifest still carries the marker, the rerun goes on, and its
    own fence drops the killed run's marker (no pin is left behind)."""
    fill(store)
    flaky = FlakyObjectStore(store)
    flaky.crash("put", path="/slatelib/claims/", when="before", skip=1)
    with pytest.raises(SimulatedCrash):
        run_compaction(ROOT, flaky, settings=settings(), clock=FakeClock())
    [rec] = ClaimStore(store, ROOT).read_epoch(1)
    assert rec.state == "claiming"
    assert manifest(store).checkpoint(rec.marker).manifest_id == rec.base_manifest_id + 1
    fill_more(store)
    store.delete(DbPaths(ROOT).manifest(rec.base_manifest_id + 1))
    report = run_compaction(ROOT, store, settings=settings(), clock=FakeClock())
    assert report.status == "committed" and report.compactor["holder"] == "ours"
    assert manifest(store).checkpoint(rec.marker) is None
    assert [c.name for c in manifest(store).checkpoints] == [None]  # the commit's own pin


class ForeignFenceFirst(FlakyObjectStore):
    """Lets an official compactor fence right before our fence CAS (after our checks)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.done = False

    def put_if_absent(self, path: str, data: bytes) -> None:  # type: ignore[override]
        if not self.done and "/manifest/" in path:
            self.done = True
            official_fence(self.inner)
        super().put_if_absent(path, data)


def test_a_foreign_fence_landing_just_before_ours_is_refused_on_the_version_we_would_replace(
    store: ObjectStore,
) -> None:
    fill(store)
    racing = ForeignFenceFirst(store)
    with pytest.raises(CompactorActiveError):
        run_compaction(ROOT, racing, settings=settings())
    m = manifest(store)
    assert m.compactor_epoch == 1 and m.checkpoints == ()  # theirs, without our marker
    [rec] = ClaimStore(store, ROOT).read_epoch(1)
    assert rec.state == "lost"
    with pytest.raises(CompactorActiveError):  # the lost record does not make it ours
        run_compaction(ROOT, store, settings=settings())


# ----------------------------------------------------------------- D5: checks before writes
def corrupt_first_l0(store: ObjectStore, how: str) -> str:
    m = manifest(store)
    handle = m.sst(m.l0[0].sst_id)
    path = DbPaths(ROOT).compacted(handle.id)
    if how == "missing":
        store.delete(path)
    elif how == "index":
        data = bytearray(store.get(path))
        data[handle.info.index_offset + 2] ^= 0xFF
        store.put(path, bytes(data))
    else:  # truncated
        store.put(path, store.get(path)[: handle.info.index_offset + 1])
    return path


@pytest.mark.parametrize("how,error", [("missing", SstMissingError),
                                       ("index", CorruptObjectError),
                                       ("truncated", CorruptObjectError)])
def test_a_damaged_source_sst_is_refused_before_the_fence(
    store: ObjectStore, how: str, error: type[Exception],
) -> None:
    fill(store)
    path = corrupt_first_l0(store, how)
    before = snapshot(store)
    with pytest.raises(error) as err:
        run_compaction(ROOT, store, settings=settings())
    assert path in str(err.value)
    assert snapshot(store) == before


@pytest.mark.parametrize("bad", ["../parent", "/abs/parent", "db/inside", "a//b"])
def test_an_unsafe_external_path_is_refused_before_the_fence(
    store: ObjectStore, bad: str,
) -> None:
    from slatelib.core.manifest import ExternalDb

    fill(store)
    sid = manifest(store).l0[0].sst_id
    update_versioned(ManifestStore(store, ROOT), lambda cur: replace(
        cur.value, external_dbs=(ExternalDb(path=bad, source_checkpoint_id=uuid.uuid4(),
                                            final_checkpoint_id=None, sst_ids=(sid,)),)))
    before = snapshot(store)
    with pytest.raises(CorruptObjectError, match="external"):
        run_compaction(ROOT, store, settings=settings())
    assert snapshot(store) == before


def test_a_hard_destroy_also_removes_our_claim_records(store: ObjectStore) -> None:
    from slatelib.ops.destroy import destroy

    fill(store)
    run_compaction(ROOT, store, settings=settings())
    assert list(store.list(DbPaths(ROOT).claims_dir))
    destroy(ROOT, store, soft=False, clock=FakeClock(now_ms=10**13))
    assert list(store.list(DbPaths(ROOT).claims_dir)) == []


def test_each_input_index_is_read_once_by_the_checks_and_the_split(store: ObjectStore) -> None:
    fill(store, l0s=4)
    m = manifest(store)
    index_at = {DbPaths(ROOT).compacted(v.sst_id): m.sst(v.sst_id).info.index_offset
                for v in m.l0}
    logged = FlakyObjectStore(store)
    reads: list[tuple[str, int]] = []
    inner_get_range = logged.get_range

    def get_range(path: str, start: int, end: int) -> bytes:
        reads.append((path, start))
        return inner_get_range(path, start, end)

    logged.get_range = get_range  # type: ignore[method-assign]
    report = run_compaction(ROOT, logged, settings=settings(), parallelism=2)
    assert report.status == "committed" and len(report.ranges) > 1
    for path, offset in index_at.items():
        assert reads.count((path, offset)) == 1, (path, reads)


def test_claim_records_of_old_epochs_are_pruned_and_recent_ones_kept(store: ObjectStore) -> None:
    from slatelib.core.compactor_claim import CLAIM_EPOCHS_KEPT

    fill(store)
    for _ in range(CLAIM_EPOCHS_KEPT + 3):
        fill_more(store)
        assert run_compaction(ROOT, store, settings=settings()).status == "committed"
    epoch = manifest(store).compactor_epoch
    kept = {int(m.path.rsplit("/", 1)[1].split(".")[0])
            for m in store.list(DbPaths(ROOT).claims_dir)}
    assert kept == set(range(epoch - CLAIM_EPOCHS_KEPT + 1, epoch + 1))


def test_a_run_that_read_the_epoch_before_a_racing_run_fenced_it_still_calls_it_ours(
    store: ObjectStore,
) -> None:
    """K1 of the fault harness: run B read epoch E; run A fences E + 1 (and prunes) before B
    lists the claim records; B's verdict on E must still be 'ours'."""
    from slatelib.ops.compaction.guard import judge_compactor
    from slatelib.ops.compaction.state import read_state
    from slatelib.store.compactions_store import CompactionsStore

    fill(store)
    run_compaction(ROOT, store, settings=settings())  # epoch 1, ours
    state = read_state(ManifestStore(store, ROOT), CompactionsStore(store, ROOT))
    fill_more(store)
    run_compaction(ROOT, store, settings=settings())  # a racing run fences epoch 2
    verdict = judge_compactor(store, ROOT, state, FakeClock())
    assert verdict.epoch == 1 and verdict.holder == "ours"
