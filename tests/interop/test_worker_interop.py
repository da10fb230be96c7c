"""Worker mode against official 0.17 coordinators (``compactor_options.worker = null``).

The official ``Db`` plans compactions with its size-tiered scheduler, marks them Scheduled
and commits what a worker reports; slatelib's :class:`CompactionWorker` claims and
executes them. Checked: every compaction is executed by our worker and committed by the
official coordinator (``Admin.read_compactions``), the official reader reads exactly the
acknowledged writes, a worker SIGKILLed mid-job has its job reclaimed and resumed from the
ranges it finished, two workers never execute the same claim, and the same on S3.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from slatedb.uniffi import CompactionStatus as OfficialStatus
from slatedb.uniffi import Settings as OfficialSettings

from slatelib.config import CompactionSettings, Settings
from slatelib.core.compactions import Compactions, CompactionStatus
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.compaction.worker import CompactionWorker, WorkerDb, WorkerOptions
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from tests.interop.official import (
    DbSettings,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    run,
    s3_store,
    to_batch,
)
from tests.s3_server import S3Bucket

pytestmark = pytest.mark.interop

PATH = "db"
REPO = Path(__file__).resolve().parents[2]
SETTINGS = Settings(compaction=CompactionSettings(min_range_bytes=1))
OPTIONS = WorkerOptions(poll_interval_s=0.05, heartbeat_interval_s=0.5,
                        heartbeat_timeout_s=3.0)


def coordinator(heartbeat_timeout: str = "3s", min_sources: int = 2) -> DbSettings:
    """An official writer whose embedded compactor is a coordinator only (worker = null),
    polling fast and scheduling as soon as ``min_sources`` L0s are there."""
    co = json.loads(OfficialSettings.default().to_json_string())["compactor_options"]
    co["poll_interval"] = "50ms"
    co["worker"] = None
    co["worker_heartbeat_timeout"] = heartbeat_timeout
    co["commit_compacted_interval"] = "50ms"
    co["scheduler_options"] = {"min_compaction_sources": str(min_sources),
                               "max_compaction_sources": "8"}
    return DbSettings(compactor=False, flush_interval="20ms",
                      extra={"compactor_options": json.dumps(co)})


class DurableWriter:
    """Batches to an official Db, each awaited durable, and what was acknowledged."""

    def __init__(self, db: OfficialDb, prefix: bytes = b"k") -> None:
        self.db = db
        self.prefix = prefix
        self.acked: dict[bytes, bytes] = {}
        self.n = 0

    def batch(self, rows: int = 300, keys: int = 2000) -> None:
        ops = [Put(self.prefix + b"%06d" % ((self.n + i) * 7919 % keys),
                   b"v%08d" % (self.n + i) * 8) for i in range(rows)]
        run(run(self.db.db.write(to_batch(ops))).await_durable())
        for op in ops:
            self.acked[op.key] = op.value
        self.n += rows


def all_versions(store: ObjectStore) -> list[Compactions]:
    cs = CompactionsStore(store, PATH)
    return [cs.read(i).value for i in cs.list_ids()]


def claims_by_job(store: ObjectStore) -> dict[int, list[str]]:
    """Per compaction id, the worker ids that held it Running, in order (one per claim)."""
    out: dict[int, list[str]] = {}
    for v in all_versions(store):
        for c in v.recent_compactions:
            if c.status == CompactionStatus.RUNNING and c.worker is not None:
                ids = out.setdefault(int(c.id), [])
                if not ids or ids[-1] != c.worker.worker_id:
                    ids.append(c.worker.worker_id)
    return out


def wait_quiet(store: ObjectStore, timeout_s: float = 30.0) -> None:
    """Until the compactions file lists nothing Submitted, Scheduled, Running or Compacted."""
    deadline = time.monotonic() + timeout_s
    active = {CompactionStatus.SUBMITTED, CompactionStatus.SCHEDULED, CompactionStatus.RUNNING,
              CompactionStatus.COMPACTED}
    while True:
        cur = CompactionsStore(store, PATH).try_read_latest()
        if cur is not None and not any(c.status in active
                                       for c in cur.value.recent_compactions):
            return
        assert time.monotonic() < deadline, f"compactions still active: {cur}"
        time.sleep(0.1)


@contextmanager
def running_worker(store: ObjectStore, **kw: Any) -> Iterator[CompactionWorker]:
    w = CompactionWorker(lambda: [WorkerDb(PATH, PATH, store)], settings=SETTINGS,
                         options=kw.pop("options", OPTIONS), slots=2, **kw)
    result: list[dict[str, Any]] = []
    t = threading.Thread(target=lambda: result.append(w.run()), daemon=True)
    t.start()
    try:
        yield w
    finally:
        w.stop()
        t.join(60)
        assert not t.is_alive()


def official_scan(where: Any) -> dict[bytes, bytes]:
    with OfficialReader.open(where, PATH) as r:
        return dict(r.scan())


def write_for(db: OfficialDb, w: DurableWriter, rounds: int) -> None:
    for _ in range(rounds):
        w.batch()
        db.flush_memtable()
        time.sleep(0.05)


def check_committed_by_official(admin_where: Any, ours: set[str], store: ObjectStore) -> int:
    """Every compaction the coordinator finished was executed by one of ``ours``, and
    ``Admin.read_compactions`` shows the last one Completed. Returns how many ran."""
    jobs = claims_by_job(store)
    assert jobs, "no compaction was claimed"
    for cid, workers in jobs.items():
        assert set(workers) <= ours, f"compaction {cid} run by {workers}"
    state = run(OfficialAdmin(admin_where, PATH).admin.read_compactions(None))
    statuses = [c.status for c in state.recent_compactions]
    # nothing we claimed before the last commit is left uncommitted. The close flushes the
    # memtable and may schedule compactions after it, which 0.17's shutting-down
    # coordinator leaves Submitted or Scheduled, or (our worker still runs) Compacted, for
    # the next coordinator (observed: up to two Compacted once our worker got fast enough
    # to report before the close finished). None is ever left Running: a stopped worker
    # hands its jobs back.
    assert OfficialStatus.COMPLETED in statuses, statuses
    last = max(i for i, s in enumerate(statuses) if s == OfficialStatus.COMPLETED)
    settled, after = statuses[:last + 1], statuses[last + 1:]
    assert not {OfficialStatus.RUNNING, OfficialStatus.COMPACTED} & set(settled), statuses
    assert OfficialStatus.RUNNING not in after, statuses
    m = ManifestStore(store, PATH).read_latest().value
    assert len(m.compacted) >= 1
    return len(jobs)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_our_worker_executes_what_the_official_coordinator_schedules(
        tmp_path: Path, where: str, request: pytest.FixtureRequest) -> None:
    if where == "s3":
        bucket: S3Bucket = request.getfixturevalue("s3_bucket")
        official_where: Any = s3_store(bucket.name, endpoint=bucket.endpoint)
        store = bucket.open()
    else:
        official_where = tmp_path
        store = open_store(f"file://{tmp_path}")
    with OfficialDb.open(official_where, PATH, coordinator()) as db:
        w = DurableWriter(db)
        with running_worker(store) as worker:
            write_for(db, w, 12)
            wait_quiet(store)
            db.close()  # before the worker stops: 0.17 waits for what it scheduled
        report = worker.report(0)
    assert report["totals"]["compacted"] >= 3
    assert report["totals"]["failed"] == 0 and report["totals"]["lost"] == 0
    n = check_committed_by_official(official_where, {worker.worker_id}, store)
    assert n == report["totals"]["compacted"]
    assert official_scan(official_where) == w.acked


def test_two_workers_never_execute_the_same_claim(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    with OfficialDb.open(tmp_path, PATH, coordinator()) as db:
        w = DurableWriter(db)
        with running_worker(store) as a, running_worker(store) as b:
            write_for(db, w, 16)
            wait_quiet(store)
            db.close()
        ra, rb = a.report(0), b.report(0)
    jobs = claims_by_job(store)
    assert all(len(workers) == 1 for workers in jobs.values()), jobs
    assert ra["totals"]["compacted"] + rb["totals"]["compacted"] == len(jobs)
    assert ra["totals"]["lost"] == rb["totals"]["lost"] == 0
    check_committed_by_official(tmp_path, {a.worker_id, b.worker_id}, store)
    assert official_scan(tmp_path) == w.acked


CHILD = """
import sys, time
from slatelib.config import CompactionSettings, Settings
from slatelib.objstore import open_store
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction_task
from slatelib.ops.compaction.worker import CompactionWorker, WorkerDb, WorkerOptions

def slow(task):
    if task.index > 0:
        time.sleep(600)  # killed long before
    return run_compaction_task(task)

store = open_store("file://" + sys.argv[1])
w = CompactionWorker(lambda: [WorkerDb("db", "db", store)],
                     settings=Settings(compaction=CompactionSettings(min_range_bytes=1)),
                     options=WorkerOptions(poll_interval_s=0.05, heartbeat_interval_s=0.2,
                                           heartbeat_timeout_s=3.0, max_concurrent=1),
                     runner=ThreadTaskRunner(4, task_fn=slow), slots=4)
print(w.worker_id, flush=True)
w.run()
"""


def test_a_killed_worker_s_job_is_reclaimed_and_resumed_without_loss(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    with OfficialDb.open(tmp_path, PATH, coordinator(min_sources=6)) as db:
        w = DurableWriter(db)
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=REPO,
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            assert proc.stdout is not None
            dead_id = proc.stdout.readline().strip()
            for _ in range(6):  # one compaction of 6 L0s, split into 4 ranges
                w.batch(rows=600)
                db.flush_memtable()
            # wait until the child published a context with its first range done
            deadline = time.monotonic() + 60
            while True:
                cur = CompactionsStore(store, PATH).try_read_latest()
                running = [c for c in (cur.value.recent_compactions if cur else ())
                           if c.status == CompactionStatus.RUNNING and c.ctx is not None
                           and any(s.output_ssts for s in c.ctx.subcompactions)]
                if running:
                    break
                assert proc.poll() is None, "the worker child died on its own"
                assert time.monotonic() < deadline, "the child never finished a range"
                time.sleep(0.05)
            job = running[0]
            assert job.worker is not None and job.worker.worker_id == dead_id
            finished = [s for s in job.ctx.subcompactions if s.output_ssts]  # type: ignore[union-attr]
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        # the coordinator reclaims after 3 s without heartbeats; our second worker resumes
        with running_worker(store) as second:
            wait_quiet(store, timeout_s=60)
            for _ in range(2):  # the writer keeps working on top
                w.batch()
            db.flush_memtable()
            db.close()
        report = second.report(0)
    assert report["totals"]["compacted"] >= 1
    assert report["databases"][0]["ranges_resumed"] >= len(finished) >= 1
    jobs = claims_by_job(store)
    assert jobs[int(job.id)] == [dead_id, second.worker_id]
    done = CompactionsStore(store, PATH).read_latest().value
    kept = {o.id for s in finished for o in s.output_ssts}
    m = ManifestStore(store, PATH).read_latest().value
    assert kept <= m.referenced_sst_ids()  # the dead worker's finished ranges were kept
    assert done is not None
    assert official_scan(tmp_path) == w.acked


RESTARTED_CHILD = """
import sys, time
from slatelib.config import CompactionSettings, Settings
from slatelib.objstore import open_store
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction_task
from slatelib.ops.compaction.worker import CompactionWorker, WorkerDb, WorkerOptions

def slowish(task):
    time.sleep(0.3)  # so that kills land in the middle of jobs
    return run_compaction_task(task)

store = open_store("file://" + sys.argv[1])
w = CompactionWorker(lambda: [WorkerDb("db", "db", store)],
                     settings=Settings(compaction=CompactionSettings(min_range_bytes=1)),
                     options=WorkerOptions(poll_interval_s=0.05, heartbeat_interval_s=0.2,
                                           heartbeat_timeout_s=2.0),
                     runner=ThreadTaskRunner(2, task_fn=slowish), slots=3)
print(w.worker_id, flush=True)
w.run()
"""


def test_workers_killed_and_restarted_at_random_lose_nothing(tmp_path: Path) -> None:
    """The reviewer's run, compressed: an official coordinator's writer writes for about
    20 s while worker processes are SIGKILLed and restarted at random (seeded) moments."""
    import random

    rng = random.Random(20261125)
    store = open_store(f"file://{tmp_path}")
    started: list[str] = []
    with OfficialDb.open(tmp_path, PATH, coordinator(heartbeat_timeout="2s")) as db:
        w = DurableWriter(db)
        proc: subprocess.Popen[str] | None = None
        deadline = time.monotonic() + 20
        next_kill = time.monotonic() + rng.uniform(1, 4)
        try:
            while time.monotonic() < deadline:
                if proc is None:
                    proc = subprocess.Popen(
                        [sys.executable, "-c", RESTARTED_CHILD, str(tmp_path)], cwd=REPO,
                        stdout=subprocess.PIPE, text=True,
                        env={**os.environ, "PYTHONPATH": str(REPO)})
                    assert proc.stdout is not None
                    started.append(proc.stdout.readline().strip())
                w.batch()
                db.flush_memtable()
                if time.monotonic() >= next_kill:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(30)
                    proc = None
                    next_kill = time.monotonic() + rng.uniform(1, 4)
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
        with running_worker(store) as last:  # a final worker drains what is left
            wait_quiet(store, timeout_s=90)
            db.close()
    assert len(started) >= 4
    jobs = claims_by_job(store)
    ours = {*started, last.worker_id}
    for cid, workers in jobs.items():
        assert set(workers) <= ours
        assert len(workers) == len(set(workers)), f"{cid}: one worker claimed twice {workers}"
    assert any(len(workers) > 1 for workers in jobs.values()), "no job was ever reclaimed"
    m = ManifestStore(store, PATH).read_latest().value
    assert len(m.compacted) <= 8  # size-tiered with max 8 sources keeps runs bounded
    assert official_scan(tmp_path) == w.acked
