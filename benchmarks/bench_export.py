"""Export benchmark: the Spark export job (``slatedb`` data source -> Spark's Parquet writer)
vs the official SlateDB 0.17.0 reader's scan drained into pyarrow and written to Parquet.

The database is the compaction benchmark's (``benchmarks/bench_compaction.py``: built once
by the official package with its compactor off and cached under ``benchmarks/data/``):
``--rows`` entries (default 2.3 M) with 16-byte random keys and 100-byte values in ``--l0s``
L0 SSTs (default 10, about 316 MB). Every run reads a fresh copy of it.

- official: ``DbReader.scan()`` of the full key range drained with ``next_batch(4096)``,
  keys and values collected into two pyarrow binary arrays and written with
  ``pyarrow.parquet.write_table``; timed from opening the reader to the closed file.
- slatelib: :func:`slatelib.spark.export.run_export` (``--format parquet``) on a
  ``local[2]`` SparkSession in this process, ``--partitions 2``; timed per export. The
  session start (JVM, Python workers warmed up by one tiny job) is reported separately and
  excluded from the ratio (the target: at least 10x the official rows/s), and so is the
  first (cold) export; ``--warmup N`` runs N untimed exports instead of that one (the JVM's
  JIT keeps speeding Spark's writer up over the first few exports of a session, while a
  ``spark-submit`` export job runs one export in a fresh JVM: the cold figure). Each
  export's CPU seconds (this process, the JVM and the Python workers, from ``/proc``) are
  printed too: unlike the wall time, the machine's other load barely changes them.
  ``--parquet-writer arrow``: the export's opt-in writer (pyarrow in the Spark tasks, the
  files committed by the driver) instead of Spark's own.

Both count the same 2.3 M rows (asserted), and both Parquet outputs are checked to hold
the same number of rows.

    .venv/bin/python benchmarks/bench_export.py [--rows 2300000] [--l0s 10] [--repeat 3]
        [--warmup 1] [--parquet-writer spark|arrow]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from bench_compaction import (  # noqa: E402
    DATA,
    DB,
    MB,
    cached_db,
    free_cores,
    fresh_copy,
    input_bytes,
    official,
)


def official_export(root: Path, out: Path) -> tuple[int, float]:
    """Rows and seconds: official scan -> pyarrow -> Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    s = official()

    async def go() -> tuple[int, float]:
        b = s.ObjectStoreBuilder.from_env(s.ObjectStoreType.LOCAL)
        b.with_config("local_path", str(root))
        t0 = time.perf_counter()
        reader = await s.DbReaderBuilder(DB, b.build()).build()
        it = await reader.scan(s.KeyRange(start=None, start_inclusive=True, end=None,
                                          end_inclusive=False))
        keys: list[bytes] = []
        values: list[bytes] = []
        while True:
            batch = await it.next_batch(4096)
            if not batch:
                break
            for kv in batch:
                keys.append(kv.key)
                values.append(kv.value)
        table = pa.table({"key": pa.array(keys, pa.binary()),
                          "value": pa.array(values, pa.binary())})
        pq.write_table(table, out)
        elapsed = time.perf_counter() - t0
        await reader.shutdown()
        return len(keys), elapsed

    return asyncio.run(go())


def tree_cpu_seconds() -> float:
    """User + system CPU seconds of this process and every live descendant (the Spark JVM and
    its Python workers), from ``/proc`` (0.0 elsewhere): the work of an export, which other
    users of the machine do not inflate the way they inflate its wall time."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile, or not /proc
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        used[pid] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    mine = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, pp in parent.items():
            if pp in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return sum(used.get(pid, 0) for pid in mine) / tick


def ours(src: Path, repeat: int, partitions: int, parquet_writer: str,
         warmup: int = 1) -> dict[str, Any]:
    """Session start, ``warmup`` untimed exports, then ``repeat`` timed ones, each of a
    fresh copy."""
    t0 = time.perf_counter()
    from slatelib.spark.export import ExportArgs, run_export
    from slatelib.spark.session import build_spark

    spark = build_spark("bench-export", master="local[2]")
    spark.sparkContext.parallelize(range(2), 2).map(lambda x: x).collect()  # warm workers
    session_s = time.perf_counter() - t0
    runs = []
    try:
        for i in range(repeat + warmup):  # the warm-up exports are reported, not counted
            root = fresh_copy(src, f"export-{i}")
            out = DATA / "scratch" / f"export-out-{i}"
            shutil.rmtree(out, ignore_errors=True)
            cpu = tree_cpu_seconds()
            t = time.perf_counter()
            fields = run_export(spark, ExportArgs(db=f"file://{root}/{DB}",
                                                  to=f"file://{out}", format="parquet",
                                                  partitions=partitions,
                                                  parquet_writer=parquet_writer))
            runs.append({"seconds": time.perf_counter() - t, "rows": fields["rows"],
                         "bytes": fields["bytes"], "phases": fields["seconds"],
                         "cpu_s": tree_cpu_seconds() - cpu})
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            print(f"  slatelib export {i}{' (cold)' if i == 0 else ''}"
                  f"{' (warm-up)' if 0 < i < warmup else ''}: "
                  f"{runs[-1]['seconds']:.2f}s, {runs[-1]['cpu_s']:.2f} CPU-s, "
                  f"{fields['rows']} rows", flush=True)
    finally:
        spark.stop()
    return {"session_s": session_s, "cold": runs[0], "warmup": runs[1:warmup],
            "runs": runs[warmup:]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_300_000)
    p.add_argument("--l0s", type=int, default=10)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed exports before the timed ones (default 1: the cold one)")
    p.add_argument("--parquet-writer", default="spark", choices=("spark", "arrow"),
                   help="the export's Parquet writer (spark: Spark's own, the default)")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args()
    if args.warmup < 1 or args.repeat < 1:
        p.error("--warmup and --repeat must be at least 1")
    src = cached_db(args.rows, args.l0s, args.seed)
    nbytes = input_bytes(src)
    print(f"database: {args.rows} entries in {args.l0s} L0 SSTs, {nbytes / MB:.0f} MB "
          f"({os.cpu_count()} cores); load average {os.getloadavg()}", flush=True)
    cores_before = free_cores()
    print(f"free cores now: {cores_before} of {os.cpu_count()}", flush=True)
    off = []
    for i in range(args.repeat):
        root = fresh_copy(src, f"official-export-{i}")
        out = DATA / "scratch" / f"official-export-{i}.parquet"
        rows, secs = official_export(root, out)
        import pyarrow.parquet as pq

        assert pq.ParquetFile(out).metadata.num_rows == rows
        off.append({"seconds": secs, "rows": rows})
        shutil.rmtree(root, ignore_errors=True)
        out.unlink()
        print(f"  official run {i + 1}: {secs:.2f}s, {rows} rows", flush=True)
    mine = ours(src, args.repeat, args.partitions, args.parquet_writer, args.warmup)
    cores_after = free_cores()
    rows = off[0]["rows"]
    assert all(r["rows"] == rows for r in off + mine["runs"]), "row counts differ"
    off_s = statistics.median(r["seconds"] for r in off)
    our_s = statistics.median(r["seconds"] for r in mine["runs"])
    results = {
        "rows": rows, "input_mb": round(nbytes / MB, 1), "repeat": args.repeat,
        "partitions": args.partitions, "parquet_writer": args.parquet_writer,
        "official_s": round(off_s, 2), "official_rows_s": round(rows / off_s),
        "slatelib_s": round(our_s, 2), "slatelib_rows_s": round(rows / our_s),
        "session_s": round(mine["session_s"], 2), "cold_s": round(mine["cold"]["seconds"], 2),
        "warmup": args.warmup,
        "warmup_s": [round(r["seconds"], 2) for r in mine["warmup"]],
        "ratio_excluding_session": round(off_s / our_s, 2),
        "ratio_including_session": round(off_s / (our_s + mine["session_s"]), 2),
        "free_cores": [cores_before, cores_after], "load_average": os.getloadavg(),
        "runs": {"official_s": [round(r["seconds"], 2) for r in off],
                 "slatelib_s": [round(r["seconds"], 2) for r in mine["runs"]],
                 "slatelib_phases": [r["phases"] for r in mine["runs"]],
                 "slatelib_cpu_s": [round(r["cpu_s"], 2) for r in mine["runs"]]},
    }
    print(f"official scan -> pyarrow -> Parquet: {results['official_s']}s "
          f"({results['official_rows_s']:,} rows/s)")
    print(f"slatelib export (local[2], {args.parquet_writer} writer): {results['slatelib_s']}s "
          f"({results['slatelib_rows_s']:,} rows/s), median "
          f"{statistics.median(r['cpu_s'] for r in mine['runs']):.2f} CPU-s (driver, JVM and "
          f"Python workers), session start {results['session_s']}s")
    print(f"ratio excluding session: {results['ratio_excluding_session']}x, including: "
          f"{results['ratio_including_session']}x; free cores {results['free_cores']}")
    print(json.dumps(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
