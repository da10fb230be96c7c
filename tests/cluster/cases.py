"""Every job of the cluster tier as a case: how to make its database, the job's arguments
(and the Airflow DAG run that means the same), and what the official reader must see
afterwards. ``test_jobs.py`` submits each case three ways."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slatedb.uniffi import FlushOptions, FlushType

from slatelib.config import CompactionSettings, Settings
from slatelib.ops.compaction import run_compaction
from tests.cluster.data import Db, l0_count, official_store, sorted_runs, write_official
from tests.cluster.harness import ACCESS_KEY, REGION, SECRET_KEY, Cluster
from tests.interop.official import DbSettings, OfficialDb, Put, run, to_batch


@dataclass
class Ctx:
    """One case's database(s) for one way of submitting, and what the check needs."""

    cluster: Cluster
    conf: Path
    way: str
    db: Db
    work: Path
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    name: str
    job: str
    prepare: Callable[[Ctx], None]
    args: Callable[[Ctx], list[str]]
    dag: Callable[[Ctx], tuple[str, dict[str, Any]]]
    check: Callable[[Ctx, dict[str, Any]], None]
    finish: Callable[[Ctx], None] = lambda ctx: None
    """Runs after the job, before ``check`` (e.g. stop a writer)."""
    submit: Callable[[Ctx], list[str]] = lambda ctx: []
    """spark-submit options the case needs besides the tier's own (e.g. its ``--jars``);
    ``slate-spark`` and the DAGs add the jars a job needs themselves."""


def _nothing(ctx: Ctx) -> None:
    return None


def _one_db(report: dict[str, Any]) -> dict[str, Any]:
    assert report["status"] == "success", json.dumps(report, indent=1)[-3000:]
    (entry,) = report["databases"]
    return dict(entry)


# -- compaction ----------------------------------------------------------------------------
def _compact_check(policy: str) -> Callable[[Ctx, dict[str, Any]], None]:
    def check(ctx: Ctx, report: dict[str, Any]) -> None:
        entry = _one_db(report)
        assert entry["outcome"] == "committed", entry
        assert entry["tasks"] >= 2, entry  # split across both executors' slots
        if policy in ("l0", "full"):
            assert l0_count(ctx.db) == 0
        if policy == "full":
            assert len(sorted_runs(ctx.db)) == 1
        assert ctx.db.read() == ctx.db.model.live()
        # the executors' own store requests reach the report (docs/request-accounting.md)
        requests = report["store_requests"]
        assert requests["executors"]["total"] > 0, requests
        assert requests["total"] == requests["driver"]["total"] + requests["executors"]["total"]
    return check


def _compact(policy: str) -> Case:
    return Case(
        name=f"compact-{policy}", job="compact", prepare=_nothing,
        args=lambda ctx: ["--db", ctx.db.url, "--policy", policy],
        dag=lambda ctx: ("slatelib_compaction", {"databases": [ctx.db.url], "policy": policy}),
        check=_compact_check(policy))


# -- gc ------------------------------------------------------------------------------------
def _gc_prepare(ctx: Ctx) -> None:
    """Compact the L0s here (no Spark), so that they become garbage once the compaction's
    protecting checkpoint (made to expire at once here) is gone, then flush a newer L0
    (0.17 deletes unreferenced SSTs only when they are older than the newest L0)."""
    store = ctx.db.store()
    quick = Settings(compaction=CompactionSettings(checkpoint_lifetime=1.0))
    run_compaction(ctx.db.path, store, settings=quick, policy="l0")
    time.sleep(1.5)
    with OfficialDb.open(official_store(ctx.cluster, ctx.db.bucket), ctx.db.path,
                         DbSettings(compactor=False), model=ctx.db.model) as db:
        db.write([Put(b"key:after-compaction", b"newer L0")])
        db.flush_memtable()
    ctx.extra["before"] = sorted(m.path for m in store.list(f"{ctx.db.path}/compacted/"))


def _gc_check(ctx: Ctx, report: dict[str, Any]) -> None:
    entry = _one_db(report)
    assert report["dry_run"] is False and report["totals"]["deleted"] > 0, report["totals"]
    after = sorted(m.path for m in ctx.db.store().list(f"{ctx.db.path}/compacted/"))
    assert len(after) < len(ctx.extra["before"]), (after, ctx.extra["before"])
    assert entry["kinds"]["compacted"]["deleted"] == len(ctx.extra["before"]) - len(after)
    assert ctx.db.read() == ctx.db.model.live()


GC = Case(
    name="gc", job="gc", prepare=_gc_prepare,
    args=lambda ctx: ["--db", ctx.db.url, "--no-dry-run", "--min-age", "0s"],
    dag=lambda ctx: ("slatelib_gc", {"databases": [ctx.db.url], "dry_run": False,
                                     "min_age": "0s"}),
    check=_gc_check)


# -- rescale -------------------------------------------------------------------------------
def _shard(ctx: Ctx, i: int) -> str:
    return f"{ctx.db.path}-shard-{i}"


def _split_check(ctx: Ctx, report: dict[str, Any]) -> None:
    assert report["status"] == "success", json.dumps(report, indent=1)[-3000:]
    rows: dict[bytes, bytes] = {}
    for i in range(2):
        part = ctx.db.read(_shard(ctx, i))
        assert part and not set(part) & set(rows)
        rows.update(part)
    assert rows == ctx.db.model.live()


SPLIT = Case(
    name="rescale-split", job="rescale", prepare=_nothing,
    args=lambda ctx: ["split", "--db", ctx.db.url, "--into", "2", "--fence-source", "--to",
                      f"s3://{ctx.db.bucket}/{ctx.db.path}-shard-{{i}}"],
    dag=lambda ctx: ("slatelib_rescale", {
        "command": "split", "db": ctx.db.url, "into": 2, "dry_run": False,
        "fence_source": True,
        "to": f"s3://{ctx.db.bucket}/{ctx.db.path}-shard-{{i}}"}),
    check=_split_check)


def _merge_prepare(ctx: Ctx) -> None:
    """Split the database here (no Spark) into two shards, the merge's sources."""
    from slatelib.ops.rescale import RescaleOptions, split_database

    store = ctx.db.store()
    report = split_database(ctx.db.path, store, [_shard(ctx, 0), _shard(ctx, 1)],
                            settings=Settings(), options=RescaleOptions(fence_source=True))
    assert report.status == "done", report.to_dict()


def _merge_check(ctx: Ctx, report: dict[str, Any]) -> None:
    assert report["status"] == "success", json.dumps(report, indent=1)[-3000:]
    assert ctx.db.read(f"{ctx.db.path}-merged") == ctx.db.model.live()


MERGE = Case(
    name="rescale-merge", job="rescale", prepare=_merge_prepare,
    args=lambda ctx: ["merge", "--source", f"s3://{ctx.db.bucket}/{_shard(ctx, 0)}",
                      "--source", f"s3://{ctx.db.bucket}/{_shard(ctx, 1)}",
                      "--fence-source", "--to", f"s3://{ctx.db.bucket}/{ctx.db.path}-merged"],
    dag=lambda ctx: ("slatelib_rescale", {
        "command": "merge", "dry_run": False, "fence_source": True,
        "sources": [f"s3://{ctx.db.bucket}/{_shard(ctx, i)}" for i in range(2)],
        "to": f"s3://{ctx.db.bucket}/{ctx.db.path}-merged"}),
    check=_merge_check)


# -- export --------------------------------------------------------------------------------
def _export(fmt: str) -> Case:
    def target(ctx: Ctx) -> str:
        return str(ctx.work / f"lake-{fmt}")

    def check(ctx: Ctx, report: dict[str, Any]) -> None:
        entry = _one_db(report)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(target(ctx)).to_pylist()
        else:
            from deltalake import DeltaTable

            table = DeltaTable(target(ctx)).to_pyarrow_table().to_pylist()
        got = {row["key"]: row["value"] for row in table}
        assert len(got) == len(table) == entry["rows"]
        assert got == ctx.db.model.live()

    return Case(
        name=f"export-{fmt}", job="export", prepare=_nothing,
        args=lambda ctx: ["--db", ctx.db.url, "--to", f"file://{target(ctx)}", "--format", fmt,
                          "--mode", "overwrite", "--partitions", "4"],
        dag=lambda ctx: ("slatelib_export", {"db": ctx.db.url, "to": f"file://{target(ctx)}",
                                             "format": fmt, "mode": "overwrite",
                                             "partitions": 4}),
        check=check)


def _s3_target(ctx: Ctx) -> str:
    return f"s3://{ctx.extra['lake']}/lake/t"


def _lake_prepare(ctx: Ctx) -> None:
    ctx.extra["lake"] = ctx.cluster.new_bucket()  # not the database's bucket


def _export_s3_check(ctx: Ctx, report: dict[str, Any]) -> None:
    """The table in the lake bucket, read by delta-rs with its own storage options, holds
    what the official writer wrote; the report's files and bytes are what landed there."""
    import boto3
    from deltalake import DeltaTable

    entry = _one_db(report)
    assert entry["writer"] == "delta-spark", entry  # Spark's own writer, through S3A
    c = ctx.cluster
    table = DeltaTable(_s3_target(ctx), storage_options={
        "AWS_ENDPOINT_URL": c.s3_endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY})
    rows = table.to_pyarrow_table().to_pylist()
    got = {row["key"]: row["value"] for row in rows}
    assert len(got) == len(rows) == entry["rows"] and got == ctx.db.model.live()
    s3 = boto3.client("s3", endpoint_url=c.s3_endpoint, region_name=REGION,
                      aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    listed = s3.list_objects_v2(Bucket=ctx.extra["lake"], Prefix="lake/t/")["Contents"]
    data = {o["Key"]: o["Size"] for o in listed if o["Key"].endswith(".parquet")
            and "/_delta_log/" not in o["Key"]}
    live = {u.removeprefix(f"s3://{ctx.extra['lake']}/") for u in table.file_uris()}
    assert set(data) == live and entry["files"] == len(live)
    assert entry["bytes"] == sum(data.values())


def _s3a_jars(ctx: Ctx) -> list[str]:
    """spark-submit's ``--jars`` for a Delta export to S3 (the README's line: the fetched
    Delta and S3A jars); only this case carries the 690 MB AWS bundle."""
    from slatelib.spark.jars import local_jars

    found = local_jars(["delta", "s3a"])
    assert found.complete, f"missing jars {found.missing}: run make jars"
    return ["--jars", ",".join(str(p) for p in found.paths)]


EXPORT_S3 = Case(
    name="export-s3-delta", job="export", prepare=_lake_prepare,
    args=lambda ctx: ["--db", ctx.db.url, "--to", _s3_target(ctx), "--format", "delta",
                      "--mode", "overwrite", "--partitions", "4"],
    dag=lambda ctx: ("slatelib_export", {"db": ctx.db.url, "to": _s3_target(ctx),
                                         "format": "delta", "mode": "overwrite",
                                         "partitions": 4}),
    check=_export_s3_check, submit=_s3a_jars)


# -- worker and service modes --------------------------------------------------------------
def coordinator_settings() -> DbSettings:
    """An official writer whose compactor only schedules (``worker = null``), as soon as
    two L0s are there."""
    from slatedb.uniffi import Settings as OfficialSettings

    co = json.loads(OfficialSettings.default().to_json_string())["compactor_options"]
    co["poll_interval"] = "100ms"
    co["worker"] = None
    co["worker_heartbeat_timeout"] = "20s"
    co["commit_compacted_interval"] = "100ms"
    co["scheduler_options"] = {"min_compaction_sources": "2", "max_compaction_sources": "8"}
    return DbSettings(compactor=False, flush_interval="20ms",
                      extra={"compactor_options": json.dumps(co)})


class BusyWriter:
    """An official writer with a coordinator, on a thread of its own (with its own event
    loop): durable batches, an L0 flushed after each, for ``duration_s`` or until
    :meth:`stop`. ``acked`` is what a reader must see once it stopped."""

    def __init__(self, ctx: Ctx, duration_s: float = 30.0) -> None:
        self.ctx = ctx
        self.deadline = time.monotonic() + duration_s
        self.acked: dict[bytes, bytes] = dict(ctx.db.model.live())
        self.n = 0
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self.stalled = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self._ready.wait(120)
        assert self.error is None and self._ready.is_set(), self.error

    def _batch(self, db: OfficialDb) -> None:
        ops = [Put(b"key:%06d" % ((self.n + i) * 7919 % 3000), b"w%08d" % (self.n + i) * 4)
               for i in range(200)]

        async def durable() -> None:
            await (await db.db.write(to_batch(ops))).await_durable()
            await db.db.flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE))

        # A write that waits this long is stalled (L0 full: nothing compacts): the writer
        # stops there, and the batch was never acknowledged.
        run(asyncio.wait_for(durable(), timeout=90))
        for op in ops:
            self.acked[op.key] = op.value
        self.n += len(ops)

    def _run(self) -> None:
        try:
            db = OfficialDb.open(official_store(self.ctx.cluster, self.ctx.db.bucket),
                                 self.ctx.db.path, coordinator_settings())
            try:
                self._batch(db)
                self._batch(db)  # two L0s: the coordinator schedules a compaction at once
                self._ready.set()
                while not self._stop.wait(0.5) and time.monotonic() < self.deadline:
                    self._batch(db)
            finally:
                db.close(flush=None)  # every acknowledged batch is durable already
        except TimeoutError:
            self.stalled = True
        except BaseException as exc:  # reported by stop()
            self.error = exc
            self._ready.set()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(180)
        assert not self.thread.is_alive(), "the official writer did not stop"
        assert self.error is None, self.error


def _worker_prepare(ctx: Ctx) -> None:
    ctx.extra["writer"] = BusyWriter(ctx)


def _worker_finish(ctx: Ctx) -> None:
    ctx.extra["writer"].stop()


def _worker_check(ctx: Ctx, report: dict[str, Any]) -> None:
    assert report["status"] == "success", json.dumps(report, indent=1)[-3000:]
    assert report["mode"] == "worker"
    assert report["totals"]["compacted"] >= 1, report["totals"]
    assert report["totals"]["failed"] == 0, report["totals"]
    assert not ctx.extra["writer"].stalled, "the official writer stalled: L0 was full"
    assert ctx.db.read() == ctx.extra["writer"].acked


WORKER = Case(
    name="worker", job="compact", prepare=_worker_prepare, finish=_worker_finish,
    args=lambda ctx: ["--worker", "--db", ctx.db.url, "--run-for", "25s"],
    dag=lambda ctx: ("slatelib_compaction", {"databases": [ctx.db.url], "mode": "worker",
                                             "run_for": "25s"}),
    check=_worker_check)


def _service_check(ctx: Ctx, report: dict[str, Any]) -> None:
    assert report["status"] == "success", json.dumps(report, indent=1)[-3000:]
    assert report["totals"]["compactions"] >= 1, report["totals"]
    assert l0_count(ctx.db) < 4
    assert ctx.db.read() == ctx.db.model.live()


SERVICE = Case(
    name="service", job="compact", prepare=_nothing,
    args=lambda ctx: ["--service", "--db", ctx.db.url, "--until-idle"],
    dag=lambda ctx: ("slatelib_compaction", {"databases": [ctx.db.url], "mode": "service",
                                             "until_idle": True}),
    check=_service_check)


CASES = [_compact("l0"), _compact("size-tiered"), _compact("full"), GC, SPLIT, MERGE,
         _export("parquet"), _export("delta"), EXPORT_S3, WORKER, SERVICE]


def new_ctx(cluster: Cluster, conf: Path, case: Case, way: str, work: Path) -> Ctx:
    """The case's database for one way of submitting (its own bucket), prepared."""
    db = write_official(cluster, l0s=4, seed=zlib.crc32(f"{case.name}/{way}".encode()))
    ctx = Ctx(cluster, conf, way, db, work)
    case.prepare(ctx)
    return ctx
