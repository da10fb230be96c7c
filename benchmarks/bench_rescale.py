"""Rescale benchmark: official SlateDB 0.17.0 clones + compactor vs slatelib's Spark job.

A database written by the official package is split 4 ways (``--into``) and the shards are
merged back into one, by each side, on fresh copies of the same data.

The database (built once by the official package, cached under ``benchmarks/data/``):
``--rows`` entries (default 2.2 M, about 300 MB) with 16-byte random keys and 100-byte
values, written in ``--l0s`` flushes (default 10). The first ``--run-l0s`` (default 4) are
compacted by the official compactor into sorted run 0, so the source holds one sorted run
and 6 L0 SSTs. Each flush writes the WAL first, so no WAL data is left to replay (0.17
cannot project a source that has some). The sorted keys are cached next to it
(``keys.bin``) for the correctness check.

- official: an official detached checkpoint of the source, then one projected clone per
  shard from it (``CloneBuilder`` with a projection range; the clones run one at a time,
  each shard's compaction starts as soon as its clone exists), then the official compactor
  (an official ``Db`` with its embedded compactor, which never schedules on its own) runs a
  submitted TIERED compaction of all the shard's L0 views and sorted runs into one run. The
  four shards run concurrently in one event loop. 0.17 has no detach job (its GC detaches
  later): a shard counts as done when its manifest references only SSTs in its own
  ``compacted/`` (no L0, one run); then its ``Db`` is shut down. Merge: one union clone of
  the 4 shards plus the same full compaction.
- slatelib: ``jobs/rescale.py``'s ``run()`` (split, then merge of the 4 shards) on one
  ``local[2]`` SparkSession in a child process: flush check, checkpoint, clones, compaction
  of every shard on the executors (the key ranges of all shards in one Spark job, each
  task also reading its outputs back and its source range at the checkpoint for the
  validation: the rows of every shard compared exactly with its source range's; the
  driver then checks the commits, docs/rfcs/0016-rescale-check-in-tasks.md), detach and
  release. A shard is done when
  the job returns (detach comes after the validation of all shards). The session start
  (JVM, Python workers warmed up by one tiny job) is reported separately.

Each side's first split + merge is a cold warm-up: printed, left out of the medians. After
every run (untimed) the rows of every shard and of the merged database are counted with
slatelib's ``DbReader`` and compared with the source's keys in each shard's range.

Prints medians, the ratios official / slatelib (excluding and including the Spark session
start) and our phases, as text and JSON.

    .venv/bin/python benchmarks/bench_rescale.py [--rows 2200000] [--l0s 10] [--run-l0s 4]
        [--into 4] [--repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
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
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from bench_compaction import (  # noqa: E402  (the shared helpers of the compaction bench)
    DATA,
    DB,
    MB,
    _peak_rss,
    free_cores,
    local_store,
    official,
)

MERGED = "merged"
KEY_LEN = 16


def shard_path(i: int) -> str:
    return f"shard-{i}"


def official_settings(*, compactor: bool) -> Any:
    """0.17 defaults, no flush timer, no GC; an embedded compactor that only runs
    submitted compactions (polling every 20 ms), or none."""
    s = official()
    st = s.Settings.default()
    if compactor:
        co = json.loads(st.to_json_string())["compactor_options"]
        co["poll_interval"] = "20ms"
        co["scheduler_options"] = {"min_compaction_sources": "1000",
                                   "max_compaction_sources": "1000"}
        co["worker"]["compactions_poll_interval"] = "20ms"
        st.set("compactor_options", json.dumps(co))
    else:
        st.set("compactor_options", "null")
    for key, value in {"flush_interval": "null", "garbage_collector_options": "null",
                       "l0_max_ssts": "64", "l0_max_ssts_per_key": "64"}.items():
        st.set(key, value)
    return st


# ------------------------------------------------------------------------------ database
def build_db(root: Path, rows: int, l0s: int, run_l0s: int, seed: int) -> list[bytes]:
    """Write the benchmark database with the official package; returns its sorted keys."""
    s = official()

    async def go() -> list[bytes]:
        store = local_store(root)
        st = official_settings(compactor=True)
        st.set("l0_sst_size_bytes", str(1 << 30))
        st.set("max_unflushed_bytes", str(1 << 32))
        builder = s.DbBuilder(DB, store)
        builder.with_settings(st)
        db = await builder.build()
        admin = s.AdminBuilder(DB, store).build()
        rng = random.Random(seed)
        keys: list[bytes] = []
        per, batch = rows // l0s, 10_000
        for n in range(l0s):
            done = 0
            while done < per:
                wb = s.WriteBatch()
                for _ in range(min(batch, per - done)):
                    k = rng.randbytes(KEY_LEN)
                    keys.append(k)
                    wb.put(k, rng.randbytes(100))
                await db.write(wb)
                done += batch
            # WAL first, then the memtable: no WAL data is left above replay_after_wal_id
            await db.flush_with_options(s.FlushOptions(flush_type=s.FlushType.WAL))
            await db.flush_with_options(s.FlushOptions(flush_type=s.FlushType.MEM_TABLE))
            if n + 1 == run_l0s:
                m = await admin.read_manifest(None)
                spec = s.CompactionSpec.TIERED(
                    segment=b"", sources=[s.SourceId.SST_VIEW(v.id) for v in m.l0],
                    destination=0)
                await admin.submit_compaction(spec)
                await wait_compacted(admin, root / DB, 0)
        await db.shutdown()
        m = await admin.read_manifest(None)
        if m.replay_after_wal_id != m.next_wal_sst_id - 1:
            raise SystemExit(f"the source has WAL data to replay: replay_after_wal_id "
                             f"{m.replay_after_wal_id}, next_wal_sst_id {m.next_wal_sst_id}")
        return sorted(set(keys))

    return asyncio.run(go())


def cached_db(rows: int, l0s: int, run_l0s: int, seed: int) -> Path:
    root = DATA / f"rescale_{rows}_{l0s}_{run_l0s}_{seed}"
    if not (root / "READY").exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        print(f"building the benchmark database in {root} (once) ...", flush=True)
        t = time.perf_counter()
        keys = build_db(root, rows, l0s, run_l0s, seed)
        (root / "keys.bin").write_bytes(b"".join(keys))
        (root / "READY").write_text(json.dumps({"rows": rows, "l0s": l0s, "run_l0s": run_l0s,
                                                "seed": seed, "keys": len(keys)}))
        print(f"  built in {time.perf_counter() - t:.1f}s", flush=True)
    return root


SCRATCH = DATA / "scratch" / "rescale"
"""This benchmark's own copies (other benchmarks keep theirs next to it, under scratch/)."""


def copy_source(src: Path, name: str) -> Path:
    """A fresh copy of the database alone (``copy2`` keeps the mtimes)."""
    dst = SCRATCH / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("READY", "keys.bin"))
    return dst


def source_keys(src: Path) -> list[bytes]:
    raw = (src / "keys.bin").read_bytes()
    return [raw[i:i + KEY_LEN] for i in range(0, len(raw), KEY_LEN)]


def source_shape(root: Path) -> dict[str, Any]:
    s = official()

    async def go() -> Any:
        return await s.AdminBuilder(DB, local_store(root)).build().read_manifest(None)

    m = asyncio.run(go())
    live = {v.sst.id.value for v in m.l0}
    live |= {v.sst.id.value for r in m.compacted for v in r.sst_views}
    compacted = root / DB / "compacted"
    return {"l0": len(m.l0), "sorted_runs": [len(r.sst_views) for r in m.compacted],
            "bytes": sum((compacted / f"{i}.sst").stat().st_size for i in live)}


def expected_counts(keys: list[bytes], split: list[bytes]) -> list[int]:
    cuts = [0, *(bisect.bisect_left(keys, k) for k in split), len(keys)]
    return [b - a for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def count_rows(root: Path, path: str) -> int:
    """Live rows of a database, read with slatelib's ``DbReader`` (untimed check)."""
    from slatelib import DbReader

    with DbReader.open(path, f"file://{root}", mode="latest") as reader:
        return sum(1 for _ in reader.scan())


def check_counts(side: str, counts: dict[str, Any], expected: list[int]) -> None:
    if counts["shards"] != expected or counts["merged"] != sum(expected):
        raise SystemExit(f"{side}: row counts differ from the source: shards "
                         f"{counts['shards']} (expected {expected}), merged "
                         f"{counts['merged']} (expected {sum(expected)})")


# ----------------------------------------------------------------------------- official
def own_ssts_only(m: Any, db_dir: Path, destination: int) -> bool:
    """No L0, one sorted run (``destination``), every SST of it in ``db_dir/compacted``."""
    if m.l0 or [r.id for r in m.compacted] != [destination]:
        return False
    own = {p.stem for p in (db_dir / "compacted").iterdir()}
    return all(v.sst.id.value in own for v in m.compacted[0].sst_views)


async def wait_compacted(admin: Any, db_dir: Path, destination: int) -> None:
    while True:
        m = await admin.read_manifest(None)
        if own_ssts_only(m, db_dir, destination):
            return
        await asyncio.sleep(0.01)


async def compact_fully(root: Path, path: str) -> None:
    """All L0 views and sorted runs of ``path`` into one run, by the official compactor of
    an official ``Db``; returns once the manifest references only the database's own SSTs."""
    s = official()
    store = local_store(root)
    builder = s.DbBuilder(path, store)
    builder.with_settings(official_settings(compactor=True))
    db = await builder.build()
    admin = s.AdminBuilder(path, store).build()
    m = await admin.read_manifest(None)
    sources = [s.SourceId.SST_VIEW(v.id) for v in m.l0]
    sources += [s.SourceId.SORTED_RUN(r.id) for r in m.compacted]
    runs = [r.id for r in m.compacted]
    destination = min(runs) if runs else 0
    await admin.submit_compaction(s.CompactionSpec.TIERED(segment=b"", sources=sources,
                                                          destination=destination))
    await wait_compacted(admin, root / path, destination)
    await db.shutdown()


def key_range(start: bytes | None, end: bytes | None) -> Any:
    return official().KeyRange(start=start, start_inclusive=True, end=end, end_inclusive=False)


def official_rescale(root: Path, split: list[bytes]) -> dict[str, Any]:
    """Split (checkpoint, projected clones, full compactions) then merge (union clone, full
    compaction); seconds from the start of each until each database is done."""
    s = official()
    bounds = list(zip([None, *split], [*split, None], strict=True))

    async def split_all() -> dict[str, Any]:
        store = local_store(root)
        started = time.perf_counter()
        admin = s.AdminBuilder(DB, store).build()
        cp = await admin.create_detached_checkpoint(
            s.CheckpointOptions(lifetime_ms=None, source=None, name=None))
        clone_lock = asyncio.Lock()

        async def shard(i: int) -> tuple[float, float]:
            lo, hi = bounds[i]
            async with clone_lock:  # clones write the source's manifest: one at a time
                spec = s.CloneSourceSpec(path=DB, checkpoint=cp.id,
                                         projection_range=key_range(lo, hi))
                await s.AdminBuilder(shard_path(i), store).build() \
                    .create_clone_builder_from_source(spec).build()
                cloned = time.perf_counter() - started
            await compact_fully(root, shard_path(i))
            return cloned, time.perf_counter() - started

        done = await asyncio.gather(*(shard(i) for i in range(len(bounds))))
        await admin.delete_checkpoint(cp.id)
        return {"seconds": time.perf_counter() - started,
                "shard_cloned_s": [c for c, _ in done], "shard_done_s": [d for _, d in done]}

    async def merge_all() -> dict[str, Any]:
        store = local_store(root)
        started = time.perf_counter()
        specs = [s.CloneSourceSpec(path=shard_path(i), checkpoint=None, projection_range=None)
                 for i in range(len(bounds))]
        builder = s.AdminBuilder(MERGED, store).build().create_clone_builder_from_source(specs[0])
        for spec in specs[1:]:
            builder.with_source(spec)
        await builder.build()
        cloned = time.perf_counter() - started
        await compact_fully(root, MERGED)
        return {"seconds": time.perf_counter() - started, "cloned_s": cloned}

    out = {"split": asyncio.run(split_all()), "merge": asyncio.run(merge_all())}
    out["counts"] = {"shards": [count_rows(root, shard_path(i)) for i in range(len(bounds))],
                     "merged": count_rows(root, MERGED)}
    return out


# ------------------------------------------------------------------------------ slatelib
def rescale_args(command: str, root: Path, into: int) -> list[str]:
    common = ["--store-root", f"file://{root}", "--live-window", "0s"]
    if command == "split":
        return ["split", "--db", f"file://{root}/{DB}", "--into", str(into),
                "--to", f"file://{root}/shard-{{i}}", *common]
    sources = [a for i in range(into) for a in ("--source", f"file://{root}/{shard_path(i)}")]
    return ["merge", *sources, "--to", f"file://{root}/{MERGED}", *common]


def dry_run_keys(src: Path, into: int) -> list[str]:
    """The split keys our job chooses (a dry run, on a copy: nothing is written)."""
    from slatelib.jobs._common import settings_from
    from slatelib.jobs.rescale import build_parser, run

    root = copy_source(src, "dry-run")
    args = build_parser().parse_args([*rescale_args("split", root, into), "--dry-run"])
    report, code = run(None, settings_from(args), args)
    shutil.rmtree(root, ignore_errors=True)
    if code != 0:
        raise SystemExit(f"dry run failed: {json.dumps(report)[:2000]}")
    keys: list[str] = report["split_keys"]
    return keys


def _summary(report: dict[str, Any]) -> dict[str, Any]:
    """What the benchmark keeps of a job report."""
    targets = []
    for t in report["targets"]:
        c = t.get("compaction", {})
        targets.append({"path": t["path"], "keys": t.get("keys"),
                        "compaction": {k: c.get(k) for k in ("outcome", "tasks", "rows_in",
                                                             "rows_out", "bytes_in", "bytes_out",
                                                             "outputs", "phases_s")},
                        "detach": [d["status"] for d in t.get("detach", [])]})
    return {"phases_s": report["phases_s"], "split_keys": report.get("split_keys"),
            "validation_ok": report.get("validation", {}).get("ok"), "targets": targets}


def worker_main(src: Path, repeat: int, into: int) -> None:
    """In a child process: one local[2] SparkSession, ``repeat + 1`` split + merge runs
    (the first one cold), JSON on stdout."""
    t0 = time.perf_counter()
    from slatelib.spark.session import build_spark

    spark = build_spark("bench-rescale", master="local[2]")
    slots = spark.sparkContext.defaultParallelism
    spark.sparkContext.parallelize(range(slots), slots).map(_warm_up).collect()
    session_s = time.perf_counter() - t0
    from slatelib.jobs._common import settings_from
    from slatelib.jobs.rescale import build_parser, run

    runs = []
    for i in range(repeat + 1):
        root = copy_source(src, f"ours-{i}")
        one: dict[str, Any] = {}
        for command in ("split", "merge"):
            args = build_parser().parse_args(rescale_args(command, root, into))
            t = time.perf_counter()
            report, code = run(spark, settings_from(args), args)
            elapsed = time.perf_counter() - t
            if code != 0 or report.get("outcome") != "done":
                raise SystemExit(f"{command} failed: {json.dumps(report)[:3000]}")
            one[command] = {"seconds": elapsed, **_summary(report)}
        one["counts"] = {"shards": [count_rows(root, shard_path(j)) for j in range(into)],
                         "merged": count_rows(root, MERGED)}
        runs.append(one)
        shutil.rmtree(root, ignore_errors=True)
        print(f"  slatelib local[2] run {i}{' (cold, not counted)' if i == 0 else ''}: split "
              f"{one['split']['seconds']:.2f}s, merge {one['merge']['seconds']:.2f}s",
              file=sys.stderr, flush=True)
    jvm_peak = _peak_rss(spark.sparkContext._gateway.proc.pid)
    spark.stop()
    print(json.dumps({"slots": slots, "session_s": session_s, "cold": runs[0],
                      "runs": runs[1:], "jvm_peak_rss_bytes": jvm_peak}))


def _warm_up(_: int) -> int:
    import slatelib.ops.compaction  # noqa: F401  (imports the executor side once)
    import slatelib.ops.rescale  # noqa: F401

    return os.getpid()


def ours(src: Path, repeat: int, into: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", "--src", str(src), "--repeat", str(repeat),
         "--into", str(into)],
        check=False, stdout=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "SLATELIB_SPARK_LOG_LEVEL": "ERROR"},
    )
    if proc.returncode != 0:
        raise SystemExit(f"the slatelib worker failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------------------------- main
def _med(xs: list[float]) -> float:
    return round(statistics.median(xs), 2)


def _median_phases(reports: list[dict[str, Any]]) -> dict[str, float]:
    names = list(reports[0]["phases_s"])
    return {n: _med([r["phases_s"].get(n, 0.0) for r in reports]) for n in names}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_200_000)
    p.add_argument("--l0s", type=int, default=10, help="flushes (L0 SSTs) written")
    p.add_argument("--run-l0s", type=int, default=4,
                   help="of which the first N are compacted into sorted run 0 (0: none)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--into", type=int, default=4, help="shards")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--src", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker_main(Path(args.src), args.repeat, args.into)
        return
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    src = cached_db(args.rows, args.l0s, args.run_l0s, args.seed)
    keys = source_keys(src)
    shape = source_shape(src)
    print(f"database: {len(keys)} keys, {shape['l0']} L0 SSTs + sorted runs of "
          f"{shape['sorted_runs']} SSTs, {shape['bytes'] / MB:.0f} MB; split into "
          f"{args.into} and merged back ({os.cpu_count()} cores)", flush=True)

    from slatelib.core.rescale_plan import parse_split_keys

    split_text = dry_run_keys(src, args.into)
    split = list(parse_split_keys(",".join(split_text)))
    expected = expected_counts(keys, split)
    print(f"split keys (our dry run, used by both sides): {split_text}\n"
          f"rows per shard in the source: {expected}", flush=True)

    load_before = round(os.getloadavg()[0], 2)
    cores_before = free_cores()
    print(f"free cores now: {cores_before} of {os.cpu_count()}", flush=True)
    off = []
    for i in range(args.repeat + 1):
        root = copy_source(src, f"official-{i}")
        r = official_rescale(root, split)
        shutil.rmtree(root, ignore_errors=True)
        check_counts("official", r["counts"], expected)
        print(f"  official run {i}{' (cold, not counted)' if i == 0 else ''}: split "
              f"{r['split']['seconds']:.2f}s (shards done at "
              f"{[round(x, 2) for x in r['split']['shard_done_s']]}), merge "
              f"{r['merge']['seconds']:.2f}s", flush=True)
        off.append(r)
    cold_off, off = off[0], off[1:]
    us = ours(src, args.repeat, args.into)
    for r in [us["cold"], *us["runs"]]:
        check_counts("slatelib", r["counts"], expected)
        if r["split"]["split_keys"] != split_text:
            raise SystemExit(f"slatelib chose other split keys: {r['split']['split_keys']}")
        for command in ("split", "merge"):
            if not r[command]["validation_ok"]:
                raise SystemExit(f"slatelib {command}: validation failed")
    cores_after = free_cores()

    session = us["session_s"]
    o_split = _med([r["split"]["seconds"] for r in off])
    o_merge = _med([r["merge"]["seconds"] for r in off])
    o_total = _med([r["split"]["seconds"] + r["merge"]["seconds"] for r in off])
    u_split = _med([r["split"]["seconds"] for r in us["runs"]])
    u_merge = _med([r["merge"]["seconds"] for r in us["runs"]])
    u_total = _med([r["split"]["seconds"] + r["merge"]["seconds"] for r in us["runs"]])
    # derived: our runs minus their validate phase (0.17 checks nothing); with the check in
    # the compaction tasks, its reads are in the compact phase, so this hardly differs
    u_unchecked = _med([r["split"]["seconds"] + r["merge"]["seconds"]
                        - r["split"]["phases_s"]["validate"] - r["merge"]["phases_s"]["validate"]
                        for r in us["runs"]])
    results = {
        "rows": len(keys), "source": shape, "source_mb": round(shape["bytes"] / MB, 1),
        "into": args.into, "repeat": args.repeat, "split_keys": split_text,
        "rows_per_shard": expected, "rows_checked": True,
        "official": {"split_s": o_split, "merge_s": o_merge, "end_to_end_s": o_total,
                     "split_shard_done_s": [_med([r["split"]["shard_done_s"][j] for r in off])
                                            for j in range(args.into)],
                     "split_shard_cloned_s": [
                         _med([r["split"]["shard_cloned_s"][j] for r in off])
                         for j in range(args.into)],
                     "merge_cloned_s": _med([r["merge"]["cloned_s"] for r in off])},
        "slatelib_local2": {"split_s": u_split, "merge_s": u_merge, "end_to_end_s": u_total,
                            "session_s": round(session, 2),
                            "end_to_end_without_validate_s": u_unchecked,
                            "split_phases_s": _median_phases([r["split"] for r in us["runs"]]),
                            "merge_phases_s": _median_phases([r["merge"] for r in us["runs"]]),
                            "jvm_peak_rss_mb": round(us["jvm_peak_rss_bytes"] / MB)},
        "ratio_official_over_slatelib": {
            "split_excluding_session": round(o_split / u_split, 2),
            "merge_excluding_session": round(o_merge / u_merge, 2),
            "end_to_end_excluding_session": round(o_total / u_total, 2),
            "end_to_end_including_session": round(o_total / (u_total + session), 2),
            "end_to_end_excluding_session_and_validate": round(o_total / u_unchecked, 2),
        },
        "free_cores": [cores_before, cores_after],
        "load_average": [load_before, round(os.getloadavg()[0], 2)],
        "cold_s": {"official": [cold_off["split"]["seconds"], cold_off["merge"]["seconds"]],
                   "slatelib": [us["cold"]["split"]["seconds"], us["cold"]["merge"]["seconds"]]},
        "runs": {
            "official": [[r["split"]["seconds"], r["merge"]["seconds"]] for r in off],
            "slatelib": [[r["split"]["seconds"], r["merge"]["seconds"]] for r in us["runs"]]},
        "slatelib_last_split_targets": us["runs"][-1]["split"]["targets"],
        "slatelib_last_merge_targets": us["runs"][-1]["merge"]["targets"],
    }
    ratio = results["ratio_official_over_slatelib"]
    u = results["slatelib_local2"]
    print(f"official 0.17 (clones + compactor): split {o_split}s, merge {o_merge}s, "
          f"end to end {o_total}s")
    print(f"slatelib local[2] (jobs/rescale.py): split {u_split}s, merge {u_merge}s, "
          f"end to end {u_total}s; session start {u['session_s']}s")
    print(f"ratio official / slatelib: split {ratio['split_excluding_session']}x, merge "
          f"{ratio['merge_excluding_session']}x, end to end "
          f"{ratio['end_to_end_excluding_session']}x excluding the session start, "
          f"{ratio['end_to_end_including_session']}x including it")
    print(f"without our validate phase (derived; 0.17 checks nothing): end to end "
          f"{u_unchecked}s, ratio {ratio['end_to_end_excluding_session_and_validate']}x")
    print(f"slatelib split phases: {u['split_phases_s']}")
    print(f"slatelib merge phases: {u['merge_phases_s']}")
    print(f"rows checked: every shard and the merged database on both sides; free cores "
          f"{results['free_cores']}, load average {results['load_average']}")
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    shutil.rmtree(SCRATCH, ignore_errors=True)


if __name__ == "__main__":
    main()
