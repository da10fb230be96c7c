"""Compaction benchmark: official SlateDB 0.17.0's compactor vs slatelib's Spark job.

Everything side by side with the official package in one run, on copies of the same
official-written databases (built once, cached under ``benchmarks/data/``; 16-byte random
keys, 100-byte values, 0.17's defaults: 4 KiB blocks, bloom filters from 1000 keys, 256 MiB
output SSTs):

1. **W1** (``--rows`` 2.3 M entries in ``--l0s`` 10 L0 SSTs, about 316 MB, no compression;
   local directory store): ``--repeat`` alternating rounds (official, ours, official, ours,
   ...). Official: an official ``Db`` whose embedded compactor (which never schedules on its
   own) runs a submitted TIERED compaction of all L0 views into sorted run 0, timed from the
   submission until the manifest shows the new run. Ours: ``slatelib.jobs.compact.run()``
   (``--policy l0``) on one ``local[2]`` SparkSession kept in a child process for the whole
   run; its first ``--warmup`` jobs (default 3: the cold one, whose Python workers import
   slatelib, and two while the young JVM's JIT compilers still take a good part of a core)
   are printed and left out. The ratio is official seconds over
   the job's own total (the report's ``phases_s["total"]``; ``run()``'s wall is printed
   too). Per job: the report's ``execute_breakdown`` (computed from ``task_metrics`` when
   the report has none: the slowest task's ``total_s``), the tasks' share of ``execute``
   and MB/s per core = input bytes / the tasks' summed ``cpu_s`` (and / their summed
   ``total_s``).
2. **Compressed variants** (``--codecs lz4,zstd``; ``none`` skips): official-written with
   that codec, values about 2:1 compressible, ``--codec-rows`` 1 M in 4 L0s; the same
   alternating rounds; the ratio and our MB/s per core.
3. **S3** (``--no-s3`` skips): moto S3 on 127.0.0.1 (``tests/s3_server.py``), the
   ``--s3-rows`` database (600k in 4 L0s) copied into three buckets; one round: the official
   compactor (its S3 store) on one, an identical official ``Db`` left idle on the second
   (its requests subtracted, as ``bench_cost.py`` does), our job (``--db s3://bucket/db``)
   on the third. MB/s (input bytes / official seconds, and / our job total), the ratio,
   requests per GB (the server's count per bucket; ours also from the report's
   ``store_requests``).
4. One task alone (unless ``--no-core``): ``benchmarks/bench_core.py --json FILE`` as a
   subprocess: decode, merge and encode of one W1 task in one process, without Spark and
   storage I/O (MB/s per CPU-second: the issue's per-core figure), and each codec variant
   against the codec library's own speed on the same bytes; ``--callgrind`` adds W1's
   instructions per input byte (valgrind, a few minutes).
5. ``--scaling``: also ``local[1]`` (free, and pinned to one CPU) sessions, for the 1 -> 2
   core scaling (off by default, to keep the run short).

Correctness: every job of ours must report ``rows_out == rows_in``, and a read-only
slatelib ``DbReader`` over its output must see the source's keys, bytes and digest; on S3
the official ``DbReader`` also reads our output in full (from a local download of the
bucket: it reads block by block, which takes minutes on moto).

Prints the runs, then one summary (RESULTS.md top-table rows, markdown), PASS/MISS per
target of issue 28 (ratio >= 5x, overhead <= 15% of execute, >= 400 MB/s per core;
informational, the exit code stays 0), and the JSON of everything (``--json FILE``).

    .venv/bin/python benchmarks/bench_compaction.py [--rows 2300000] [--l0s 10] [--repeat 5] [--warmup 3]
        [--codecs lz4,zstd] [--codec-rows 1000000] [--no-s3] [--s3-rows 600000] [--no-core]
        [--callgrind]
        [--scaling] [--json FILE]
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
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data"
DB = "db"
MB = 1_000_000
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from _compaction_figures import (  # noqa: E402
    GB,
    job_figures,
    median_figures,
    pair_ratios,
    summary_rows,
    targets,
)

T0 = time.perf_counter()


def say(text: str) -> None:
    """``text`` on stdout, flushed, after the seconds since the start (``[  12s]``)."""
    print(f"[{time.perf_counter() - T0:5.0f}s] {text}", flush=True)


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
                    data = rng.randbytes(50) * 2 if codec else rng.randbytes(100)
                    wb.put(rng.randbytes(16), data)
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
        say(f"building the benchmark database in {root} (once) ...")
        t = time.perf_counter()
        build_db(root, rows, l0s, seed, codec)
        (root / "READY").write_text(json.dumps({"rows": rows, "l0s": l0s, "seed": seed,
                                                "codec": codec}))
        say(f"  built in {time.perf_counter() - t:.1f}s")
    return root


def fresh_copy(src: Path, name: str) -> Path:
    dst = DATA / "scratch" / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("READY"))
    return dst


def input_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / DB / "compacted").iterdir())



# ----------------------------------------------------------------------------- official
def official_settings(poll: str) -> Any:
    """0.17's defaults with a compactor that never schedules on its own (submitted
    compactions only), polling every ``poll``; no flushes, no GC."""
    s = official()
    st = s.Settings.default()
    co = json.loads(st.to_json_string())["compactor_options"]
    co["poll_interval"] = poll
    co["scheduler_options"] = {"min_compaction_sources": "1000",
                               "max_compaction_sources": "1000"}
    co["worker"]["compactions_poll_interval"] = poll
    st.set("compactor_options", json.dumps(co))
    st.set("flush_interval", "null")
    st.set("garbage_collector_options", "null")
    st.set("l0_max_ssts", "64")
    st.set("l0_max_ssts_per_key", "64")
    return st


async def _official_run(store: Any, poll: str, check_s: float,
                        idle_store: Any = None, opened: Any = None) -> float:
    """TIERED(all L0 -> run 0) by the official compactor on ``store``; seconds from the
    submission until the manifest shows the new run (polled every ``check_s``). With
    ``idle_store``, an identical ``Db`` there is opened too and its manifest polled alike,
    with nothing to do; ``opened()`` is called once both are open."""
    s = official()
    dbs, admins = [], []
    for st in filter(None, (store, idle_store)):
        builder = s.DbBuilder(DB, st)
        builder.with_settings(official_settings(poll))
        dbs.append(await builder.build())
        admins.append(s.AdminBuilder(DB, st).build())
    if opened is not None:
        opened()
    m = await admins[0].read_manifest(None)
    for a in admins[1:]:
        await a.read_manifest(None)
    sources = [s.SourceId.SST_VIEW(v.id) for v in m.l0]
    started = time.perf_counter()
    await admins[0].submit_compaction(s.CompactionSpec.TIERED(segment=b"", sources=sources,
                                                              destination=0))
    while True:
        m = await admins[0].read_manifest(None)
        for a in admins[1:]:
            await a.read_manifest(None)
        if not m.l0 and any(sr.id == 0 for sr in m.compacted):
            elapsed = time.perf_counter() - started
            break
        await asyncio.sleep(check_s)
    for db in dbs:
        await db.shutdown()
    return elapsed


def official_compaction(root: Path) -> float:
    """Seconds from submitting TIERED(all L0 -> run 0) until the manifest shows it (local
    directory ``root``; compactor polling every 20 ms)."""
    return asyncio.run(_official_run(local_store(root), "20ms", 0.01))


# ------------------------------------------------------------------------------ slatelib
MARK = "@@bench-compaction "


def worker_main(master: str) -> None:
    """In a child process: one SparkSession; reads one JSON command a line on stdin
    (``{"db": url}``: run the job on it; ``{"stop": true}``), answers each with one
    ``MARK`` + JSON line on stdout (first: ready, with the session start seconds)."""
    sys.path.insert(0, str(REPO))
    out = sys.stdout
    sys.stdout = sys.stderr  # anything else printed goes to the log, not the protocol

    def emit(obj: dict[str, Any]) -> None:
        out.write(MARK + json.dumps(obj) + "\n")
        out.flush()

    t0 = time.perf_counter()
    import slatelib
    from slatelib.spark.session import build_spark

    spark = build_spark("bench-compaction", master=master)
    slots = spark.sparkContext.defaultParallelism
    spark.sparkContext.parallelize(range(slots), slots).map(_warm_up).collect()
    from slatelib.config import load_settings
    from slatelib.jobs.compact import build_parser, run

    settings = load_settings()
    emit({"ready": True, "master": master, "slots": slots,
          "session_s": time.perf_counter() - t0, "slatelib": slatelib.__file__})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("stop"):
            break
        args = build_parser().parse_args(["--db", cmd["db"], "--policy", "l0"])
        t = time.perf_counter()
        report, code = run(spark, settings, args)
        wall = time.perf_counter() - t
        emit({"wall_s": wall, "code": code, "db": report["databases"][0],
              "store_requests": report.get("store_requests")})
    gateway = spark.sparkContext._gateway
    emit({"jvm_peak_rss_bytes": _peak_rss(gateway.proc.pid) if gateway is not None else 0})
    spark.stop()


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


class Session:
    """Our side: a child process holding one SparkSession on ``master`` (with ``one_cpu``
    pinned, JVM and Python workers included, to CPU 0), running this checkout's code."""

    def __init__(self, master: str, *, one_cpu: bool = False) -> None:
        def pin() -> None:
            os.sched_setaffinity(0, {0})

        self.log_path = Path(tempfile.mkstemp(prefix="bench-compaction-", suffix=".log")[1])
        self._log: IO[str] = self.log_path.open("w")
        env = {**os.environ, "SLATELIB_SPARK_LOG_LEVEL": "ERROR",
               "PYTHONPATH": os.pathsep.join(
                   [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", master], cwd=REPO, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            preexec_fn=pin if one_cpu else None)
        self.ready = self._read()
        self.cold_s: float | None = None

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARK):
                answer: dict[str, Any] = json.loads(line[len(MARK):])
                return answer
        raise SystemExit(f"the Spark session process ended; see {self.log_path}")

    def job(self, db_url: str) -> dict[str, Any]:
        """Run the compaction job on ``db_url``; the worker's answer (wall_s, code, db,
        store_requests)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"db": db_url}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"stop": True}) + "\n")
        self.proc.stdin.flush()
        last = self._read()
        self.proc.wait(120)
        self._log.close()
        return last


# ------------------------------------------------------------------------- correctness
def db_stats(store: Any) -> Any:
    """Live keys, bytes and digest of database ``DB`` in ``store`` (a URL or a slatelib
    ObjectStore), by slatelib's read-only reader (writes nothing)."""
    from slatelib.reader import DbReader

    with DbReader.open(DB, store, mode="latest", auto_refresh=False) as r:
        return r.scan_stats()


def check_job(answer: dict[str, Any], expected: Any, store: Any, label: str) -> None:
    """Exit unless the job succeeded, reported rows_out == rows_in, and its output reads
    back with the source's keys, bytes and digest."""
    db = answer["db"]
    if answer["code"] != 0 or db.get("rows_out") != db.get("rows_in"):
        raise SystemExit(f"{label}: compaction failed: {json.dumps(db)[:2000]}")
    got = db_stats(store)
    if got != expected:
        raise SystemExit(f"{label}: the output reads back as {got}, the source as {expected}")


# ---------------------------------------------------------------------------- local runs
def our_local_job(session: Session, src: Path, name: str, expected: Any) -> dict[str, Any]:
    root = fresh_copy(src, name)
    answer = session.job(f"file://{root}/{DB}")
    check_job(answer, expected, f"file://{root}", name)
    shutil.rmtree(root, ignore_errors=True)
    figures: dict[str, Any] = job_figures(answer["db"], answer["wall_s"], expected.nbytes)
    figures["store_requests"] = answer.get("store_requests")
    return figures


def compare_local(session: Session, src: Path, repeat: int, label: str) -> dict[str, Any]:
    """``repeat`` alternating rounds on copies of ``src``: the official compactor, then
    our job."""
    nbytes = input_bytes(src)
    expected = db_stats(f"file://{src}")
    off: list[float] = []
    ours: list[dict[str, Any]] = []
    for i in range(repeat):
        root = fresh_copy(src, f"official-{label}-{i}")
        off.append(official_compaction(root))
        shutil.rmtree(root, ignore_errors=True)
        ours.append(our_local_job(session, src, f"ours-{label}-{i}", expected))
        j = ours[-1]
        b = j["breakdown"]
        say(f"  {label} round {i + 1}: official {off[-1]:.2f}s | ours total {j['total_s']:.2f}s "
              f"(wall {j['wall_s']:.2f}s) -> {off[-1] / j['total_s']:.2f}x | execute "
              f"{b['execute_s']:.2f}s, tasks {b['tasks_s']:.2f}s ({b['task_share']:.0%}), "
              f"overhead {b['overhead_s']:.2f}s ({b['overhead_share']:.0%})"
              f"{' (computed)' if b['computed'] else ''} | {j['mb_s_per_core']:.0f} MB/s per "
              f"core CPU, {j['mb_s_per_task_s']:.0f} per task-second")
        if not b["computed"] and b.get("parts_s"):
            say(f"    execute_breakdown parts_s: {json.dumps(b['parts_s'])}")
    med = median_figures(ours)
    off_s = statistics.median(off)
    return {"input_mb": round(nbytes / MB, 1), "rows": expected.keys,
            "official_runs_s": [round(x, 3) for x in off], "official_s": round(off_s, 3),
            "official_mb_s": round(nbytes / MB / off_s, 1),
            "ours_runs": ours, "ours": med,
            "ours_mb_s": round(nbytes / MB / med["total_s"], 1) if med["total_s"] else 0.0,
            "round_ratios": pair_ratios(off, [j["total_s"] for j in ours]),
            "ratio": round(off_s / med["total_s"], 2) if med["total_s"] else 0.0,
            "ratio_wall": round(off_s / med["wall_s"], 2) if med["wall_s"] else 0.0}


def print_local(label: str, r: dict[str, Any]) -> None:
    o = r["ours"]
    say(f"{label}: {r['input_mb']:.0f} MB; official {r['official_s']:.2f}s "
          f"({r['official_mb_s']:.0f} MB/s), ours total {o['total_s']:.2f}s (wall "
          f"{o['wall_s']:.2f}s): **{r['ratio']:.2f}x** (wall {r['ratio_wall']:.2f}x; rounds "
          f"{r['round_ratios']}); tasks {o['task_share']:.0%} of execute, overhead "
          f"{o['overhead_share']:.0%}{' (computed)' if o['breakdown_computed'] else ''}; "
          f"{o['mb_s_per_core']:.0f} MB/s per core ({o['mb_s_per_task_s']:.0f} per "
          f"task-second; uncompressed {o['logical_mb_s_per_core']:.0f} per core)")


# ------------------------------------------------------------------------------------ S3
def upload(src: Path, bucket: Any) -> None:
    """``src``'s database directory into ``bucket`` (same keys, ``db/...``)."""
    store = bucket.open()
    for p in sorted((src / DB).rglob("*")):
        if p.is_file():
            store.put(p.relative_to(src).as_posix(), p.read_bytes())


def download(bucket: Any, dst: Path) -> Path:
    """Every object of ``bucket`` into directory ``dst`` (same keys); returns ``dst``."""
    store = bucket.open()
    for meta in store.list(""):
        path = dst / meta.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(store.get(meta.path))
    return dst


def _count(bucket: Any) -> dict[str, Any]:
    raw = bucket.requests()
    reqs = {k: int(v) for k, v in raw["requests"].items() if v}
    return {"requests": reqs, "total": sum(reqs.values()), "bytes_in": int(raw["bytes_in"]),
            "bytes_out": int(raw["bytes_out"])}


def _minus(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    kinds = set(a["requests"]) | set(b["requests"])
    reqs = {k: max(0, a["requests"].get(k, 0) - b["requests"].get(k, 0)) for k in kinds}
    return {"requests": {k: v for k, v in reqs.items() if v}, "total": sum(reqs.values()),
            "bytes_in": max(0, a["bytes_in"] - b["bytes_in"]),
            "bytes_out": max(0, a["bytes_out"] - b["bytes_out"])}


def compare_s3(session: Session, endpoint: str, src: Path, work: Path) -> dict[str, Any]:
    """One round on moto S3: the official compactor (idle-Db requests subtracted), then our
    job; MB/s, requests per GB, and the official reader over our output (downloaded into
    ``work``)."""
    from slatelib.core.rescale_check import RangeStats
    from tests.interop.official import read_all, s3_store
    from tests.s3_server import create_bucket

    nbytes = input_bytes(src)
    expected = db_stats(f"file://{src}")
    t = time.perf_counter()
    off_b, idle_b, ours_b = (create_bucket(endpoint) for _ in range(3))
    for b in (off_b, idle_b, ours_b):
        upload(src, b)
    say(f"  s3: {nbytes / MB:.0f} MB uploaded to 3 buckets ({time.perf_counter() - t:.0f}s)")

    def reset() -> None:
        off_b.reset_requests()
        idle_b.reset_requests()

    off_s = asyncio.run(_official_run(s3_store(off_b.name, endpoint=endpoint),
                                      "100ms", 0.05,
                                      idle_store=s3_store(idle_b.name, endpoint=endpoint),
                                      opened=reset))
    off_raw, idle = _count(off_b), _count(idle_b)
    off = _minus(off_raw, idle)
    say(f"  s3 official: {off_s:.2f}s, {off_raw['total']} requests (idle Db "
          f"{idle['total']}, subtracted)")
    ours_b.reset_requests()
    answer = session.job(f"{ours_b.url}/{DB}")
    ours = _count(ours_b)
    check_job(answer, expected, ours_b.open(), "s3")
    # the official reader fetches block by block (thousands of ranged GETs, minutes on
    # moto): it reads the objects our job left in the bucket from a local download
    t = time.perf_counter()
    local = download(ours_b, work / "s3-ours")
    pairs = read_all(local, DB)
    shutil.rmtree(local, ignore_errors=True)
    say(f"  s3: the official DbReader read our output (downloaded; "
        f"{time.perf_counter() - t:.1f}s)")
    official_view = RangeStats.of(pairs)
    if official_view != expected:
        raise SystemExit(f"s3: the official reader sees {official_view}, the source has "
                         f"{expected}")
    fig = job_figures(answer["db"], answer["wall_s"])
    gb = nbytes / GB
    reported = answer.get("store_requests") or {}
    reported_total = reported.get("total") if isinstance(reported, dict) else None
    say(f"  s3 ours: total {fig['total_s']:.2f}s (wall {fig['wall_s']:.2f}s), "
          f"{ours['total']} requests (report: {reported_total}); official reader: "
          f"{official_view.keys} keys, as the source")
    return {"input_mb": round(nbytes / MB, 1), "rows": expected.keys,
            "official_s": round(off_s, 3), "ours": fig,
            "official_mb_s": round(nbytes / MB / off_s, 1),
            "ours_mb_s": round(nbytes / MB / fig["total_s"], 1),
            "ratio": round(off_s / fig["total_s"], 2),
            "official_requests": off, "official_requests_raw": off_raw,
            "official_idle_db_requests": idle, "ours_requests": ours,
            "ours_requests_reported": reported,
            "official_requests_per_gb": round(off["total"] / gb, 1),
            "ours_requests_per_gb": round(ours["total"] / gb, 1),
            "ours_reported_requests_per_gb": (round(reported_total / gb, 1)
                                              if isinstance(reported_total, int) else None),
            "official_reader_keys": official_view.keys}


# ---------------------------------------------------------------------- instruction counts
def run_core(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """``benchmarks/bench_core.py`` (one compaction task in one process, no Spark, no
    storage I/O) when it exists: W1 (with ``--callgrind``: also its instructions per input
    byte), and
    each codec variant with ``--codec-limit`` (the codec library's own speed on the same
    bytes). Returns each run's JSON and a one-line ``summary``."""
    script = HERE / "bench_core.py"
    if not script.exists():
        say("--core: benchmarks/bench_core.py is not in this tree; skipped")
        return {"skipped": "benchmarks/bench_core.py missing"}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = {"W1": ["--rows", str(args.rows), "--l0s", str(args.l0s), "--no-split",
                   *(["--callgrind"] if args.callgrind else [])]}
    for codec in args.codec_list:
        runs[codec] = ["--rows", str(args.codec_rows), "--l0s", str(args.codec_l0s),
                       "--codec", codec, "--codec-limit", "--no-split"]
    out: dict[str, Any] = {}
    parts = []
    for label, extra in runs.items():
        path = work / f"core-{label}.json"
        t = time.perf_counter()
        done = subprocess.run([sys.executable, str(script), "--seed", str(args.seed),
                               "--repeat", "5", *extra, "--json", str(path)], cwd=REPO,
                              env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not path.exists():
            say(f"--core {label}: bench_core.py failed ({done.returncode}): "
                f"{done.stderr[-1500:]}")
            out[label] = {"failed": done.returncode, "stderr": done.stderr[-1500:]}
            continue
        data = json.loads(path.read_text())
        data.pop("runs", None)
        out[label] = data
        figure = f"{label} {data.get('mb_per_cpu_s', 0):.0f} MB/s per CPU-s"
        if "callgrind" in data:
            data["callgrind"].pop("top", None)
            figure += f", {data['callgrind'].get('instr_per_byte', 0):.2f} instructions/byte"
        if "codec_limit" in data:
            lim = data["codec_limit"]
            figure += (f" (codec library alone {lim.get('mb_per_cpu_s', 0):.0f}: "
                       f"{lim.get('ours_over_limit', 0):.2f} of it)")
        parts.append(figure)
        say(f"--core {label} ({time.perf_counter() - t:.0f}s): {figure}")
    out["summary"] = "; ".join(parts)
    return out


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


# ------------------------------------------------------------------------------- scaling
def scaling(src: Path, repeat: int, w1_median_s: float) -> dict[str, Any]:
    """``local[1]`` sessions (free, then pinned to one CPU): their medians against W1's
    ``local[2]`` median (job totals)."""
    expected = db_stats(f"file://{src}")
    out: dict[str, Any] = {}
    for label, pinned in (("local1", False), ("local1_one_cpu", True)):
        session = Session("local[1]", one_cpu=pinned)
        try:
            our_local_job(session, src, f"cold-{label}", expected)
            runs = [our_local_job(session, src, f"{label}-{i}", expected)
                    for i in range(repeat)]
        finally:
            session.close()
        med = statistics.median(j["total_s"] for j in runs)
        out[label] = {"runs_s": [round(j["total_s"], 3) for j in runs],
                      "median_s": round(med, 3),
                      "scaling_to_local2": round(med / w1_median_s, 2) if w1_median_s else 0.0}
        say(f"scaling {label}: {out[label]['runs_s']} -> {out[label]['scaling_to_local2']}x "
              f"to local[2]")
    return out


# ---------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_300_000, help="W1 entries (2300000)")
    p.add_argument("--l0s", type=int, default=10, help="W1 L0 SSTs (10)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--repeat", type=int, default=5, help="alternating rounds (5)")
    p.add_argument("--warmup", type=int, default=3,
                   help="our jobs run first and left out of the medians (3: the cold one "
                        "and two while the JVM's JIT compilers are busy)")
    p.add_argument("--codecs", default="lz4,zstd",
                   help="compressed variants, comma-separated (lz4,zstd; none: skip)")
    p.add_argument("--codec-rows", type=int, default=1_000_000,
                   help="entries of the compressed variants (1000000)")
    p.add_argument("--codec-l0s", type=int, default=4)
    p.add_argument("--no-s3", action="store_true", help="skip the moto S3 comparison")
    p.add_argument("--s3-rows", type=int, default=600_000,
                   help="entries of the S3 database (600000)")
    p.add_argument("--s3-l0s", type=int, default=4)
    p.add_argument("--no-core", dest="core", action="store_false",
                   help="skip benchmarks/bench_core.py (one task alone: MB/s per core, "
                        "and the codecs against their library's own speed)")
    p.add_argument("--callgrind", action="store_true",
                   help="also count W1's instructions per input byte under valgrind "
                        "(bench_core.py --callgrind; a few minutes)")
    p.add_argument("--scaling", action="store_true",
                   help="also local[1] sessions (free and pinned to one CPU)")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    codecs = [c.strip().lower() for c in args.codecs.split(",") if c.strip()]
    args.codec_list = [] if codecs in ([], ["none"]) else codecs
    bad = set(args.codec_list) - {"snappy", "lz4", "zstd"}
    if bad:
        p.error(f"--codecs: unknown codec(s) {sorted(bad)}")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    args = parse_args(argv)
    if args.worker:
        worker_main(args.worker)
        return {}
    given = argv if argv is not None else sys.argv[1:]
    command = " ".join([".venv/bin/python benchmarks/bench_compaction.py", *given])
    if not given:
        command += "` (`make bench-compaction`"
    say(f"{os.cpu_count()} cores, load average "
          f"{[round(x, 2) for x in os.getloadavg()]}")
    cores_before = free_cores()
    say(f"free cores now: {cores_before} of {os.cpu_count()}")
    src = cached_db(args.rows, args.l0s, args.seed)
    codec_srcs = {c: cached_db(args.codec_rows, args.codec_l0s, args.seed, c)
                  for c in args.codec_list}
    s3_src = None if args.no_s3 else cached_db(args.s3_rows, args.s3_l0s, args.seed)
    server = None
    work = Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    results: dict[str, Any] = {"rows": args.rows, "l0s": args.l0s, "repeat": args.repeat}
    session: Session | None = None
    try:
        if s3_src is not None:
            from tests.s3_server import start_moto_server

            server = start_moto_server()
            s3_env(server.endpoint)
        session = Session("local[2]")
        say(f"our session local[2]: started in {session.ready['session_s']:.1f}s "
              f"(slatelib from {session.ready['slatelib']})")
        expected = db_stats(f"file://{src}")
        warm = [our_local_job(session, src, f"warmup-{i}", expected)
                for i in range(max(1, args.warmup))]
        results["cold_job_s"] = round(warm[0]["total_s"], 3)
        results["warmup_jobs_s"] = [round(j["total_s"], 3) for j in warm]
        results["session_s"] = round(session.ready["session_s"], 2)
        totals = ", ".join(f"{j['total_s']:.2f}s" for j in warm)
        say(f"  warm-up jobs (left out; the first is cold): totals {totals}")
        results["w1"] = compare_local(session, src, args.repeat, "W1")
        print_local("W1", results["w1"])
        results["codecs"] = {}
        for codec, csrc in codec_srcs.items():
            results["codecs"][codec] = compare_local(session, csrc, args.repeat, codec)
            print_local(codec, results["codecs"][codec])
        if s3_src is not None and server is not None:
            results["s3"] = compare_s3(session, server.endpoint, s3_src, work)
            s3 = results["s3"]
            say(f"S3: official {s3['official_mb_s']} MB/s, ours {s3['ours_mb_s']} MB/s: "
                  f"**{s3['ratio']:.2f}x**; requests per GB: official "
                  f"{s3['official_requests_per_gb']:.0f}, ours {s3['ours_requests_per_gb']:.0f} "
                  f"(report {s3['ours_reported_requests_per_gb']})")
        closing = session.close()
        session = None
        say("our session closed")
        results["peak_jvm_rss_mb"] = round(closing.get("jvm_peak_rss_bytes", 0) / MB)
    finally:
        if session is not None:
            session.proc.kill()
        if server is not None:
            server.stop()
    if args.scaling:
        results["scaling"] = scaling(src, args.repeat, results["w1"]["ours"]["total_s"])
    if args.core:
        results["core"] = run_core(args, work)
    results["free_cores"] = [cores_before, free_cores()]
    say(f"free cores after: {results['free_cores'][1]}")
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    results["bench_seconds"] = round(time.perf_counter() - started, 1)
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    print()
    print("| benchmark | latest ratio against official | date | command |")
    print("|---|---|---|---|")
    for row in summary_rows(results, date, command):
        print(row)
    print()
    results["targets"] = []
    for name, met, figure in targets(results):
        print(f"{'PASS' if met else 'MISS'}  {name}: {figure}")
        results["targets"].append({"target": name, "met": met, "figure": figure})
    print(f"(targets are informational; the run took {results['bench_seconds']:.0f}s, "
          f"free cores before/after {results['free_cores']})")
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    shutil.rmtree(DATA / "scratch", ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return results


def s3_env(endpoint: str) -> None:
    """S3 settings for slatelib (moto's endpoint), inherited by our session's process, its
    Spark workers and subprocesses."""
    os.environ.update({
        "SLATELIB_S3_ENDPOINT": endpoint, "SLATELIB_S3_ALLOW_HTTP": "true",
        "SLATELIB_S3_REGION": "us-east-1", "SLATELIB_S3_ACCESS_KEY_ID": "testing",
        "SLATELIB_S3_SECRET_ACCESS_KEY": "testing",
    })


if __name__ == "__main__":
    main()
