"""Compaction benchmark: official SlateDB 0.17.0's compactor vs slatelib's Spark job.

The database (built once by the official package with its compactor off, cached under
``benchmarks/data/``): ``--rows`` entries (default 2.3 M) with 16-byte random keys and
100-byte values, written in batches and flushed into ``--l0s`` L0 SSTs (default 10, about
290 MB in all). Every measurement runs on a fresh copy of it.

- official: an official ``Db`` with its embedded compactor (which never schedules on its
  own) runs a submitted TIERED compaction of all L0 views into sorted run 0; timed from the
  submission until the manifest shows the new run.
- slatelib: ``jobs/compact.py``'s ``run()`` on a ``local[2]`` SparkSession (and a
  ``local[1]`` one, each in its own process, for scaling; ``local[1]`` runs twice, once
  free and once pinned to one CPU, since its task's fetch threads use the other core); timed
  per job, with the session start (JVM, Python workers warmed up by one tiny job) reported
  separately. Each session's first compaction (cold: imports, JIT, first allocations) is
  printed but left out of the medians.

Both use 0.17's defaults: 4 KiB blocks, no compression, bloom filters from 1000 keys,
256 MiB output SSTs. Prints medians, the throughput ratios (excluding and including the
Spark session start), the 1 -> 2 core scaling and the peak memory, as text and as JSON.

    .venv/bin/python benchmarks/bench_compaction.py [--rows 2300000] [--l0s 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data"
DB = "db"
MB = 1_000_000


def official() -> Any:
    import slatedb.uniffi as s

    return s


def local_store(root: Path) -> Any:
    s = official()
    b = s.ObjectStoreBuilder.from_env(s.ObjectStoreType.LOCAL)
    b.with_config("local_path", str(root))
    return b.build()


def build_db(root: Path, rows: int, l0s: int, seed: int, codec: str | None = None) -> None:
    """Write the benchmark database with the official package (compactor and GC off)."""
    write_official_l0s(local_store(root), rows, l0s, seed, codec=codec)


def write_official_l0s(store: Any, rows: int, l0s: int, seed: int,
                       codec: str | None = None) -> None:
    """Write database ``DB`` in the official ``store`` with the official package: ``l0s``
    L0 SSTs of ``rows // l0s`` random entries (16-byte keys, 100-byte values), compactor
    and GC off; ``codec``: 0.17's ``compression_codec`` (snappy, lz4, zstd; None: none),
    whose values are 50 random bytes repeated (so they compress about 2:1; W1's values
    are random and would not compress). Blocks are 0.17's default 4 KiB."""
    s = official()

    async def go() -> None:
        st = s.Settings.default()
        if codec is not None:
            st.set("compression_codec", json.dumps(codec.capitalize()))
        for key, value in {"flush_interval": "null", "compactor_options": "null",
                           "garbage_collector_options": "null", "l0_max_ssts": "64",
                           "l0_max_ssts_per_key": "64", "l0_sst_size_bytes": str(1 << 30),
                           "max_unflushed_bytes": str(1 << 32)}.items():
            st.set(key, value)
        builder = s.DbBuilder(DB, store)
        builder.with_settings(st)
        db = await builder.build()
        rng = random.Random(seed)
        per, batch = rows // l0s, 10_000
        for _ in range(l0s):
            done = 0
            while done < per:
                wb = s.WriteBatch()
                for _ in range(min(batch, per - done)):
                    # compressed variants: 50 random bytes twice, about 2:1 for the codecs
                    value = rng.randbytes(50) * 2 if codec else rng.randbytes(100)
                    wb.put(rng.randbytes(16), value)
                await db.write(wb)
                done += batch
            await db.flush_with_options(s.FlushOptions(flush_type=s.FlushType.MEM_TABLE))
        await db.shutdown()

    asyncio.run(go())


def cached_db(rows: int, l0s: int, seed: int, codec: str | None = None) -> Path:
    """The benchmark database, written once by the official package and cached under
    ``benchmarks/data/`` (W1: the defaults, no compression; ``codec`` names a compressed
    variant, cached apart)."""
    suffix = f"_{codec}" if codec else ""
    root = DATA / f"compaction_{rows}_{l0s}_{seed}{suffix}"
    if not (root / "READY").exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        print(f"building the benchmark database in {root} (once) ...", flush=True)
        t = time.perf_counter()
        build_db(root, rows, l0s, seed, codec)
        (root / "READY").write_text(json.dumps({"rows": rows, "l0s": l0s, "seed": seed,
                                                "codec": codec}))
        print(f"  built in {time.perf_counter() - t:.1f}s", flush=True)
    return root


def fresh_copy(src: Path, name: str) -> Path:
    dst = DATA / "scratch" / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("READY"))
    return dst


def input_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / DB / "compacted").iterdir())


# ----------------------------------------------------------------------------- official
def official_compaction(root: Path) -> float:
    """Seconds from submitting TIERED(all L0 -> run 0) until the manifest shows it."""
    s = official()

    async def go() -> float:
        store = local_store(root)
        st = s.Settings.default()
        co = json.loads(st.to_json_string())["compactor_options"]
        co["poll_interval"] = "20ms"
        co["scheduler_options"] = {"min_compaction_sources": "1000",
                                   "max_compaction_sources": "1000"}
        co["worker"]["compactions_poll_interval"] = "20ms"
        st.set("compactor_options", json.dumps(co))
        st.set("flush_interval", "null")
        st.set("garbage_collector_options", "null")
        st.set("l0_max_ssts", "64")
        st.set("l0_max_ssts_per_key", "64")
        builder = s.DbBuilder(DB, store)
        builder.with_settings(st)
        db = await builder.build()
        admin = s.AdminBuilder(DB, store).build()
        m = await admin.read_manifest(None)
        sources = [s.SourceId.SST_VIEW(v.id) for v in m.l0]
        spec = s.CompactionSpec.TIERED(segment=b"", sources=sources, destination=0)
        started = time.perf_counter()
        await admin.submit_compaction(spec)
        while True:
            m = await admin.read_manifest(None)
            if not m.l0 and any(sr.id == 0 for sr in m.compacted):
                elapsed = time.perf_counter() - started
                break
            await asyncio.sleep(0.01)
        await db.shutdown()
        return elapsed

    return asyncio.run(go())


# ------------------------------------------------------------------------------ slatelib
def worker_main(master: str, src: Path, repeat: int) -> None:
    """In a child process: one SparkSession, ``repeat`` timed compactions, JSON on stdout."""
    sys.path.insert(0, str(REPO))
    t0 = time.perf_counter()
    from slatelib.spark.session import build_spark

    spark = build_spark("bench-compaction", master=master)
    slots = spark.sparkContext.defaultParallelism
    spark.sparkContext.parallelize(range(slots), slots).map(_warm_up).collect()
    session_s = time.perf_counter() - t0
    from slatelib.config import Settings
    from slatelib.jobs.compact import build_parser, run

    jobs = []
    for i in range(repeat + 1):  # the first job warms the workers up: reported, not counted
        root = fresh_copy(src, f"ours-{slots}-{i}")
        args = build_parser().parse_args(["--db", f"file://{root}/{DB}", "--policy", "l0"])
        t = time.perf_counter()
        report, code = run(spark, Settings(), args)
        elapsed = time.perf_counter() - t
        db = report["databases"][0]
        if code != 0 or db["rows_out"] != db["rows_in"]:
            raise SystemExit(f"compaction failed: {json.dumps(db)[:2000]}")
        jobs.append({"seconds": elapsed, "bytes_in": db["bytes_in"], "tasks": db["tasks"],
                     "phases_s": db["phases_s"], "peak_task_rss_bytes": db["peak_task_rss_bytes"],
                     "task_metrics": db["task_metrics"]})
        shutil.rmtree(root, ignore_errors=True)
    jvm_peak = _peak_rss(spark.sparkContext._gateway.proc.pid)
    spark.stop()
    print(json.dumps({"master": master, "slots": slots, "session_s": session_s,
                      "cold_s": jobs[0]["seconds"], "jobs": jobs[1:],
                      "jvm_peak_rss_bytes": jvm_peak}))


def _peak_rss(pid: int) -> int:
    """Peak resident memory (``VmHWM``) of a process, in bytes (0 when unknown)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _warm_up(_: int) -> int:
    import slatelib.ops.compaction  # noqa: F401  (imports the executor side once)

    return os.getpid()


def ours(master: str, src: Path, repeat: int, *, one_cpu: bool = False) -> dict[str, Any]:
    """The job run ``repeat`` times in a new process on ``master``; with ``one_cpu`` that
    process (JVM and Python workers included, which inherit it) is pinned to CPU 0."""
    def pin() -> None:
        os.sched_setaffinity(0, {0})

    out = subprocess.run(
        [sys.executable, __file__, "--worker", master, "--src", str(src),
         "--repeat", str(repeat)],
        check=True, capture_output=True, text=True, cwd=REPO,
        env={**os.environ, "SLATELIB_SPARK_LOG_LEVEL": "ERROR"},
        preexec_fn=pin if one_cpu else None,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# --------------------------------------------------------------------------- calibration
_SPIN = "import time\nt=time.perf_counter()\nx=0\nfor i in range(20_000_000): x+=i\n" \
        "print(time.perf_counter()-t)"


def free_cores() -> float:
    """How many cores this machine gives us right now: two CPU-bound processes run side by
    side, compared with one alone (2.0 on an idle 2-core machine; 1.0 when other work takes
    a whole core)."""
    def spin(n: int) -> float:
        procs = [subprocess.Popen([sys.executable, "-c", _SPIN], stdout=subprocess.PIPE,
                                  text=True) for _ in range(n)]
        return max(float(p.communicate()[0]) for p in procs)

    one = spin(1)
    two = spin(2)
    return round(2 * one / two, 2)


def cpu_seconds(run: dict[str, Any]) -> list[float]:
    return [sum(m["cpu_s"] for m in j["task_metrics"]) for j in run["jobs"]]


# ---------------------------------------------------------------------------------- main
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_300_000)
    p.add_argument("--l0s", type=int, default=10)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--src", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker_main(args.worker, Path(args.src), args.repeat)
        return
    src = cached_db(args.rows, args.l0s, args.seed)
    nbytes = input_bytes(src)
    print(f"database: {args.rows} entries in {args.l0s} L0 SSTs, {nbytes / MB:.0f} MB "
          f"({os.cpu_count()} cores)", flush=True)

    cores_before = free_cores()
    print(f"free cores now: {cores_before} of {os.cpu_count()}", flush=True)
    off = []
    for i in range(args.repeat):
        root = fresh_copy(src, f"official-{i}")
        off.append(official_compaction(root))
        shutil.rmtree(root, ignore_errors=True)
        print(f"  official run {i + 1}: {off[-1]:.2f}s", flush=True)
    two = ours("local[2]", src, args.repeat)
    print(f"  slatelib local[2]: {[round(j['seconds'], 2) for j in two['jobs']]} "
          f"(first, cold job: {two['cold_s']:.2f}s)", flush=True)
    one = ours("local[1]", src, args.repeat)
    print(f"  slatelib local[1]: {[round(j['seconds'], 2) for j in one['jobs']]} "
          f"(first, cold job: {one['cold_s']:.2f}s)", flush=True)
    pinned = ours("local[1]", src, args.repeat, one_cpu=True)
    print(f"  slatelib local[1], pinned to one CPU: "
          f"{[round(j['seconds'], 2) for j in pinned['jobs']]} "
          f"(first, cold job: {pinned['cold_s']:.2f}s)", flush=True)

    cores_after = free_cores()
    off_s = statistics.median(off)
    two_s = statistics.median(j["seconds"] for j in two["jobs"])
    one_s = statistics.median(j["seconds"] for j in one["jobs"])
    pinned_s = statistics.median(j["seconds"] for j in pinned["jobs"])
    results = {
        "rows": args.rows, "l0s": args.l0s, "input_mb": round(nbytes / MB, 1),
        "repeat": args.repeat,
        "official_s": round(off_s, 2), "official_mb_s": round(nbytes / MB / off_s, 1),
        "slatelib_local2_job_s": round(two_s, 2),
        "slatelib_local2_mb_s": round(nbytes / MB / two_s, 1),
        "slatelib_local2_session_s": round(two["session_s"], 2),
        "slatelib_local1_job_s": round(one_s, 2),
        "ratio_excluding_session": round(off_s / two_s, 2),
        "ratio_including_session": round(off_s / (two_s + two["session_s"]), 2),
        "scaling_1_to_2": round(one_s / two_s, 2),
        "slatelib_one_cpu_job_s": round(pinned_s, 2),
        "scaling_one_cpu_to_two": round(pinned_s / two_s, 2),
        "free_cores": [cores_before, cores_after],
        "task_cpu_s_local1": round(statistics.median(cpu_seconds(one)), 2),
        "task_cpu_s_local2": round(statistics.median(cpu_seconds(two)), 2),
        "slowest_task_cpu_s_local2": round(statistics.median(
            max(m["cpu_s"] for m in j["task_metrics"]) for j in two["jobs"]), 2),
        "peak_task_rss_mb": round(max(j["peak_task_rss_bytes"] for j in two["jobs"]) / MB),
        "peak_jvm_rss_mb": round(two["jvm_peak_rss_bytes"] / MB),
        "task_phases_local2": [
            {k: m[k] for k in ("read_s", "merge_s", "write_s", "total_s", "cpu_s")}
            for m in two["jobs"][-1]["task_metrics"]],
        "cold_job_s": {"local2": two["cold_s"], "local1": one["cold_s"],
                       "one_cpu": pinned["cold_s"]},
        "runs": {"official_s": off, "local2_s": [j["seconds"] for j in two["jobs"]],
                 "local1_s": [j["seconds"] for j in one["jobs"]],
                 "one_cpu_s": [j["seconds"] for j in pinned["jobs"]]},
    }
    print(f"official 0.17 compactor: {results['official_s']}s "
          f"({results['official_mb_s']} MB/s)")
    print(f"slatelib local[2]:       {results['slatelib_local2_job_s']}s "
          f"({results['slatelib_local2_mb_s']} MB/s), session start "
          f"{results['slatelib_local2_session_s']}s")
    print(f"ratio excluding session: {results['ratio_excluding_session']}x, including: "
          f"{results['ratio_including_session']}x")
    print(f"scaling local[1] -> local[2]: {results['scaling_1_to_2']}x "
          f"({results['slatelib_local1_job_s']}s -> {results['slatelib_local2_job_s']}s)")
    print(f"scaling one CPU (local[1] pinned) -> two: {results['scaling_one_cpu_to_two']}x "
          f"({results['slatelib_one_cpu_job_s']}s -> {results['slatelib_local2_job_s']}s)")
    print(f"task CPU seconds: local[1] {results['task_cpu_s_local1']}, local[2] "
          f"{results['task_cpu_s_local2']} (slowest task "
          f"{results['slowest_task_cpu_s_local2']}); free cores {results['free_cores']}")
    print(f"peak memory: Python task worker {results['peak_task_rss_mb']} MB, "
          f"JVM {results['peak_jvm_rss_mb']} MB")
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    shutil.rmtree(DATA / "scratch", ignore_errors=True)


if __name__ == "__main__":
    main()
