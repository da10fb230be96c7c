"""The driver's side of a compaction: fencing, the ``compactions/`` record, the commit CAS,
and the faults of the issue (driver killed before the CAS, a task failing and retried, a
concurrent writer flush, a second compactor, a lost CAS response, a vanished source)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import pytest

from slatelib import DbReader
from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.compactions import (
    Compaction,
    Compactions,
    CompactionStatus,
    TieredCompactionSpec,
    WorkerSpec,
)
from slatelib.core.manifest import Manifest
from slatelib.core.row import VALUE, Row
from slatelib.errors import (
    AlreadyExistsError,
    CommitStateUnknownError,
    CompactorActiveError,
    ConflictError,
    FencedError,
    UnavailableError,
)
from slatelib.ids import Ulid, ulid_from_str
from slatelib.objstore import ObjectStore, RetryingObjectStore, open_raw_store, open_store
from slatelib.ops.compaction import (
    CompactionTask,
    ThreadTaskRunner,
    run_compaction,
    run_compaction_task,
)
from slatelib.ops.engine import TaskOutcome
from slatelib.paths import DbPaths
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash
from slatelib.txn import DEFAULT_MAX_ATTEMPTS, update_versioned
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db

ROOT = "db"


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}/")


def settings(**compaction: object) -> Settings:
    # these runs are about l0 compactions (the settings default is size-tiered)
    base = {"policy": "l0", "min_range_bytes": 1}
    base.update(compaction)
    return Settings(sst=SstSettings(block_size=256, min_filter_keys=4),
                    compaction=CompactionSettings(**base))  # type: ignore[arg-type]


def fill(store: ObjectStore, l0s: int = 3, seed: int = 1) -> dict[bytes, bytes]:
    new_db(store, ROOT)
    rng = random.Random(seed)
    for s in range(1, l0s + 1):
        flush_l0(store, ROOT, [(b"k%03d" % k, s, VALUE, b"v%d-%d" % (s, k), None, NOW_MS)
                               for k in rng.sample(range(200), 60)])
    return scan(store)


def scan(store: ObjectStore) -> dict[bytes, bytes]:
    with DbReader.open(ROOT, store, mode="latest") as r:
        return dict(r.scan())


def manifest(store: ObjectStore) -> Manifest:
    return ManifestStore(store, ROOT).read_latest().value


def compactions(store: ObjectStore) -> Compactions:
    return CompactionsStore(store, ROOT).read_latest().value


def commits(store: ObjectStore) -> int:
    """How many manifest versions changed the sorted runs (each compaction commit does)."""
    ms = ManifestStore(store, ROOT)
    trees = [ms.read(i).value.compacted for i in ms.list_ids()]
    return sum(1 for a, b in zip(trees, trees[1:], strict=False) if a != b)


def sst_objects(store: ObjectStore) -> set[str]:
    return {m.path for m in store.list(DbPaths(ROOT).compacted_dir)}


def referenced(store: ObjectStore) -> set[str]:
    return {DbPaths(ROOT).compacted(i) for i in manifest(store).referenced_sst_ids()}


class Hook:
    """A task runner that runs the tasks, then does something before the commit."""

    def __init__(self, action: object, store: ObjectStore | None = None) -> None:
        self.action = action
        self.inner = ThreadTaskRunner(2, partial(run_compaction_task, store=store))

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        out = self.inner(tasks)
        self.action()  # type: ignore[operator]
        return out


# ------------------------------------------------------------------------ the happy path
def test_compaction_fences_records_and_completes_like_0_17(store: ObjectStore) -> None:
    before = fill(store)
    sources = manifest(store).l0
    report = run_compaction(ROOT, store, settings=settings(), parallelism=2, clock=FakeClock())
    m = manifest(store)
    assert m.compactor_epoch == 1 == report.compactor_epoch
    assert m.l0 == () and [r.id for r in m.compacted] == [0]
    assert m.last_compacted_l0_sst_view_id == sources[0].id
    state = compactions(store)
    assert state.compactor_epoch == 1
    [entry] = state.recent_compactions
    assert entry.status == CompactionStatus.COMPLETED
    assert isinstance(entry.spec, TieredCompactionSpec)
    assert entry.spec.l0_view_ids == tuple(v.id for v in sources)
    assert entry.spec.destination == 0 and entry.worker is not None
    assert [o.id for o in entry.output_ssts] == [v.sst_id for v in m.compacted[0].views]
    assert scan(store) == before


def test_commit_adds_a_checkpoint_pinning_the_replaced_ssts(store: ObjectStore) -> None:
    fill(store)
    clock = FakeClock()
    run_compaction(ROOT, store, settings=settings(checkpoint_lifetime=900), clock=clock)
    ms = ManifestStore(store, ROOT)
    latest = ms.read_latest()
    [cp] = latest.value.checkpoints
    assert cp.expire_time_s == clock.now_ms() // 1000 + 900 and cp.name is None
    pinned = ms.read(cp.manifest_id).value
    assert len(pinned.l0) == 3 and pinned.compacted == ()
    assert cp.manifest_id == latest.id - 1


def test_dry_run_and_nothing_to_do_write_nothing(store: ObjectStore) -> None:
    fill(store)
    objects = {m.path for m in store.list(ROOT)}
    report = run_compaction(ROOT, store, settings=settings(), dry_run=True, parallelism=3)
    assert report.status == "dry_run" and len(report.ranges) == 3
    assert {m.path for m in store.list(ROOT)} == objects
    run_compaction(ROOT, store, settings=settings())
    objects = {m.path for m in store.list(ROOT)}
    assert run_compaction(ROOT, store, settings=settings()).status == "nothing_to_do"
    assert {m.path for m in store.list(ROOT)} == objects


def test_starting_compactor_takes_over_entries_of_the_fenced_one(store: ObjectStore) -> None:
    fill(store)
    spec = TieredCompactionSpec(destination=7)
    old = Compactions(4, (
        Compaction(Ulid(1), spec, CompactionStatus.SCHEDULED, worker=WorkerSpec("w")),
        Compaction(Ulid(2), spec, CompactionStatus.RUNNING, worker=WorkerSpec("w", 5)),
        Compaction(Ulid(3), spec, CompactionStatus.COMPLETED),
        Compaction(Ulid(4), spec, CompactionStatus.FAILED),
    ))
    CompactionsStore(store, ROOT).write(1, old)
    update_versioned(ManifestStore(store, ROOT),
                     lambda cur: replace(cur.value, compactor_epoch=4))
    # epoch 4 is not slatelib's: taking it over needs takeover (the operator's word)
    report = run_compaction(ROOT, store, settings=settings(), takeover=True)
    assert report.compactor_epoch == 5
    state = compactions(store)
    by_id = {c.id: c for c in state.recent_compactions}
    assert by_id[Ulid(1)].status == CompactionStatus.SUBMITTED and by_id[Ulid(1)].worker is None
    assert Ulid(2) not in by_id and Ulid(3) not in by_id  # failed, then trimmed
    assert report.destination == 8  # above the Submitted entry's reserved destination


def test_a_compactions_file_with_a_newer_epoch_is_a_starting_compactor_and_refused(
    store: ObjectStore,
) -> None:
    fill(store)
    CompactionsStore(store, ROOT).write(1, Compactions(compactor_epoch=5))
    latest = ManifestStore(store, ROOT).read_latest()
    with pytest.raises(CompactorActiveError, match="compactions file claims epoch 5"):
        run_compaction(ROOT, store, settings=settings())
    assert ManifestStore(store, ROOT).read_latest() == latest  # nothing written
    # with takeover, the claim in the compactions file still fences us: it is newer
    with pytest.raises(FencedError):
        run_compaction(ROOT, store, settings=settings(), takeover=True)
    assert manifest(store).compacted == ()


# ---------------------------------------------------------------------------------- faults
def test_driver_killed_before_the_cas_loses_nothing_and_a_rerun_recovers(
    store: ObjectStore,
) -> None:
    before = fill(store)
    trees = (manifest(store).l0, manifest(store).compacted)
    flaky = FlakyObjectStore(store)
    flaky.crash("put_if_absent", path="/manifest/", when="before", skip=1)  # not the fence
    with pytest.raises(SimulatedCrash):
        run_compaction(ROOT, flaky, settings=settings(), clock=FakeClock())
    assert (manifest(store).l0, manifest(store).compacted) == trees
    assert scan(store) == before
    [stale] = compactions(store).recent_compactions
    assert stale.status == CompactionStatus.COMPACTED  # outputs recorded, never committed
    orphans = sst_objects(store) - referenced(store)
    assert len(orphans) >= 1
    report = run_compaction(ROOT, store, settings=settings(), clock=FakeClock())
    assert report.status == "committed" and scan(store) == before
    statuses = {c.id: c.status for c in compactions(store).recent_compactions}
    assert stale.id not in statuses or statuses[stale.id] == CompactionStatus.FAILED
    assert not orphans & referenced(store)


def test_a_task_failing_once_is_retried_and_only_the_retry_is_referenced(
    store: ObjectStore,
) -> None:
    before = fill(store)
    flaky = FlakyObjectStore(store)
    # the first output SST of some task lands, then the executor "loses" the response
    flaky.fail_after("put_if_absent", path="/compacted/", times=1)
    runner = ThreadTaskRunner(2, partial(run_compaction_task, store=flaky))
    existing = sst_objects(store)
    report = run_compaction(ROOT, store, settings=settings(task_attempts=2), parallelism=2,
                            runner=runner, clock=FakeClock())
    assert report.task_runs == report.tasks + 1
    new = sst_objects(store) - existing
    live = referenced(store)
    orphans = new - live
    assert len(orphans) == 1  # the failed attempt's upload
    assert len(live & new) == len(report.outputs["ssts"])
    assert scan(store) == before


def test_a_task_that_keeps_failing_fails_the_job_and_commits_nothing(
    store: ObjectStore,
) -> None:
    fill(store)
    flaky = FlakyObjectStore(store)
    flaky.fail_before("get_range", path="/compacted/", times=None)
    runner = ThreadTaskRunner(1, partial(run_compaction_task, store=flaky))
    with pytest.raises(UnavailableError, match="failed \\(attempt 2\\)"):
        run_compaction(ROOT, store, settings=settings(task_attempts=2), runner=runner,
                       clock=FakeClock())
    assert len(manifest(store).l0) == 3
    [entry] = compactions(store).recent_compactions
    assert entry.status == CompactionStatus.FAILED


def test_a_writer_flush_during_the_job_is_kept_by_the_rebased_commit(
    store: ObjectStore,
) -> None:
    before = fill(store)
    new_row: Row = (b"fresh", 99, VALUE, b"flushed meanwhile", None, NOW_MS)
    late: list[object] = []

    def writer_flushes(_seconds: float) -> None:  # runs right before our commit's CAS
        late.append(flush_l0(store, ROOT, [new_row]))

    flaky = FlakyObjectStore(store, sleep=writer_flushes)
    flaky.delay("put_if_absent", path="/manifest/", seconds=1, skip=1, times=1)
    report = run_compaction(ROOT, flaky, settings=settings(), clock=FakeClock())
    m = manifest(store)
    assert report.rebases == 1  # the CAS lost to the flush, then was rebased onto it
    assert m.l0 == (late[0],)
    assert scan(store) == {**before, b"fresh": b"flushed meanwhile"}
    # the writer's next merge keeps it: it is newer than the last compacted L0 view
    assert m.last_compacted_l0_sst_view_id != late[0].id  # type: ignore[attr-defined]


def test_l0_views_flushed_while_tasks_run_are_not_compacted_but_kept(
    store: ObjectStore,
) -> None:
    before = fill(store)
    new_row: Row = (b"fresh", 99, VALUE, b"new", None, NOW_MS)
    runner = Hook(lambda: flush_l0(store, ROOT, [new_row]))
    report = run_compaction(ROOT, store, settings=settings(), runner=runner, clock=FakeClock())
    assert len(report.sources) == 3 and len(manifest(store).l0) == 1
    assert scan(store) == {**before, b"fresh": b"new"}


def test_a_second_compactor_started_during_the_job_fences_the_first(
    store: ObjectStore,
) -> None:
    before = fill(store)
    second: list[object] = []
    runner = Hook(lambda: second.append(run_compaction(ROOT, store, settings=settings())))
    with pytest.raises(FencedError):
        run_compaction(ROOT, store, settings=settings(), runner=runner, clock=FakeClock())
    m = manifest(store)
    assert m.compactor_epoch == 2
    assert [v.sst_id for r in m.compacted for v in r.views] == \
        [ulid_from_str(s) for s in second[0].outputs["ssts"]]  # type: ignore[attr-defined]
    assert scan(store) == before
    entries = {c.status for c in compactions(store).recent_compactions}
    assert CompactionStatus.RUNNING not in entries and CompactionStatus.COMPACTED not in entries


def test_a_source_removed_during_the_job_aborts_the_commit(store: ObjectStore) -> None:
    fill(store)

    def drop_oldest_l0() -> None:
        def mutate(cur: object) -> Manifest:
            m: Manifest = cur.value  # type: ignore[attr-defined]
            return m.with_trees(l0=m.l0[:-1])

        update_versioned(ManifestStore(store, ROOT), mutate)  # type: ignore[arg-type]

    with pytest.raises(ConflictError, match="is gone"):
        run_compaction(ROOT, store, settings=settings(), runner=Hook(drop_oldest_l0),
                       clock=FakeClock())
    assert manifest(store).compacted == ()
    [entry] = compactions(store).recent_compactions
    assert entry.status == CompactionStatus.FAILED


def test_a_lost_commit_response_is_resolved_by_reading_back_never_twice() -> None:
    raw = open_raw_store(f"memory://{uuid.uuid4().hex}/")
    before = fill(raw)
    flaky = FlakyObjectStore(raw)
    # the commit lands; its response is lost (the fence and record writes go through)
    flaky.fail_after("put_if_absent", path="/manifest/", skip=1, times=1)
    store = RetryingObjectStore(flaky, sleep=lambda s: None)
    report = run_compaction(ROOT, store, settings=settings(), clock=FakeClock())
    assert report.status == "committed"
    assert commits(raw) == 1  # applied once
    assert scan(raw) == before


def test_an_unknown_commit_outcome_is_read_back_from_the_manifest() -> None:
    raw = open_raw_store(f"memory://{uuid.uuid4().hex}/")
    before = fill(raw)
    flaky = FlakyObjectStore(raw)
    flaky.fail_after("put_if_absent", path="/manifest/", skip=1, times=1,
                     error=lambda: CommitStateUnknownError("lost"))
    report = run_compaction(ROOT, flaky, settings=settings(), clock=FakeClock())
    assert report.status == "committed" and report.rebases == 0
    assert commits(raw) == 1
    assert scan(raw) == before


def test_a_commit_that_landed_is_recognised_even_after_the_update_timeout() -> None:
    """The commit CAS lands but its response is lost, and by the time the loop re-reads the
    manifest ``manifest_update_timeout`` has passed: the read-back still finds the commit,
    so the job reports it committed and marks it Completed (not Failed with an error)."""
    raw = open_raw_store(f"memory://{uuid.uuid4().hex}/")
    before = fill(raw)
    clock = FakeClock()

    def lost_after_timeout() -> BaseException:
        clock.advance(60)
        return CommitStateUnknownError("lost")

    flaky = FlakyObjectStore(raw)
    flaky.fail_after("put_if_absent", path="/manifest/", skip=1, times=1,
                     error=lost_after_timeout)
    report = run_compaction(ROOT, flaky, settings=settings(manifest_update_timeout=30),
                            clock=clock)
    assert report.status == "committed"
    assert commits(raw) == 1 and scan(raw) == before
    [entry] = compactions(raw).recent_compactions
    assert entry.status == CompactionStatus.COMPLETED


def test_a_commit_whose_outcome_stays_unknown_is_left_compacted_for_the_next_run() -> None:
    """The commit lands, its response is lost, and the manifest cannot be read back (the
    store stays unavailable): the job says the outcome is unknown and leaves the entry
    Compacted, never Failed; the next compaction run's takeover finds the outputs in the
    manifest and marks it Completed."""
    raw = open_raw_store(f"memory://{uuid.uuid4().hex}/")
    before = fill(raw)
    flaky = FlakyObjectStore(raw)

    def lost_then_unreadable() -> BaseException:
        flaky.fail_before("list", path="/manifest/", times=None)
        flaky.fail_before("get", path="/manifest/", times=None)
        return CommitStateUnknownError("lost")

    flaky.fail_after("put_if_absent", path="/manifest/", skip=1, times=1,
                     error=lost_then_unreadable)
    with pytest.raises(CommitStateUnknownError, match="unknown") as info:
        run_compaction(ROOT, flaky, settings=settings(), clock=FakeClock())
    assert "stays Compacted" in str(info.value)
    assert commits(raw) == 1 and scan(raw) == before  # it had landed
    [entry] = compactions(raw).recent_compactions
    assert entry.status == CompactionStatus.COMPACTED

    flush_l0(raw, ROOT, [(b"k999", 9, VALUE, b"new", None, NOW_MS)])
    seen: dict[int, CompactionStatus] = {}  # after the takeover, before the next commit

    def look() -> None:
        seen.update((c.id, c.status) for c in compactions(raw).recent_compactions)

    run_compaction(ROOT, raw, settings=settings(), runner=Hook(look, raw), clock=FakeClock())
    assert seen[entry.id] == CompactionStatus.COMPLETED
    assert scan(raw) == {**before, b"k999": b"new"}


def test_a_commit_that_keeps_conflicting_gives_up_at_the_update_timeout(
    store: ObjectStore,
) -> None:
    before = fill(store)
    flaky = FlakyObjectStore(store)
    # every commit attempt loses its CAS (the fence and record writes go through)
    flaky.fail_before("put_if_absent", path="/manifest/", skip=1, times=None,
                      error=lambda: AlreadyExistsError("taken"))
    with pytest.raises(UnavailableError, match="compaction commit: not done within 5s"):
        run_compaction(ROOT, flaky, settings=settings(manifest_update_timeout=5),
                       clock=FakeClock())
    assert manifest(store).compacted == () and scan(store) == before
    [entry] = compactions(store).recent_compactions
    assert entry.status == CompactionStatus.FAILED


def _writes_of_one_run() -> int:
    store = open_store(f"memory://{uuid.uuid4().hex}/")
    fill(store)
    flaky = FlakyObjectStore(store)
    run_compaction(ROOT, flaky, settings=settings(), clock=FakeClock(),
                   runner=ThreadTaskRunner(1, partial(run_compaction_task, store=flaky)))
    return flaky.calls["put_if_absent"]


@pytest.mark.parametrize("when", ["before", "after"])
def test_the_driver_killed_at_any_write_loses_nothing_and_a_rerun_completes(when: str) -> None:
    writes = _writes_of_one_run()
    assert writes >= 7  # fence x2, record, outputs, compacted, commit, completed
    for n in range(writes):
        store = open_store(f"memory://{uuid.uuid4().hex}/")
        before = fill(store)
        flaky = FlakyObjectStore(store)
        flaky.crash("put_if_absent", when=when, skip=n)  # type: ignore[arg-type]
        with pytest.raises(SimulatedCrash):
            run_compaction(ROOT, flaky, settings=settings(), clock=FakeClock(),
                           runner=ThreadTaskRunner(1, partial(run_compaction_task, store=flaky)))
        assert scan(store) == before, f"crash at write {n} ({when}) lost data"
        again = run_compaction(ROOT, store, settings=settings(), clock=FakeClock())
        assert again.status in ("committed", "nothing_to_do")
        m = manifest(store)
        assert m.l0 == () and len(m.compacted) == 1 and commits(store) == 1
        assert scan(store) == before
        active = [c for c in compactions(store).recent_compactions
                  if c.status not in (CompactionStatus.COMPLETED, CompactionStatus.FAILED)]
        assert active == []


def test_a_corrupted_source_block_fails_the_job_and_commits_nothing(store: ObjectStore) -> None:
    from slatelib.errors import ChecksumMismatchError

    before = fill(store)
    trees = (manifest(store).l0, manifest(store).compacted)
    victim = DbPaths(ROOT).compacted(manifest(store).l0[1].sst_id)
    data = bytearray(store.get(victim))
    data[10] ^= 0x55  # block 0
    store.delete(victim)
    store.put(victim, bytes(data))
    with pytest.raises(ChecksumMismatchError) as err:
        run_compaction(ROOT, store, settings=settings(), parallelism=2, clock=FakeClock())
    assert victim in str(err.value) and "block 0" in str(err.value)
    assert err.value.path == victim and err.value.block == 0
    assert (manifest(store).l0, manifest(store).compacted) == trees
    [entry] = compactions(store).recent_compactions
    assert entry.status == CompactionStatus.FAILED
    store.delete(victim)
    store.put(victim, bytes(data[:10]) + bytes([data[10] ^ 0x55]) + bytes(data[11:]))
    assert run_compaction(ROOT, store, settings=settings()).status == "committed"
    assert scan(store) == before


def test_a_commit_that_lands_on_its_last_attempt_with_a_lost_response_is_recognised() -> None:
    """Every commit attempt but the last is lost before it lands; the last lands and its
    response is lost too: the loop reads the manifest back once more instead of giving up
    with a conflict, so the job reports the commit and never marks the entry Failed."""
    raw = open_raw_store(f"memory://{uuid.uuid4().hex}/")
    before = fill(raw)
    flaky = FlakyObjectStore(raw)
    attempts = DEFAULT_MAX_ATTEMPTS
    flaky.fail_before("put_if_absent", path="/manifest/", skip=1, times=attempts - 1,
                      error=lambda: CommitStateUnknownError("lost"))
    flaky.fail_after("put_if_absent", path="/manifest/", skip=attempts, times=1,
                     error=lambda: CommitStateUnknownError("lost"))
    report = run_compaction(ROOT, flaky, settings=settings(manifest_update_timeout=3600),
                            clock=FakeClock())
    assert report.status == "committed"
    assert commits(raw) == 1 and scan(raw) == before
    [entry] = compactions(raw).recent_compactions
    assert entry.status == CompactionStatus.COMPLETED


def test_a_run_that_failed_after_its_fence_leaves_no_marker_behind_the_next_run(
        store: ObjectStore) -> None:
    """Finding K3 on a plain database: a run that fails after fencing (here a task fails
    with a damaged block) keeps its fence marker checkpoint, which pins the old SSTs for a
    day; the next run's fence drops it."""
    live = fill(store, l0s=3)

    def broken(task: CompactionTask) -> TaskOutcome:
        from slatelib.errors import CorruptObjectError
        from slatelib.ops.engine import TaskFailure
        return TaskFailure.of(task.index, CorruptObjectError("block 2 is damaged"))

    with pytest.raises(Exception, match="block 2 is damaged"):
        run_compaction(ROOT, store, settings=settings(),
                       runner=ThreadTaskRunner(2, task_fn=broken))
    stale = {c.id for c in manifest(store).checkpoints}
    assert stale, "the failed run's fence marker"
    run_compaction(ROOT, store, settings=settings())
    assert not stale & {c.id for c in manifest(store).checkpoints}
    assert scan(store) == live
