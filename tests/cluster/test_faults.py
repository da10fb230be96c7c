"""Faults only a cluster has, each with nothing acknowledged lost (official 0.17 reader):

- an executor SIGKILLed in the middle of a compaction and of a rescale split, while its
  output SST is on the wire: Spark reruns the task on an executor, the commit references
  only the finished attempt's outputs, and the killed attempt's SST (it still lands, like
  an upload whose response was lost) is an orphan that GC collects once it is old news;
- speculative execution forced on, with one task stalled so that a copy of it runs on the
  other worker: the result is the run without speculation's (same rows, same number and
  key ranges of SSTs, counts not doubled), no duplicate SST is referenced;
- executors that cannot reach the store, or have no credentials: the job fails with the
  store error and the executor named, and nothing is committed;
- the driver killed between the tasks and the commit: a rerun finishes the job.

The S3 gate (``s3_gate.py``) holds the request the fault needs, the test does the harm, and
then lets the request go on (``apply``) or drops it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from slatelib.config import Settings, load_settings
from slatelib.errors import ObjectMissingError
from slatelib.ids import ulid_to_str
from slatelib.ops.compaction import run_compaction
from slatelib.ops.gc import collect_garbage
from slatelib.ops.job_report import compact_db_fields
from slatelib.store.manifest_store import ManifestStore
from tests.cluster.data import Db, official_store, write_official
from tests.cluster.harness import WORKERS, Cluster, RunResult
from tests.cluster.test_jobs import assert_ran_on_the_workers
from tests.interop.official import DbSettings, OfficialDb, Put

pytestmark = pytest.mark.cluster


@pytest.fixture(autouse=True)
def _plain_gate(cluster: Cluster) -> None:
    """Each test starts with the gate holding nothing (a failed test may have left a rule)."""
    cluster.set_rules()


def args(cluster: Cluster, conf: Path, *job: str) -> list[str]:
    return [*job, "--conf", str(conf), "--env-file", str(cluster.env_file())]


def worker_of(cluster: Cluster, address: str) -> str:
    for name in WORKERS:
        if cluster.addresses[name] == address:
            return name
    raise AssertionError(f"{address} is not a worker")


def referenced(db: Db, path: str | None = None) -> list[str]:
    """The object names of the SSTs the latest manifest's views reference (L0s and sorted
    runs, segments included), one per view."""
    m = ManifestStore(db.store(), path or db.path).read_latest().value
    return [f"{ulid_to_str(v.sst_id)}.sst" for v in m.all_views()]


def hold_first_sst(cluster: Cluster, prefix: str, hold_id: str, *,
                   sources: list[str] | None = None) -> None:
    cluster.set_rules(hold=[{
        "id": hold_id, "method": "PUT", "path_re": rf"^/{prefix}/compacted/[^/]+\.sst$",
        "from": sources or [cluster.addresses[w] for w in WORKERS], "max": 1}])


def exists(store: Any, path: str) -> bool:
    try:
        store.head(path)
    except ObjectMissingError:
        return False
    return True


def kill_executors(cluster: Cluster, worker: str) -> list[int]:
    pids = cluster.executor_pids(worker)
    assert pids, f"no executor JVM on {worker}: {cluster.processes(worker)}"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return pids


def finish(proc: Any, timeout: float = 300) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


@pytest.mark.parametrize("job", ["compact", "split"])
def test_an_executor_killed_mid_job_loses_nothing(cluster: Cluster, cluster_conf: Path,
                                                  job: str) -> None:
    db = write_official(cluster, l0s=4, seed=11)
    prefix = f"{db.bucket}/{db.path}" + ("-shard-[01]" if job == "split" else "")
    hold_first_sst(cluster, prefix, f"kill-{job}")
    if job == "compact":
        argv = cluster.spark_submit_argv("compact", args(cluster, cluster_conf, "--db", db.url,
                                                         "--policy", "l0"), ship="node")
    else:
        argv = cluster.spark_submit_argv("rescale", args(
            cluster, cluster_conf, "split", "--db", db.url, "--into", "2", "--fence-source",
            "--to", f"s3://{db.bucket}/{db.path}-shard-{{i}}"), ship="node")
    proc = cluster.start_run(argv)
    try:
        held = cluster.wait_event(lambda e: e.get("event") == "held", proc=proc)
        victim = worker_of(cluster, held["source"])
        kill_executors(cluster, victim)
        time.sleep(1.0)  # the executor is gone before its upload goes on
        cluster.release(f"kill-{job}", "apply")
        code, out, err = finish(proc)
    finally:
        cluster.set_rules()
        if proc.poll() is None:
            proc.kill()
    assert code == 0, err[-6000:]
    assert_ran_on_the_workers(cluster, RunResult([], code, out, err).report)
    orphan = held["path"].split("/", 2)[2]  # <db path>/compacted/<ulid>.sst
    orphan_db, _, orphan_name = orphan.rpartition("/compacted/")
    store = db.store()
    assert exists(store, orphan), "the killed attempt's upload did not land"
    if job == "compact":
        assert db.read() == db.model.live()
        assert orphan_name not in referenced(db)
    else:
        rows: dict[bytes, bytes] = {}
        for i in range(2):
            rows.update(db.read(f"{db.path}-shard-{i}"))
        assert rows == db.model.live()
        assert orphan_name not in referenced(db, orphan_db)
    for path in ([db.path] if job == "compact" else [f"{db.path}-shard-{i}" for i in range(2)]):
        for name in referenced(db, path):
            assert exists(store, f"{path}/compacted/{name}"), name
    if job == "compact":
        # The orphan is GC's once a later compaction has finished (0.17 keeps unreferenced
        # SSTs newer than the compaction low watermark: a compaction may still publish
        # them) and an L0 newer than it exists (they may be L0 uploads in flight).
        for compact_after in (True, False):
            with OfficialDb.open(official_store(cluster, db.bucket), db.path,
                                 DbSettings(compactor=False), model=db.model) as w:
                w.write([Put(b"key:later", b"after the kill %d" % compact_after)])
                w.flush_memtable()
            if compact_after:
                run_compaction(db.path, store, settings=Settings(), policy="l0")
        gc = collect_garbage(db.path, store, min_age=0.0, force=True, dry_run=False)
        assert gc.kind("compacted").deleted >= 1
        assert not exists(store, orphan), "GC left the killed attempt's orphan"
        assert db.read() == db.model.live()


SPECULATION = {"spark.speculation": "true", "spark.speculation.interval": "100ms",
               "spark.speculation.quantile": "0.5", "spark.speculation.multiplier": "1.5",
               "spark.speculation.minTaskRuntime": "1s"}


def run_summary(db: Db, report: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on speculation: the rows and counts of the report, and the
    shape of the new sorted run (its SSTs and their key ranges)."""
    (entry,) = report["databases"]
    m = ManifestStore(db.store(), db.path).read_latest().value
    ssts = [(m.sst(v.sst_id).info.first_entry, m.sst(v.sst_id).info.last_entry)
            for r in m.compacted for v in r.views]
    return {key: entry[key] for key in ("rows_in", "rows_out", "tasks", "versions_dropped",
                                        "tombstones_dropped")} | {
        "l0": len(m.l0), "runs": len(m.compacted), "ssts": ssts}


def test_speculative_copies_change_nothing(cluster: Cluster, cluster_conf: Path) -> None:
    plain = write_official(cluster, l0s=4, seed=23)
    twin = write_official(cluster, l0s=4, seed=23)
    assert plain.model.live() == twin.model.live()
    # The run without speculation: the same library compaction, in this process.
    control = {"databases": [compact_db_fields(run_compaction(
        plain.path, plain.store(), settings=load_settings([cluster_conf]), policy="l0",
        parallelism=2).to_dict())]}
    assert control["databases"][0]["outcome"] == "committed"

    hold_first_sst(cluster, f"{twin.bucket}/{twin.path}", "slow")
    proc = cluster.start_run(cluster.spark_submit_argv("compact", args(
        cluster, cluster_conf, "--db", twin.url, "--policy", "l0"), ship="node",
        conf=SPECULATION))
    try:
        held = cluster.wait_event(lambda e: e.get("event") == "held", proc=proc)
        code, out, err = finish(proc)  # the copy on the other worker wins meanwhile
    finally:
        cluster.release("slow", "apply")  # then the slow original's upload lands
        if proc.poll() is None:
            proc.kill()
    assert code == 0, err[-6000:]
    report = RunResult([], code, out, err).report
    assert_ran_on_the_workers(cluster, report)
    cluster.wait_event(lambda e: e.get("path") == held["path"] and e.get("status") == 200)
    ssts = [e for e in cluster.events() if e.get("status") == 200 and e["method"] == "PUT"
            and e["path"].startswith(f"/{twin.bucket}/{twin.path}/compacted/")]
    (entry,) = report["databases"]
    assert len(ssts) > entry["tasks"], "no speculative copy wrote an SST"
    assert {e["source"] for e in ssts} == {cluster.addresses[w] for w in WORKERS}
    assert run_summary(twin, report) == run_summary(plain, control)
    names = referenced(twin)
    assert len(names) == len(set(names)) == len(run_summary(twin, report)["ssts"])
    slow_name = held["path"].rsplit("/", 1)[1]
    assert slow_name not in names
    assert twin.read() == twin.model.live() == plain.read()


def test_executors_that_cannot_reach_the_store_fail_the_job_and_commit_nothing(
        cluster: Cluster, cluster_conf: Path) -> None:
    db = write_official(cluster, l0s=4, seed=31)
    before = db.manifest()
    quick = {"spark.executorEnv.SLATELIB_RETRY__MAX_ATTEMPTS": "2",
             "spark.task.maxFailures": "2"}
    unreachable = {**quick, "spark.executorEnv.SLATELIB_S3_ENDPOINT":
                   f"http://{cluster.addresses['s3']}:1"}
    result = cluster.run(cluster.spark_submit_argv("compact", args(
        cluster, cluster_conf, "--db", db.url, "--policy", "l0"), ship="node",
        conf=unreachable))
    assert result.returncode == 6, result.explain()  # io_failure
    (entry,) = result.report["databases"]
    message = entry["error"]["message"]
    assert "on executor w" in message and f"{cluster.addresses['s3']}:1" in message, message
    assert [v.id for v in db.manifest().l0] == [v.id for v in before.l0]
    assert not db.manifest().compacted
    assert db.read() == db.model.live()

    # No credentials on the executors: the driver has them (its environment), the
    # executors nothing (no --env-file, no spark.executorEnv).
    no_creds = cluster.run(cluster.spark_submit_argv(
        "compact", ["--db", db.url, "--policy", "l0", "--conf", str(cluster_conf)],
        ship="node", conf=quick), env=cluster.env_vars())
    assert no_creds.returncode != 0, no_creds.explain()
    (entry,) = no_creds.report["databases"]
    message = entry["error"]["message"]
    assert "on executor w" in message, message
    assert "InvalidAccessKeyId" in message or "credential" in message.lower(), message
    assert [v.id for v in db.manifest().l0] == [v.id for v in before.l0]
    assert db.read() == db.model.live()


def test_a_driver_killed_before_its_commit_is_finished_by_a_rerun(
        cluster: Cluster, cluster_conf: Path) -> None:
    db = write_official(cluster, l0s=4, seed=41)
    cluster.set_rules(hold=[{
        "id": "commit", "method": "PUT",
        "path_re": rf"^/{db.bucket}/{db.path}/manifest/\d+\.manifest$",
        "from": [cluster.driver_host], "max": 1,
        "after_re": rf"^PUT /{db.bucket}/{db.path}/compacted/[^/]+\.sst$"}])
    argv = cluster.spark_submit_argv("compact", args(cluster, cluster_conf, "--db", db.url,
                                                     "--policy", "l0"), ship="node")
    proc = cluster.start_run(argv)
    try:
        cluster.wait_event(lambda e: e.get("event") == "held", proc=proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        cluster.release("commit", "drop")
    finally:
        cluster.set_rules()
        if proc.poll() is None:
            proc.kill()
    assert len(db.manifest().l0) == 4  # the kill came before the commit
    assert db.read() == db.model.live()
    rerun = cluster.run(argv)
    assert rerun.returncode == 0, rerun.explain()
    assert_ran_on_the_workers(cluster, rerun.report)
    assert not db.manifest().l0 and db.manifest().compacted
    assert db.read() == db.model.live()
