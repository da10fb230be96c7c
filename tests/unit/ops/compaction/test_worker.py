"""Worker mode without Spark and without the official package: a test coordinator (the
steps 0.17's coordinator takes, see docs/rfcs/0009-compaction-worker.md) schedules
compactions in ``compactions/`` and commits what the worker reports; the worker claims,
executes, heartbeats and reports. Faults: a job reclaimed or claimed by another worker
while it runs, a job resumed from another worker's context, a failing task, a stop that
hands jobs back."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from dataclasses import replace

import pytest

from slatelib import DbReader
from slatelib.config import CompactionSettings, Settings
from slatelib.core.compactions import (
    Compaction,
    Compactions,
    CompactionStatus,
    Subcompaction,
    TieredCompactionContext,
    WorkerSpec,
)
from slatelib.core.ranges import BytesRange
from slatelib.core.row import VALUE, Row
from slatelib.errors import InvalidArgumentError
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.compaction import CompactionTask, ThreadTaskRunner, run_compaction_task
from slatelib.ops.compaction.worker import CompactionWorker, WorkerDb, WorkerOptions
from slatelib.ops.engine import TaskOutcome
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sequenced import Versioned
from slatelib.txn import update_versioned
from tests.compaction_fixtures import (
    commit_reported,
    compaction_entry,
    flush_l0,
    new_db,
    schedule_compaction,
)

ROOT = "db"
SETTINGS = Settings(compaction=CompactionSettings(min_range_bytes=1, policy="l0"))
FAST = WorkerOptions(poll_interval_s=0.02, heartbeat_interval_s=0.05, heartbeat_timeout_s=1.0,
                     until_idle=True)


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}/")


def write_l0s(store: ObjectStore, n: int = 4, keys: int = 300, seed: int = 1,
              ) -> dict[bytes, bytes]:
    """``n`` L0 SSTs of overlapping keys; returns what a reader must see."""
    rng = random.Random(seed)
    new_db(store, ROOT)
    model: dict[bytes, bytes] = {}
    seq = 0
    for _ in range(n):
        rows: list[Row] = []
        for k in rng.sample(range(keys * 2), keys):
            seq += 1
            key, value = b"k%06d" % k, b"v%d" % seq
            rows.append((key, seq, VALUE, value, None, None))
            model[key] = value
        flush_l0(store, ROOT, rows)
    return model


def schedule(store: ObjectStore) -> int:
    return schedule_compaction(store, ROOT)


def entry(store: ObjectStore, cid: int) -> Compaction:
    return compaction_entry(store, ROOT, cid)


def commit(store: ObjectStore, cid: int) -> None:
    commit_reported(store, ROOT, cid)


def read_all(store: ObjectStore) -> dict[bytes, bytes]:
    with DbReader.open(ROOT, store, mode="latest") as r:
        return dict(r.scan(None, None))


def worker(store: ObjectStore, options: WorkerOptions = FAST, **kw: object) -> CompactionWorker:
    return CompactionWorker(lambda: [WorkerDb("db", ROOT, store)], settings=SETTINGS,
                            options=options, slots=3, **kw)  # type: ignore[arg-type]


def versions(store: ObjectStore) -> list[Compactions]:
    cs = CompactionsStore(store, ROOT)
    return [cs.read(i).value for i in cs.list_ids()]


def test_the_worker_claims_executes_and_reports_and_the_commit_reads_the_same(
        store: ObjectStore) -> None:
    model = write_l0s(store)
    cid = schedule(store)
    w = worker(store)
    report = w.run()
    assert report["totals"]["compacted"] == 1 and report["totals"]["failed"] == 0
    c = entry(store, cid)
    assert c.status == CompactionStatus.COMPACTED and c.ctx is None
    assert c.worker is not None and c.worker.worker_id == w.worker_id
    assert len(c.output_ssts) >= 2  # split into several ranges
    # the versions the worker wrote: Running with our id, then Compacted
    seen = [v.compaction(cid).status for v in versions(store)  # type: ignore[union-attr]
            if v.compaction(cid) is not None]
    assert seen[0] == CompactionStatus.SCHEDULED and seen[-1] == CompactionStatus.COMPACTED
    assert CompactionStatus.RUNNING in seen
    assert all(v.compactor_epoch == 1 for v in versions(store))  # never touched
    manifest_before = ManifestStore(store, ROOT).read_latest().id
    assert ManifestStore(store, ROOT).read_latest().id == manifest_before  # no manifest write
    commit(store, cid)
    m = ManifestStore(store, ROOT).read_latest().value
    assert not m.l0 and len(m.compacted) == 1
    assert read_all(store) == model


def slow_task(delay_s: float, after: int = 0):  # type: ignore[no-untyped-def]
    def run(task: CompactionTask) -> TaskOutcome:
        if task.index >= after:
            time.sleep(delay_s)
        return run_compaction_task(task)
    return run


def start_slow(store: ObjectStore, cid: int, delay_s: float,
               ) -> tuple[CompactionWorker, threading.Thread]:
    """A worker with slow tasks, running in a thread, once it holds ``cid`` Running."""
    w = worker(store, replace(FAST, until_idle=False),
               runner=ThreadTaskRunner(3, task_fn=slow_task(delay_s)))
    t = threading.Thread(target=w.run)
    t.start()
    deadline = time.monotonic() + 10
    while entry(store, cid).status != CompactionStatus.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return w, t


def test_a_job_reclaimed_while_it_runs_is_never_reported(store: ObjectStore) -> None:
    write_l0s(store)
    cid = schedule(store)
    w, t = start_slow(store, cid, 0.4)

    def reclaim(cur: Versioned[Compactions]) -> Compactions:  # the coordinator's timeout
        return replace(cur.value, recent_compactions=tuple(
            replace(c, status=CompactionStatus.SCHEDULED, worker=None) if c.id == cid else c
            for c in cur.value.recent_compactions))

    update_versioned(CompactionsStore(store, ROOT), reclaim)
    time.sleep(0.1)
    w.stop()
    t.join(20)
    report = w.report(0)
    c = entry(store, cid)
    # reclaimed: the worker either stopped the job (lost) or, on its next poll, claimed the
    # job again as a new claim; it never reported the first claim's outputs
    assert report["totals"]["lost"] >= 1
    assert c.status in (CompactionStatus.SCHEDULED, CompactionStatus.RUNNING,
                        CompactionStatus.COMPACTED)
    statuses = [v.compaction(cid).status for v in versions(store)]  # type: ignore[union-attr]
    after_reclaim = statuses[statuses.index(CompactionStatus.SCHEDULED, 1):]
    assert after_reclaim[0] == CompactionStatus.SCHEDULED
    if CompactionStatus.COMPACTED in after_reclaim:  # only through a fresh claim
        assert CompactionStatus.RUNNING in after_reclaim[:after_reclaim.index(
            CompactionStatus.COMPACTED)]


def test_a_job_claimed_by_another_worker_meanwhile_is_dropped(store: ObjectStore) -> None:
    write_l0s(store)
    cid = schedule(store)
    w, t = start_slow(store, cid, 0.4)
    other = WorkerSpec("01JOTHERWORKER000000000000", 1)
    update_versioned(CompactionsStore(store, ROOT), lambda cur: replace(
        cur.value, recent_compactions=tuple(replace(c, worker=other) if c.id == cid else c
                                            for c in cur.value.recent_compactions)))
    deadline = time.monotonic() + 10
    while w.report(0)["totals"]["lost"] == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    w.stop()
    t.join(20)
    c = entry(store, cid)
    assert c.status == CompactionStatus.RUNNING and c.worker == other  # untouched since


def test_a_job_resumes_from_another_workers_context(store: ObjectStore) -> None:
    """The first range was finished by a worker that died: its SSTs are kept, only the
    rest is compacted, and the committed run reads the same."""
    model = write_l0s(store)
    cid = schedule(store)
    # a first worker runs the job up to its first range, then dies (we take its outputs)
    first = worker(store, replace(FAST, max_concurrent=1),
                   runner=ThreadTaskRunner(3, task_fn=slow_task(0.0)))
    first.run()
    done = entry(store, cid)
    outs = done.output_ssts
    assert len(outs) >= 2
    ranges = [BytesRange.half_open(None, outs[1].info.first_entry),
              BytesRange.half_open(outs[1].info.first_entry, None)]
    ctx = TieredCompactionContext((Subcompaction(ranges[0], outs[:1]),
                                   Subcompaction(ranges[1], ())), 0)
    update_versioned(CompactionsStore(store, ROOT), lambda cur: replace(
        cur.value, recent_compactions=tuple(
            replace(c, status=CompactionStatus.SCHEDULED, worker=None, output_ssts=(),
                    ctx=ctx) if c.id == cid else c for c in cur.value.recent_compactions)))
    second = worker(store)
    report = second.run()
    assert report["databases"][0]["ranges_resumed"] == 1
    c = entry(store, cid)
    assert c.status == CompactionStatus.COMPACTED
    assert c.output_ssts[0].id == outs[0].id  # kept, not redone
    assert all(o.id != outs[0].id for o in c.output_ssts[1:])
    commit(store, cid)
    assert read_all(store) == model


def test_heartbeats_publish_the_ranges_and_each_finished_ranges_ssts(
        store: ObjectStore) -> None:
    write_l0s(store)
    cid = schedule(store)
    w = worker(store, replace(FAST, until_idle=True),
               runner=ThreadTaskRunner(1, task_fn=slow_task(0.3, after=1)))
    w.run()
    contexts = [v.compaction(cid).ctx for v in versions(store)  # type: ignore[union-attr]
                if v.compaction(cid) is not None and v.compaction(cid).ctx is not None]  # type: ignore[union-attr]
    assert contexts, "no context was published while the job ran"
    assert any(sum(len(s.output_ssts) for s in ctx.subcompactions) >= 1
               and any(not s.output_ssts for s in ctx.subcompactions) for ctx in contexts)
    assert entry(store, cid).status == CompactionStatus.COMPACTED


def failing(task: CompactionTask) -> TaskOutcome:
    from slatelib.errors import CorruptObjectError
    from slatelib.ops.engine import TaskFailure
    return TaskFailure.of(task.index, CorruptObjectError("bad block 3 of sst X"))


def test_a_failing_job_is_handed_back_and_not_claimed_again_at_once(
        store: ObjectStore) -> None:
    write_l0s(store)
    cid = schedule(store)
    w = worker(store, replace(FAST, until_idle=False, run_for_s=0.5),
               runner=ThreadTaskRunner(2, task_fn=failing))
    report = w.run()
    db = report["databases"][0]
    assert db["failed"] == 1 and db["claimed"] == 1 and db["released"] == 1
    assert "bad block 3" in db["last_error"]["message"]
    c = entry(store, cid)
    assert c.status == CompactionStatus.SCHEDULED and c.worker is None


def test_stop_with_release_hands_running_jobs_back(store: ObjectStore) -> None:
    write_l0s(store)
    cid = schedule(store)
    w, t = start_slow(store, cid, 0.5)
    w.stop(release=True)
    t.join(20)
    c = entry(store, cid)
    assert c.status == CompactionStatus.SCHEDULED and c.worker is None


def test_until_idle_returns_at_once_with_nothing_scheduled(store: ObjectStore) -> None:
    write_l0s(store, n=1)
    report = worker(store).run()
    assert report["totals"]["claimed"] == 0 and report["polls"] == 1


@pytest.mark.parametrize(("opts", "match"), [
    (WorkerOptions(max_concurrent=0), "--max-concurrent"),
    (WorkerOptions(heartbeat_interval_s=20, heartbeat_timeout_s=30), "at most half"),
    (WorkerOptions(run_for_s=-1), "--run-for"),
])
def test_bad_options_are_refused(store: ObjectStore, opts: WorkerOptions, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        worker(store, opts)


def test_the_workers_outputs_keep_the_databases_sst_options(store: ObjectStore) -> None:
    """As a compaction run's (docs/rfcs/0019-compaction-sst-options.md): the codec and the
    prefix filter of the inputs; without the filter's extractor the job is handed back,
    named in the report."""
    from slatelib.config import SstSettings
    from slatelib.core.filter_policy import FilterPolicySpec, PrefixExtractorSpec
    from slatelib.core.manifest import CompressionCodec
    from slatelib.format.sst import SstWriterOptions
    from slatelib.paths import DbPaths
    from slatelib.store.sst_reader import SstReader

    opts = SstWriterOptions(codec=CompressionCodec.LZ4, min_filter_keys=1, filter_policies=(
        FilterPolicySpec(8, PrefixExtractorSpec("two", fixed=2), whole_key=False),))
    new_db(store, ROOT)
    for seq in (1, 2):
        flush_l0(store, ROOT, [(b"k%05d" % i, seq, VALUE, b"v", None, None)
                               for i in range(200)], options=opts)
    cid = schedule(store)
    refused = worker(store).run()
    assert refused["totals"]["failed"] == 1
    assert "_bf:p=two:wh=0" in json.dumps(refused)
    with_extractor = replace(SETTINGS, sst=SstSettings(prefix_extractors=(("two", "fixed:2"),)))
    w = CompactionWorker(lambda: [WorkerDb("db", ROOT, store)], settings=with_extractor,
                         options=FAST, slots=2)
    assert w.run()["totals"]["compacted"] == 1
    for out in entry(store, cid).output_ssts:
        assert out.info.compression == CompressionCodec.LZ4
        reader = SstReader(store, DbPaths(ROOT).compacted(out.id), out.handle())
        assert list(reader.filter_entries() or {}) == ["_bf:p=two:wh=0"]


def test_the_status_shows_each_running_jobs_heartbeat_age(store: ObjectStore) -> None:
    """What ``slatelib_compaction_heartbeat_lag_seconds`` is built from: the age grows
    while no heartbeat lands and falls back once one does; ``on_status`` gets the status
    after every poll."""
    write_l0s(store)
    schedule(store)
    gate = threading.Event()

    def held(task: CompactionTask) -> TaskOutcome:
        gate.wait(30)
        return run_compaction_task(task)

    published: list[dict[str, object]] = []
    slow_beats = replace(FAST, until_idle=True, heartbeat_interval_s=10.0,
                         heartbeat_timeout_s=60.0)
    w = worker(store, slow_beats, runner=ThreadTaskRunner(3, task_fn=held),
               on_status=published.append)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()

    def age() -> float | None:
        dbs = w.status()["databases"]
        running = dbs[0]["running"] if dbs else []
        return running[0]["heartbeat_age_s"] if running else None

    try:
        deadline = time.monotonic() + 30
        while age() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        first = age()
        assert first is not None
        time.sleep(0.3)
        later = age()
        assert later is not None and later >= first + 0.25
        w.heartbeat_once()
        after = age()
        assert after is not None and after < later - 0.2
    finally:
        gate.set()
        t.join(30)
    assert not t.is_alive()
    assert published and published[-1]["state"] == "stopped"
    assert any(d["running"] for s in published for d in s["databases"])  # type: ignore[attr-defined]
