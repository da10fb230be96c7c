"""GC benchmark: official ``Admin.run_gc_once`` vs ``jobs/gc.py`` (Spark ``local[2]``).

A real database written by the official package (flushes, a compaction, a flush after it)
gets about 100k garbage objects: superseded manifests, WAL SSTs below
``replay_after_wal_id`` and replaced SSTs below every cutoff (its latest manifest is
rewritten at a higher id so that the garbage is plausible: ``replay_after_wal_id`` moved
past the garbage WALs, which are all flushed). Two identical copies are collected, one by
each GC, with the same ``min_age``; then the remaining objects must be the same, and the
official ``DbReader`` must read every key from our copy.

Run on the local disk (objects aged 1 hour, ``min_age`` 5 minutes, the 0.17 default) and
against ``moto_server`` (tests/s3_server.py, where each request is a real HTTP round trip;
``min_age`` 1 second, as moto stamps objects with the seeding time).

    .venv/bin/python benchmarks/bench_gc.py [--garbage 100000] [--repeat 1] [--only local|s3]
    .venv/bin/python benchmarks/bench_gc.py --only many [--dbs 8] --garbage 5000

Times: the official call, and our ``slatelib.jobs.gc.run`` on an already started SparkSession
(the session start-up is printed separately). The medians of ``--repeat`` runs and their
ratio are printed, and a JSON summary at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from slatelib.config import load_settings  # noqa: E402
from slatelib.format.manifest_codec import encode_manifest  # noqa: E402
from slatelib.ids import ulid_to_str  # noqa: E402
from slatelib.jobs.gc import build_parser  # noqa: E402
from slatelib.jobs.gc import run as run_job  # noqa: E402
from slatelib.objstore import ObjectStore, open_store  # noqa: E402
from slatelib.paths import DbPaths  # noqa: E402
from slatelib.spark.session import build_spark  # noqa: E402
from slatelib.store.manifest_store import ManifestStore  # noqa: E402
from tests.interop.official import (  # noqa: E402
    DbSettings,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    as_store,
    run,
    s3_store,
)
from tests.s3_server import REGION, create_bucket, start_moto_server  # noqa: E402

DB = "bench"


def official_gc(where: Any, min_age_ms: int, db: str = DB) -> float:
    from slatedb.uniffi import (
        AdminBuilder,
        GarbageCollectorDirectoryOptions,
        GarbageCollectorOptions,
        GarbageCollectorScheduleOptions,
    )

    d = GarbageCollectorDirectoryOptions(interval_ms=None, min_age_ms=min_age_ms, dry_run=False)
    fence = GarbageCollectorDirectoryOptions(interval_ms=None, min_age_ms=min_age_ms, dry_run=True)
    admin = AdminBuilder(db, as_store(where)).build()
    started = time.perf_counter()
    run(admin.run_gc_once(GarbageCollectorOptions(
        manifest_options=d, wal_options=d, wal_fence_options=fence, compacted_options=d,
        compactions_options=d, detach_options=GarbageCollectorScheduleOptions(interval_ms=None))))
    return time.perf_counter() - started


def our_gc(spark: Any, url: str | list[str], min_age: str, conf: Path,
           ) -> tuple[float, dict[str, Any]]:
    dbs = [a for u in ([url] if isinstance(url, str) else url) for a in ("--db", u)]
    args = build_parser().parse_args([*dbs, "--min-age", min_age, "--force",
                                      "--no-dry-run", "--conf", str(conf)])
    settings = load_settings(args.conf)
    started = time.perf_counter()
    report, code = run_job(spark, settings, args)
    elapsed = time.perf_counter() - started
    assert code == 0, report
    return elapsed, report


def build_base(where: Any, name: str = DB) -> Model:
    """A small real database: 4 flushes, a compaction of them, one flush after it."""
    model = Model()
    no_embedded_gc = DbSettings(extra={"garbage_collector_options": "null"})
    with OfficialDb.open(where, name, no_embedded_gc, model=model) as db:
        for b in range(4):
            db.write([Put(f"key:{i:05d}".encode(), f"v{b}-{i}".encode() * 4)
                      for i in range(b * 500, b * 500 + 1000)])
            db.flush_all()
        OfficialAdmin(where, name).compact(l0=None)
        db.write([Put(b"key:after", b"compaction")])
        db.flush_all()
    return model


def garbage_plan(store: ObjectStore, total: int, now_ms: int, db: str = DB,
                 ) -> tuple[list[str], dict[str, bytes]]:
    """Garbage paths (content irrelevant) and the objects that make them garbage: the
    latest manifest rewritten at a higher id, with the WAL replay start moved past them."""
    paths = DbPaths.of(db)
    latest = ManifestStore(store, db).read_latest()
    m = latest.value
    assert m.replay_after_wal_id == m.wal_id_last_seen, "the base database must be flushed"
    n_man, n_wal = total * 3 // 10, total * 4 // 10
    n_sst = total - n_man - n_wal
    new_id = latest.id + n_man
    shift = m.wal_id_last_seen + n_wal
    rewritten = replace(m, replay_after_wal_id=shift, wal_id_last_seen=shift)
    garbage = [paths.manifest(i) for i in range(latest.id + 1, new_id)]
    garbage += [paths.wal(i) for i in range(m.wal_id_last_seen + 1, shift + 1)]
    # Replaced SSTs of the last two days (a backlog of compactions), all before every cutoff.
    step = 2 * 86_400_000 // max(1, n_sst)
    garbage += [f"{db}/compacted/{ulid_to_str(((now_ms - 7_200_000 - i * step) << 80) | i)}.sst"
                for i in range(n_sst)]
    return garbage, {paths.manifest(new_id): encode_manifest(rewritten)}


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def keys(model: Model) -> list[tuple[bytes, bytes]]:
    return model.items()


def check_reads(where: Any, model: Model, db: str = DB) -> None:
    with OfficialReader.open(where, db) as r:
        assert r.scan() == keys(model), "official reader disagrees after our GC"


# ------------------------------------------------------------------------------ local
def bench_local(spark: Any, total: int, repeat: int, conf: Path) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-gc-"))
    try:
        base = work / "base"
        base.mkdir()
        model = build_base(base)
        now_ms = int(time.time() * 1000)
        garbage, extra = garbage_plan(open_store(f"file://{base}"), total, now_ms)
        for path, data in extra.items():
            (base / path).write_bytes(data)
        for path in garbage:
            (base / path).write_bytes(b"g" * 64)
        old = time.time() - 3600
        for p in base.rglob("*"):
            if p.is_file():
                os.utime(p, (old, old))
        results: dict[str, list[float]] = {"official": [], "ours": []}
        phases: list[dict[str, float]] = []
        same = True
        for _ in range(repeat):
            a, b = work / "a", work / "b"
            for d in (a, b):
                shutil.rmtree(d, ignore_errors=True)
                shutil.copytree(base, d)
            results["official"].append(official_gc(a, 300_000))
            t, report = our_gc(spark, f"file://{b}/{DB}", "5min", conf)
            results["ours"].append(t)
            phases.append(report["databases"][0]["phases_s"])
            same &= tree(a) == tree(b)
            check_reads(b, model)
        return summarize("local disk", total, results, same,
                         len(tree(base)) - len(tree(work / "b")), phases)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------------- S3
def s3_env(endpoint: str) -> None:
    """S3 settings for slatelib in this process and in the Spark workers it will start (set
    before the SparkSession, whose Python workers inherit the environment)."""
    os.environ.update({
        "SLATELIB_S3_ENDPOINT": endpoint, "SLATELIB_S3_ALLOW_HTTP": "true",
        "SLATELIB_S3_REGION": REGION, "SLATELIB_S3_ACCESS_KEY_ID": "testing",
        "SLATELIB_S3_SECRET_ACCESS_KEY": "testing",
    })


def bench_s3(spark: Any, endpoint: str, total: int, repeat: int, conf: Path) -> dict[str, Any]:
    results: dict[str, list[float]] = {"official": [], "ours": []}
    phases: list[dict[str, float]] = []
    same, deleted = True, 0
    for _ in range(repeat):
        a, b = create_bucket(endpoint), create_bucket(endpoint)
        model = build_base(s3_store(a.name, endpoint=endpoint))
        store_a, store_b = open_store(a.url), open_store(b.url)
        garbage, extra = garbage_plan(store_a, total, int(time.time() * 1000))
        for path, data in extra.items():
            store_a.put(path, data)
        for m in store_a.list(""):
            store_b.put(m.path, store_a.get(m.path))
        for bucket in (a, b):
            for i in range(0, len(garbage), 20_000):
                bucket.seed(garbage[i:i + 20_000], b"g" * 64)
        before = {m.path for m in store_b.list("")}
        time.sleep(1.5)  # min_age 1s: moto stamps objects with the seeding time
        results["official"].append(official_gc(s3_store(a.name, endpoint=endpoint), 1000))
        t, report = our_gc(spark, f"{b.url}/{DB}", "1s", conf)
        results["ours"].append(t)
        phases.append(report["databases"][0]["phases_s"])
        left_a, left_b = {m.path for m in store_a.list("")}, {m.path for m in store_b.list("")}
        same &= left_a == left_b
        deleted = len(before) - len(left_b)
        check_reads(s3_store(b.name, endpoint=endpoint), model)
    return summarize("moto_server (S3)", total, results, same, deleted, phases)


def bench_many(spark: Any, endpoint: str, dbs: int, total: int, conf: Path,
               concurrency: list[int]) -> dict[str, Any]:
    """``dbs`` databases of ``total`` garbage objects each in one bucket: the official GC
    run database by database, against one job for all of them at each ``db_concurrency``."""
    names = [f"tenant-{i:02d}/db" for i in range(dbs)]
    buckets = [create_bucket(endpoint) for _ in range(1 + len(concurrency))]
    models = {n: build_base(s3_store(buckets[0].name, endpoint=endpoint), n) for n in names}
    src = open_store(buckets[0].url)
    garbage: list[str] = []
    for n in names:
        g, extra = garbage_plan(src, total, int(time.time() * 1000), n)
        garbage += g
        for path, data in extra.items():
            src.put(path, data)
    for other in buckets[1:]:
        dst = open_store(other.url)
        for m in src.list(""):
            dst.put(m.path, src.get(m.path))
    for bucket in buckets:
        for i in range(0, len(garbage), 20_000):
            bucket.seed(garbage[i:i + 20_000], b"g" * 64)
    before = {m.path for m in src.list("")}
    time.sleep(1.5)  # min_age 1s: moto stamps objects with the seeding time
    started = time.perf_counter()
    for n in names:
        official_gc(s3_store(buckets[0].name, endpoint=endpoint), 1000, n)
    timings = {"official, one database after another": time.perf_counter() - started}
    left_official = {m.path for m in src.list("")}
    same = True
    for c, bucket in zip(concurrency, buckets[1:], strict=True):
        conf_c = conf.with_name(f"gc-{c}.toml")
        conf_c.write_text(conf.read_text() + f"db_concurrency = {c}\n")
        t, report = our_gc(spark, [f"{bucket.url}/{n}" for n in names], "1s", conf_c)
        timings[f"jobs/gc.py, db_concurrency {c}"] = t
        same &= {m.path for m in open_store(bucket.url).list("")} == left_official
        for n in names:
            check_reads(s3_store(bucket.name, endpoint=endpoint), models[n], n)
    off = timings["official, one database after another"]
    for what, t in timings.items():
        print(f"  {what:40} {t:7.2f}s  ({off / t:5.2f}x the official time)", flush=True)
    print(f"  deleted {len(before) - len(left_official)} objects; same deletion set: {same}",
          flush=True)
    return {"store": "moto_server (S3), many databases", "databases": dbs,
            "garbage_per_db": total, "deleted_objects": len(before) - len(left_official),
            "seconds": {k: round(v, 2) for k, v in timings.items()}, "same_deletion_set": same}


def summarize(where: str, total: int, results: dict[str, list[float]], same: bool,
              deleted: int, phases: list[dict[str, float]]) -> dict[str, Any]:
    off, ours = statistics.median(results["official"]), statistics.median(results["ours"])
    out = {"store": where, "garbage_objects": total, "deleted_objects": deleted,
           "official_s": round(off, 2), "ours_s": round(ours, 2),
           "speedup": round(off / ours, 2), "same_deletion_set": same,
           "runs": {k: [round(x, 2) for x in v] for k, v in results.items()},
           "our_phases_s": phases}
    print(f"{where:18} garbage {total:>7}  official {off:8.2f}s  ours {ours:8.2f}s  "
          f"ratio {off / ours:5.2f}x  same deletion set: {same}", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--garbage", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--only", choices=["local", "s3", "many"])
    p.add_argument("--dbs", type=int, default=8, help="databases for --only many")
    args = p.parse_args()
    conf = Path(tempfile.mkdtemp()) / "gc.toml"
    conf.write_text("[gc]\ndelete_concurrency = 16\n")
    server = start_moto_server() if args.only in (None, "s3", "many") else None
    if server is not None:
        s3_env(server.endpoint)
    started = time.perf_counter()
    spark = build_spark("bench-gc", master="local[2]",
                        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    print(f"SparkSession local[2] start-up: {time.perf_counter() - started:.1f}s", flush=True)
    out = []
    try:
        if args.only in (None, "local"):
            out.append(bench_local(spark, args.garbage, args.repeat, conf))
        if server is not None and args.only in (None, "s3"):
            out.append(bench_s3(spark, server.endpoint, args.garbage, args.repeat, conf))
        if server is not None and args.only == "many":
            out.append(bench_many(spark, server.endpoint, args.dbs, args.garbage, conf, [1, 4]))
    finally:
        spark.stop()
        if server is not None:
            server.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
