"""Cost benchmark: object-store requests of slatelib against official SlateDB 0.17.0.

Every request is counted at the S3 server itself (``tests/s3_server.py``: one bucket per
contestant, counts reset once the set-up is done), by kind as S3 bills them (GET, ranged
GET, HEAD, PUT, conditional PUT, LIST page, DELETE, DeleteObjects batch). Three
comparisons, side by side in one run, on copies of the same databases:

- **compaction** (requests per GB compacted): a database written by the official package
  on S3 (``--rows`` random 16-byte keys with 100-byte values flushed into ``--l0s`` L0
  SSTs), copied to three buckets. Official: an official ``Db`` with its embedded compactor
  (0.17 defaults, but a scheduler that never schedules on its own) runs a submitted TIERED
  compaction of every L0 view into run 0; an identical ``Db`` on the third copy, polled the
  same way but given nothing to do, is subtracted (what the writer and the polling cost,
  not the compactor). Ours: ``jobs/compact.py --policy l0`` (``run()`` on a ``local[2]``
  SparkSession), counted whole. GB = the L0 SSTs' bytes (10^9).
- **GC** (requests per 100k objects collected): ``benchmarks/bench_gc.py``'s database with
  ``--garbage`` garbage objects (manifests, WAL SSTs, replaced SSTs), on three buckets:
  official ``Admin.run_gc_once``, ``jobs/gc.py`` (``run()``, same SparkSession) and
  ``slate gc`` (a subprocess), all with ``min_age`` 1 s; the deletion sets must match.
- **idle** (requests per hour of an idle database): a small database (:func:`idle_db`:
  official writes, one slatelib compaction, ``--idle-versions`` superseded manifests) on three
  buckets, for ``--idle-seconds`` at the same time: an official ``Db`` with its embedded
  compactor (0.17 defaults; GC off), the same ``Db`` with ``compactor_options = null``
  (subtracted: the writer's own polling) and ``jobs/compact.py --service --run-for ...``
  (a subprocess on ``local[1]``, counted once it logs that it started), no writer on it.
  Counts are scaled to an hour.

Prints one table (ours, official, ratio ours / official, per-kind counts) and a JSON
summary. Target: ours <= official in each comparison.

    .venv/bin/python benchmarks/bench_cost.py [--rows 500000] [--l0s 8] [--garbage 20000]
        [--idle-seconds 150] [--idle-versions 3000] [--only compaction,gc,idle] [--quick]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from bench_compaction import s3_env, write_official_l0s  # noqa: E402

from tests.s3_server import REQUEST_KINDS, S3Bucket, create_bucket, start_moto_server  # noqa: E402

DB = "db"
GB = 1_000_000_000
KINDS = tuple(k for k in REQUEST_KINDS if k != "other") + ("other",)
READY_LINE = "compaction service started"


# --------------------------------------------------------------------------- accounting
@dataclass(frozen=True)
class Count:
    """Requests by kind and body bytes, as the server counted them."""

    requests: Mapping[str, int]
    bytes_in: int = 0
    bytes_out: int = 0

    @staticmethod
    def of(bucket: S3Bucket) -> Count:
        raw = bucket.requests()
        return Count(dict(raw["requests"]), int(raw["bytes_in"]), int(raw["bytes_out"]))

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def minus(self, other: Count) -> Count:
        """This count less ``other`` (a baseline), kind by kind, never below zero."""
        kinds = set(self.requests) | set(other.requests)
        return Count({k: max(0, self.requests.get(k, 0) - other.requests.get(k, 0))
                      for k in kinds},
                     max(0, self.bytes_in - other.bytes_in),
                     max(0, self.bytes_out - other.bytes_out))

    def scaled(self, factor: float) -> dict[str, float]:
        return {k: round(v * factor, 1) for k, v in self.requests.items() if v}

    def as_json(self) -> dict[str, Any]:
        return {"requests": {k: v for k, v in self.requests.items() if v},
                "total": self.total, "bytes_in": self.bytes_in, "bytes_out": self.bytes_out}


@dataclass
class Comparison:
    """One row of the table: requests per ``unit`` for each contestant."""

    name: str
    unit: str
    ours: dict[str, tuple[Count, float]] = field(default_factory=dict)  # label -> (count, per)
    official: tuple[Count, float] | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    def per_unit(self, entry: tuple[Count, float]) -> float:
        count, units = entry
        return count.total / units

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"comparison": self.name, "unit": self.unit, **self.notes}
        if self.official is not None:
            out["official"] = {**self.official[0].as_json(),
                               "per_unit": round(self.per_unit(self.official), 1),
                               "per_unit_by_kind": self.official[0].scaled(1 / self.official[1])}
        for label, entry in self.ours.items():
            out[label] = {**entry[0].as_json(), "per_unit": round(self.per_unit(entry), 1),
                          "per_unit_by_kind": entry[0].scaled(1 / entry[1])}
            if self.official is not None and self.per_unit(self.official):
                out[label]["ratio_to_official"] = round(
                    self.per_unit(entry) / self.per_unit(self.official), 3)
        return out


def print_table(rows: list[Comparison]) -> None:
    """The side-by-side table: per comparison and contestant, requests per unit, the ratio
    to the official count, and the per-kind breakdown (also per unit)."""
    print()
    print(f"  {'who':<26} {'per unit':>12} {'ratio':>8} {'counted':>9}  by kind (per unit)")
    for c in rows:
        entries: list[tuple[str, tuple[Count, float]]] = []
        if c.official is not None:
            entries.append(("official", c.official))
        entries += list(c.ours.items())
        for i, (label, entry) in enumerate(entries):
            per = c.per_unit(entry)
            ratio = (f"{per / c.per_unit(c.official):.3g}x"
                     if c.official is not None and c.per_unit(c.official) and label != "official"
                     else "")
            kinds = ", ".join(f"{k} {v:g}" for k, v in sorted(entry[0].scaled(1 / entry[1]).items(),
                                                              key=lambda kv: KINDS.index(kv[0])))
            if i == 0:
                print(f"{c.name}: {c.unit}")
            print(f"  {label:<26} {per:12.1f} {ratio:>8} {entry[0].total:>9}  {kinds}")
    print(flush=True)


# ---------------------------------------------------------------------------- helpers
def official() -> Any:
    import slatedb.uniffi as s

    return s


def off_store(bucket: S3Bucket) -> Any:
    from tests.interop.official import s3_store

    return s3_store(bucket.name, endpoint=bucket.endpoint)


def copy_bucket(src: S3Bucket, dst: S3Bucket) -> None:
    """Every object of ``src`` into ``dst`` (same keys)."""
    a, b = src.open(), dst.open()
    for meta in a.list(""):
        b.put(meta.path, a.get(meta.path))


def reset(*buckets: S3Bucket) -> None:
    for b in buckets:
        b.reset_requests()


def official_settings(compactor: str, gc: bool = False) -> Any:
    """0.17's default Settings with the compactor ``default``, ``manual`` (a scheduler
    that never schedules on its own: submitted compactions only) or ``none``, and the
    embedded GC off unless ``gc``."""
    s = official()
    st = s.Settings.default()
    if compactor == "none":
        st.set("compactor_options", "null")
    elif compactor == "manual":
        co = json.loads(st.to_json_string())["compactor_options"]
        co["scheduler_options"] = {"min_compaction_sources": "1000",
                                   "max_compaction_sources": "1000"}
        st.set("compactor_options", json.dumps(co))
    if not gc:
        st.set("garbage_collector_options", "null")
    return st


# ------------------------------------------------------------------------- compaction
def write_l0s(bucket: S3Bucket, rows: int, l0s: int, seed: int) -> None:
    """An official database with ``l0s`` L0 SSTs of ``rows // l0s`` random entries each."""
    write_official_l0s(off_store(bucket), rows, l0s, seed)


def l0_bytes(bucket: S3Bucket) -> int:
    return sum(m.size for m in bucket.open(f"{DB}/compacted").list(""))


def official_compaction(bucket: S3Bucket, baseline: S3Bucket) -> tuple[Count, Count, float]:
    """TIERED(all L0 -> run 0) by the official compactor on ``bucket``, while an identical
    ``Db`` on ``baseline`` runs idle and both are polled alike. Returns the two counts
    (from after both opened until the manifest shows the new run) and the seconds."""
    s = official()

    async def go() -> tuple[Count, Count, float]:
        dbs, admins = [], []
        for b in (bucket, baseline):
            builder = s.DbBuilder(DB, off_store(b))
            builder.with_settings(official_settings("manual"))
            dbs.append(await builder.build())
            admins.append(s.AdminBuilder(DB, off_store(b)).build())
        reset(bucket, baseline)
        m = await admins[0].read_manifest(None)
        await admins[1].read_manifest(None)
        sources = [s.SourceId.SST_VIEW(v.id) for v in m.l0]
        started = time.perf_counter()
        await admins[0].submit_compaction(s.CompactionSpec.TIERED(
            segment=b"", sources=sources, destination=0))
        while True:
            await asyncio.sleep(1.0)
            m = await admins[0].read_manifest(None)
            await admins[1].read_manifest(None)
            if not m.l0 and any(sr.id == 0 for sr in m.compacted):
                break
        elapsed = time.perf_counter() - started
        counts = Count.of(bucket), Count.of(baseline)
        for db in dbs:
            await db.shutdown()
        return counts[0], counts[1], elapsed

    return asyncio.run(go())


def our_compaction(spark: Any, bucket: S3Bucket, conf: Path) -> tuple[Count, dict[str, Any]]:
    from slatelib.config import load_settings
    from slatelib.jobs.compact import build_parser, run

    args = build_parser().parse_args(["--db", f"{bucket.url}/{DB}", "--policy", "l0",
                                      "--conf", str(conf)])
    settings = load_settings(args.conf)
    reset(bucket)
    report, code = run(spark, settings, args)
    count = Count.of(bucket)
    db = report["databases"][0]
    if code != 0 or db["rows_out"] != db["rows_in"]:
        raise SystemExit(f"our compaction failed: {json.dumps(db)[:2000]}")
    return count, db


def bench_compaction(spark: Any, endpoint: str, rows: int, l0s: int, conf: Path,
                     ) -> Comparison:
    src = create_bucket(endpoint)
    t = time.perf_counter()
    write_l0s(src, rows, l0s, seed=42)
    nbytes = l0_bytes(src)
    ours_b, base_b = create_bucket(endpoint), create_bucket(endpoint)
    copy_bucket(src, ours_b)
    copy_bucket(src, base_b)
    print(f"compaction: {rows} entries in {l0s} L0 SSTs, {nbytes / 1e6:.1f} MB, on 3 buckets "
          f"({time.perf_counter() - t:.0f}s)", flush=True)
    off, base, off_s = official_compaction(src, base_b)
    print(f"  official compactor: {off_s:.1f}s, {off.total} requests, idle Db baseline "
          f"{base.total}", flush=True)
    t = time.perf_counter()
    ours, report = our_compaction(spark, ours_b, conf)
    print(f"  jobs/compact.py: {time.perf_counter() - t:.1f}s, {ours.total} requests, "
          f"{report['tasks']} tasks", flush=True)
    gb = nbytes / GB
    return Comparison(
        "compaction", "requests per GB compacted",
        ours={"jobs/compact.py": (ours, gb)}, official=(off.minus(base), gb),
        notes={"rows": rows, "l0s": l0s, "input_bytes": nbytes, "official_s": round(off_s, 1),
               "official_raw": off.as_json(), "official_idle_db_baseline": base.as_json(),
               "our_tasks": report["tasks"]})


# --------------------------------------------------------------------------------- GC
def bench_gc_cost(spark: Any, endpoint: str, garbage: int, conf: Path) -> Comparison:
    from bench_gc import build_base, garbage_plan, official_gc, our_gc

    buckets = [create_bucket(endpoint) for _ in range(3)]
    a = buckets[0]
    build_base(off_store(a), DB)
    store_a = a.open()
    plan, extra = garbage_plan(store_a, garbage, int(time.time() * 1000), DB)
    for path, data in extra.items():
        store_a.put(path, data)
    for other in buckets[1:]:
        copy_bucket(a, other)
    for b in buckets:
        for i in range(0, len(plan), 20_000):
            b.seed(plan[i:i + 20_000], b"g" * 64)
    before = {m.path for m in store_a.list("")}
    time.sleep(1.5)  # min_age 1 s: moto stamps objects with the seeding time
    reset(*buckets)
    off_s = official_gc(off_store(a), 1000, DB)
    off = Count.of(a)
    print(f"gc: {garbage} garbage objects; official run_gc_once {off_s:.1f}s, "
          f"{off.total} requests", flush=True)
    job_s, _ = our_gc(spark, f"{buckets[1].url}/{DB}", "1s", conf)
    job = Count.of(buckets[1])
    print(f"  jobs/gc.py {job_s:.1f}s, {job.total} requests", flush=True)
    t = time.perf_counter()
    cli = subprocess.run(
        [sys.executable, "-c", "import sys; from slatelib.cli import main; sys.exit(main())", "gc", "--db", f"{buckets[2].url}/{DB}",
         "--min-age", "1s", "--force", "--no-dry-run", "--format", "json"],
        cwd=REPO, capture_output=True, text=True, check=False)
    if cli.returncode != 0:
        raise SystemExit(f"slate gc failed ({cli.returncode}): {cli.stderr[-2000:]}")
    cli_s = time.perf_counter() - t
    slate = Count.of(buckets[2])
    print(f"  slate gc {cli_s:.1f}s, {slate.total} requests", flush=True)
    left = [{m.path for m in b.open().list("")} for b in buckets]
    same = left[0] == left[1] == left[2]
    deleted = len(before) - len(left[0])
    if not same:
        raise SystemExit(f"the GCs deleted different objects: left {[len(x) for x in left]}")
    per = deleted / 100_000
    return Comparison(
        "gc", "requests per 100k objects collected",
        ours={"jobs/gc.py": (job, per), "slate gc": (slate, per)}, official=(off, per),
        notes={"garbage": garbage, "deleted": deleted, "same_deletion_set": same,
               "seconds": {"official": round(off_s, 1), "jobs/gc.py": round(job_s, 1),
                           "slate gc": round(cli_s, 1)}})


# ------------------------------------------------------------------------------- idle
class Service:
    """``jobs/compact.py --service`` in a child process; stderr kept in a log file."""

    def __init__(self, bucket: S3Bucket, run_for_s: float, log_path: Path) -> None:
        env = {**os.environ, "SLATELIB_SPARK_MASTER": "local[1]",
               "SLATELIB_SPARK_LOG_LEVEL": "ERROR", "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable}
        self.log_path = log_path
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, "jobs/compact.py", "--service", "--db", f"{bucket.url}/{DB}",
             "--run-for", f"{int(run_for_s)}s", "-v"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stdout = ""
        self._threads = [threading.Thread(target=self._err, daemon=True),
                         threading.Thread(target=self._out, daemon=True)]
        for th in self._threads:
            th.start()

    def _err(self) -> None:
        assert self.proc.stderr is not None
        with self.log_path.open("w") as log:
            for line in self.proc.stderr:
                log.write(line)
                log.flush()
                if READY_LINE in line:
                    self.ready.set()

    def _out(self) -> None:
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()

    def wait_ready(self, timeout_s: float = 240.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.ready.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise SystemExit(f"the compaction service did not start; see {self.log_path}")

    def stop(self) -> dict[str, Any]:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for th in self._threads:
            th.join(10)
        if self.proc.returncode != 0:
            raise SystemExit(f"the compaction service exited with {self.proc.returncode}; "
                             f"see {self.log_path}")
        report: dict[str, Any] = json.loads(self.stdout)
        return report


def idle_db(bucket: S3Bucket, versions: int) -> None:
    """A database at rest as the service finds it: written by the official writer with
    ``compactor_options = null`` (no foreign compactor holds it), compacted once by
    slatelib (so it has a compactions file and a sorted run), one more L0 flushed after
    that (below 0.17's ``min_compaction_sources``: nothing to do), and ``versions``
    superseded manifest versions on storage below the latest (what a day of flushes leaves
    before GC's ``min_age`` lets them go)."""
    from slatelib.ops.compaction import run_compaction
    from slatelib.store.manifest_store import ManifestStore

    write_l0s(bucket, 2_000, 2, seed=7)
    store = bucket.open()
    run_compaction(DB, store, policy="l0")
    write_l0s(bucket, 1_000, 1, seed=8)
    if versions > 0:
        ms = ManifestStore(store, DB)
        latest = ms.read_latest().id
        store.put_if_absent(ms.path(latest + versions + 1), store.get(ms.path(latest)))
        old = [ms.path(i) for i in range(latest + 1, latest + versions + 1)]
        for i in range(0, len(old), 20_000):
            bucket.seed(old[i:i + 20_000], b"superseded")


def bench_idle(endpoint: str, seconds: float, log_dir: Path, versions: int) -> Comparison:
    s = official()
    src = create_bucket(endpoint)
    idle_db(src, versions)
    ours_b, bare_b = create_bucket(endpoint), create_bucket(endpoint)
    copy_bucket(src, ours_b)
    copy_bucket(src, bare_b)
    service = Service(ours_b, seconds + 600, log_dir / "service.log")
    service.wait_ready()

    async def window() -> tuple[Count, Count, Count]:
        dbs = []
        for b, compactor in ((src, "default"), (bare_b, "none")):
            builder = s.DbBuilder(DB, off_store(b))
            builder.with_settings(official_settings(compactor))
            dbs.append(await builder.build())
        await asyncio.sleep(2.0)  # let start-up work settle in both
        reset(src, bare_b, ours_b)
        await asyncio.sleep(seconds)
        counts = Count.of(src), Count.of(bare_b), Count.of(ours_b)
        for db in dbs:
            await db.shutdown()
        return counts

    print(f"idle: counting {seconds:g}s (service started, official Dbs open)", flush=True)
    with_compactor, bare, ours = asyncio.run(window())
    report = service.stop()
    hours = seconds / 3600
    print(f"  official Db + compactor {with_compactor.total}, Db without compactor "
          f"{bare.total}, our service {ours.total} requests", flush=True)
    return Comparison(
        "idle", "requests per hour of an idle database",
        ours={"jobs/compact.py --service": (ours, hours)},
        official=(with_compactor.minus(bare), hours),
        notes={"seconds": seconds, "stored_manifest_versions": versions + 1,
               "official_db_with_compactor": with_compactor.as_json(),
               "official_db_without_compactor": bare.as_json(),
               "per_hour_official_db_with_compactor": round(with_compactor.total / hours),
               "per_hour_official_db_without_compactor": round(bare.total / hours),
               "service_polls": report.get("polls", report.get("totals"))})


# ------------------------------------------------------------------------------- main
@contextmanager
def spark_session() -> Iterator[Any]:
    from slatelib.spark.session import build_spark

    started = time.perf_counter()
    spark = build_spark("bench-cost", master="local[2]",
                        conf={"spark.sql.shuffle.partitions": "2",
                              "spark.default.parallelism": "2"})
    print(f"SparkSession local[2] start-up: {time.perf_counter() - started:.1f}s", flush=True)
    try:
        yield spark
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--rows", type=int, default=500_000, help="compaction: entries (500000)")
    p.add_argument("--l0s", type=int, default=8, help="compaction: L0 SSTs (8)")
    p.add_argument("--garbage", type=int, default=20_000,
                   help="GC: garbage objects (20000; bench_gc uses 100000)")
    p.add_argument("--idle-seconds", type=float, default=150.0,
                   help="idle: the counting window in seconds (150)")
    p.add_argument("--idle-versions", type=int, default=3000,
                   help="idle: superseded manifest versions stored below the latest (3000)")
    p.add_argument("--only", default="compaction,gc,idle",
                   help="comma-separated subset of compaction,gc,idle")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes (20000 rows in 2 L0s, 2000 garbage objects, 20 s idle)")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.l0s, args.garbage, args.idle_seconds = 20_000, 2, 2_000, 20.0
        args.idle_versions = 100
    parts = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = set(parts) - {"compaction", "gc", "idle"}
    if unknown:
        p.error(f"--only: unknown part(s) {sorted(unknown)}")
    # this checkout's code in the subprocesses and Spark's Python workers too (an editable
    # install elsewhere would otherwise win over it there)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    load = [round(x, 2) for x in os.getloadavg()]
    print(f"{os.cpu_count()} cores, load average {load}", flush=True)
    server = start_moto_server()
    s3_env(server.endpoint)
    work = Path(tempfile.mkdtemp(prefix="bench-cost-"))
    conf = work / "bench.toml"
    conf.write_text("[gc]\n")
    rows: list[Comparison] = []
    try:
        if "idle" in parts:
            rows.append(bench_idle(server.endpoint, args.idle_seconds, work,
                                   args.idle_versions))
        if "compaction" in parts or "gc" in parts:
            with spark_session() as spark:
                if "compaction" in parts:
                    rows.append(bench_compaction(spark, server.endpoint, args.rows, args.l0s,
                                                 conf))
                if "gc" in parts:
                    rows.append(bench_gc_cost(spark, server.endpoint, args.garbage, conf))
    finally:
        server.stop()
    rows.sort(key=lambda c: ["compaction", "gc", "idle"].index(c.name))
    print_table(rows)
    out = {"load_average": [load, [round(x, 2) for x in os.getloadavg()]],
           "comparisons": [c.as_json() for c in rows]}
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
