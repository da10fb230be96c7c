"""Export (Delta) benchmark: full and incremental Delta exports by delta-spark and by
delta-rs against the official SlateDB 0.17.0 reader drained to Parquet, with each export in
its own fresh process so that its peak memory is its own.

Two databases, built once and cached under ``benchmarks/data/``:

- full: the compaction benchmark's (``benchmarks/bench_compaction.py``: ``--rows``, default
  2.3 M, 16-byte random keys and 100-byte values in ``--l0s`` L0 SSTs, written by the
  official package);
- incremental: ``--base`` rows (default 3 M; 16-byte keys, 100-byte values) bulk-loaded
  (``slatelib.ops.bulk_load``, one sorted run) and checkpointed (``bench-cp1``), then
  ``--changes`` operations (default 3 M) written by slatelib's writer and flushed to L0
  SSTs: half of them overwrite existing keys with new values, a quarter delete existing
  keys, a quarter insert new keys (keys are BLAKE2b hashes of an index, so each kind is
  spread over the key space), then checkpointed again (``bench-cp2``). The checkpoint
  ``bench-cp2`` holds ``base`` rows again and differs from ``bench-cp1`` in ``changes``
  keys: the incremental export's change set is ``changes`` rows (upserts and deletes).

What each run is (all on a fresh copy of the database; the Delta exports through
:func:`slatelib.spark.export.run_export`, ``--partitions 2``, default ``--master
local-cluster[2,1,1024]``: a driver JVM and two executor JVMs of one core and 1 GiB each):

- full / official: ``DbReader.scan()`` of the latest state (the cached database's only
  state) drained with ``next_batch(4096)`` into pyarrow and written to one Parquet file
  (``bench_export.official_export``);
- full / delta-spark, delta-rs: a full export (``--format delta``, a new table) with
  ``delta_writer`` forced to each;
- incremental / official: the official package has no diff between checkpoints (nor a way
  to open its reader at a given checkpoint in the Python binding), so its baseline is the
  full drain of the database's latest state, which is ``bench-cp2``: a full re-export of
  ``base`` rows;
- incremental / delta-spark, delta-rs: a table made once per writer by a full export of
  ``bench-cp1`` (timed and measured too, reported as "full of cp1"), copied fresh for every
  run, then ``--mode incremental --checkpoint bench-cp2``: delta-spark's MERGE executed by
  Spark, or delta-rs' merge of the Spark-staged change rows in the Python driver;
- incremental / delta-spark with ``spark.driver.memory=512m`` (in the first repeat only, or
  alone with ``--only incremental-512m``), once as is and once with broadcast joins off
  (``spark.sql.autoBroadcastJoinThreshold=-1``).

Times: the export alone (``run_export``), excluding the Spark session start (reported
separately); rows/s are the rows the export read: the checkpoint's rows for full exports,
the change rows for incremental ones (and ``base`` rows for the official re-export).

Memory (Linux ``/proc``; a sampler thread in the run's process polls every 0.2 s the
process tree below it): the Python driver's ``VmHWM`` (its ``ru_maxrss`` is recorded too,
but Linux carries a parent's over fork and exec), the driver JVM's ``VmHWM``, each executor JVM's ``VmHWM`` and each Python worker's ``VmHWM`` (the largest of
each kind is reported), and the executor's sampled peak of JVM + Python workers' RSS taken
together. In ``local[N]`` mode there are no executor JVMs (the driver JVM runs the tasks).

Checks: every Delta table holds exactly the rows of its checkpoint (``DeltaTable.count()``),
the incremental tables hold as many rows as the official drain of ``bench-cp2``, and in the
first repeat the two incremental tables and the official Parquet file hold the same
(key, value) pairs.

    .venv/bin/python benchmarks/bench_export_delta.py [--rows 2300000] [--base 3000000]
        [--changes 3000000] [--repeat 3] [--master 'local-cluster[2,1,1024]']
        [--only full|incremental] [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from bench_compaction import DATA, DB, MB, cached_db, free_cores, fresh_copy  # noqa: E402

JARS_DIR_ENV = "SLATELIB_SPARK_JARS_DIR"
CP1, CP2 = "bench-cp1", "bench-cp2"
SCRATCH = DATA / "scratch"
SAVE: dict[str, Any] = {}
"""``results`` and ``--json``: the results are written after every run."""


def save() -> None:
    if SAVE.get("path"):
        Path(SAVE["path"]).write_text(json.dumps(SAVE["results"], indent=1))


# ------------------------------------------------------------------ the incremental database
def change_key(i: int) -> bytes:
    return hashlib.blake2b(i.to_bytes(8, "big"), digest_size=16).digest()


def build_incremental_db(root: Path, base: int, changes: int, seed: int) -> dict[str, Any]:
    """``base`` rows bulk-loaded, checkpoint ``bench-cp1``; ``changes`` operations (half
    overwrites, a quarter deletes of existing keys, a quarter inserts) by slatelib's writer,
    flushed; checkpoint ``bench-cp2``."""
    from dataclasses import replace

    from slatelib.config import Settings, WriterSettings
    from slatelib.ops.bulk_load import bulk_load
    from slatelib.ops.checkpoint import create_checkpoint
    from slatelib.writer.batch import WriteBatch
    from slatelib.writer.db import Db

    updates, deletes = changes // 2, changes // 4
    inserts = changes - updates - deletes
    if updates + deletes > base:
        raise SystemExit(f"--changes {changes} needs --base of at least {updates + deletes}")
    rng = random.Random(seed)
    url = f"file://{root}"
    t = time.perf_counter()
    bulk_load(DB, url, ((change_key(i), rng.randbytes(100)) for i in range(base)))
    cp1 = create_checkpoint(DB, url, lifetime=None, name=CP1)
    print(f"  bulk load of {base} rows: {time.perf_counter() - t:.1f}s", flush=True)
    t = time.perf_counter()
    settings = replace(Settings(), writer=replace(WriterSettings(), l0_max_ssts=1000))
    db = Db.open(DB, url, settings)
    ops = ([("put", i) for i in range(updates)]
           + [("delete", i) for i in range(updates, updates + deletes)]
           + [("put", i) for i in range(base, base + inserts)])
    rng.shuffle(ops)
    done = 0
    for start in range(0, len(ops), 10_000):
        wb = WriteBatch()
        for kind, i in ops[start:start + 10_000]:
            if kind == "put":
                wb.put(change_key(i), rng.randbytes(100))
            else:
                wb.delete(change_key(i))
        db.write(wb)
        done += 10_000
        if done % 500_000 == 0:
            db.flush()
    db.close(flush="memtable")
    cp2 = create_checkpoint(DB, url, lifetime=None, name=CP2)
    print(f"  {changes} changes written: {time.perf_counter() - t:.1f}s", flush=True)
    return {"base": base, "changes": changes, "updates": updates, "deletes": deletes,
            "inserts": inserts, "rows_cp1": base, "rows_cp2": base - deletes + inserts,
            "cp1": str(cp1.id), "cp2": str(cp2.id), "seed": seed}


def cached_incremental_db(base: int, changes: int, seed: int) -> tuple[Path, dict[str, Any]]:
    root = DATA / f"export_incremental_{base}_{changes}_{seed}"
    ready = root / "READY"
    if not ready.exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        print(f"building the incremental database in {root} (once) ...", flush=True)
        info = build_incremental_db(root, base, changes, seed)
        ready.write_text(json.dumps(info))
    return root, json.loads(ready.read_text())


def db_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / DB).rglob("*.sst"))


# ------------------------------------------------------------------ one run, in its own process
def _status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmHWM:", "VmRSS:")):
                out[line[:5]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _role(cmd: str) -> str:
    """What a process is, from its command line (the launcher's JVM, which only prints the
    driver JVM's command, is not the driver)."""
    if not cmd:
        return "gone"
    if "org.apache.spark.launcher.Main" in cmd:
        return "launcher_jvm"
    if "CoarseGrainedExecutorBackend" in cmd:
        return "executor_jvm"
    if "org.apache.spark.deploy.SparkSubmit" in cmd:
        return "driver_jvm"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        return "python_worker"
    if "java" in cmd.split(" ", 1)[0]:
        return "other_jvm"
    return "other"


class Sampler:
    """Polls the process tree below this process: the largest ``VmHWM`` seen per process
    (with its role and parent), and per executor JVM the largest sampled RSS of it and the
    Python workers below it taken together."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.procs: dict[int, dict[str, Any]] = {}
        self.tree_peak: dict[int, int] = {}
        self.driver_xmx: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.sample()
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        parent: dict[int, int] = {}
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
        children: dict[int, list[int]] = {}
        for pid, pp in parent.items():
            children.setdefault(pp, []).append(pid)
        me = os.getpid()
        todo, mine = [me], []
        while todo:
            pid = todo.pop()
            mine.append(pid)
            todo.extend(children.get(pid, ()))
        rss: dict[int, int] = {}
        for pid in mine:
            st = _status(pid)
            if not st:
                continue
            rec = self.procs.get(pid)
            if rec is None:
                rec = self.procs[pid] = {"role": "other", "parent": parent.get(pid), "hwm": 0}
            if pid == me:
                rec["role"] = "driver_python"
            elif rec["role"] in ("other", "other_jvm", "gone"):  # bash exec()s the JVMs
                cmd = _cmdline(pid)
                rec["role"] = _role(cmd)
                if rec["role"] == "driver_jvm":
                    self.driver_xmx = [a for a in cmd.split() if a.startswith("-Xmx")]
            rec["hwm"] = max(rec["hwm"], st.get("VmHWM", 0))
            rss[pid] = st.get("VmRSS", 0)
        for pid, rec in self.procs.items():
            if rec["role"] == "executor_jvm" and pid in rss:
                total, todo = 0, [pid]
                while todo:
                    p = todo.pop()
                    total += rss.get(p, 0)
                    todo.extend(children.get(p, ()))
                self.tree_peak[pid] = max(self.tree_peak.get(pid, 0), total)

    def summary(self) -> dict[str, Any]:
        by_role: dict[str, list[int]] = {}
        for rec in self.procs.values():
            by_role.setdefault(rec["role"], []).append(rec["hwm"])
        return {"peak_by_role": {r: max(v) for r, v in by_role.items()},
                "count_by_role": {r: len(v) for r, v in by_role.items()},
                "executor_tree_peak": max(self.tree_peak.values(), default=0),
                "driver_jvm_xmx": self.driver_xmx}


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One measured run in this (fresh) process: ``spec["kind"]`` official or export."""
    sampler = Sampler()
    sampler.start()
    out: dict[str, Any] = {"spec": spec}
    if spec["kind"] == "official":
        from bench_export import official_export

        rows, secs = official_export(Path(spec["root"]), Path(spec["out"]))
        out.update(rows=rows, seconds=secs)
    else:
        from slatelib.spark.export import ExportArgs, run_export
        from slatelib.spark.session import build_spark

        t = time.perf_counter()
        submit = [a for k, v in spec.get("launch_conf", {}).items() for a in ("--conf", f"{k}={v}")]
        spark = build_spark("bench-export-delta", master=spec["master"], submit_args=submit)
        spark.sparkContext.parallelize(range(2), 2).map(lambda x: x).collect()  # warm workers
        out["session_s"] = time.perf_counter() - t
        out["driver_memory"] = spark.sparkContext.getConf().get("spark.driver.memory", "1g")
        t = time.perf_counter()
        fields = run_export(spark, ExportArgs(**spec["export"]))
        out["seconds"] = time.perf_counter() - t
        out["fields"] = fields
        sampler.sample()  # the executors are still up
        spark.stop()
    sampler.stop()
    out["memory"] = sampler.summary()
    out["memory"]["driver_python_maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def spawn(spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``spec`` in a fresh Python process; its result."""
    env = dict(os.environ)
    env.setdefault(JARS_DIR_ENV, str(REPO / "build" / "jars"))
    env.setdefault("PYTHONPATH", str(REPO))
    proc = subprocess.run([sys.executable, __file__, "--run-one", json.dumps(spec)],
                          env=env, stdout=subprocess.PIPE, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"run failed (exit {proc.returncode}): {json.dumps(spec)}\n"
                         f"{proc.stdout[-3000:]}")
    return json.loads(lines[-1])


# ------------------------------------------------------------------ checks
def delta_rows(path: Path) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(str(path)).count())


def _pairs(table: Any) -> Any:
    """(key, value) sorted by key, as nullable binary columns (delta-rs, delta-spark and the
    official drain differ in nullability only)."""
    import pyarrow as pa

    schema = pa.schema([("key", pa.binary()), ("value", pa.binary())])
    return table.select(["key", "value"]).cast(schema).sort_by("key")


def sorted_pairs_of_delta(path: Path) -> Any:
    from deltalake import DeltaTable

    return _pairs(DeltaTable(str(path)).to_pyarrow_table(columns=["key", "value"]))


def sorted_pairs_of_parquet(path: Path) -> Any:
    import pyarrow.parquet as pq

    return _pairs(pq.read_table(path, columns=["key", "value"]))


# ------------------------------------------------------------------ the benchmark
def mem_mb(res: dict[str, Any]) -> dict[str, float]:
    m = res["memory"]
    roles = m["peak_by_role"]
    # VmHWM, not ru_maxrss: Linux carries the parent's maxrss over fork + exec (this
    # orchestrator grows to about 2 GB comparing tables), VmHWM belongs to the new image
    return {"driver_python": round(roles.get("driver_python", 0) / MB),
            "driver_jvm": round(roles.get("driver_jvm", 0) / MB),
            "executor_jvm": round(roles.get("executor_jvm", 0) / MB),
            "python_worker": round(roles.get("python_worker", 0) / MB),
            "executor_tree": round(m["executor_tree_peak"] / MB)}


def export_spec(master: str, root: Path, table: Path, writer: str, *, mode: str = "overwrite",
                checkpoint: str | None = None, partitions: int = 2,
                launch_conf: dict[str, str] | None = None) -> dict[str, Any]:
    return {"kind": "export", "master": master, "launch_conf": launch_conf or {},
            "export": {"db": f"file://{root}/{DB}", "to": f"file://{table}", "format": "delta",
                       "mode": mode, "checkpoint": checkpoint, "partitions": partitions,
                       "delta_writer": writer}}


def log_run(label: str, res: dict[str, Any], rows: int) -> None:
    m = mem_mb(res)
    extra = f", session {res['session_s']:.1f}s" if "session_s" in res else ""
    print(f"  {label}: {res['seconds']:.2f}s ({rows / res['seconds']:,.0f} rows/s){extra}; "
          f"peak MB: driver python {m['driver_python']}, driver JVM {m['driver_jvm']}, "
          f"executor JVM {m['executor_jvm']}, Python worker {m['python_worker']}, "
          f"executor+workers {m['executor_tree']}", flush=True)
    save()


def full_runs(args: argparse.Namespace, results: dict[str, Any], rep: int) -> None:
    src = cached_db(args.rows, args.l0s, args.seed)
    out = results.setdefault("full", {"runs": {"official": [], "delta-spark": [], "delta-rs": []}})
    root = fresh_copy(src, "xdelta-full-official")
    pq_out = SCRATCH / "xdelta-full-official.parquet"
    res = spawn({"kind": "official", "root": str(root), "out": str(pq_out)})
    rows = res["rows"]
    out["rows"] = rows
    out["runs"]["official"].append(res)
    log_run(f"full {rep} official drain -> Parquet", res, rows)
    pq_out.unlink(missing_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    for writer in ("delta-spark", "delta-rs"):
        root = fresh_copy(src, "xdelta-full-db")
        table = SCRATCH / "xdelta-full-table"
        shutil.rmtree(table, ignore_errors=True)
        res = spawn(export_spec(args.master, root, table, writer))
        got = delta_rows(table)
        assert got == rows, f"full {writer}: the table holds {got} rows, the database {rows}"
        assert res["fields"]["writer"] == writer, res["fields"]
        out["runs"][writer].append(res)
        log_run(f"full {rep} {writer}", res, rows)
        shutil.rmtree(table, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def incremental_runs(args: argparse.Namespace, results: dict[str, Any], rep: int) -> None:
    src, info = cached_incremental_db(args.base, args.changes, args.seed)
    out = results.setdefault("incremental", {
        "info": info, "db_mb": round(db_bytes(src) / MB, 1), "base_tables": {},
        "runs": {"official": [], "delta-spark": [], "delta-rs": [], "delta-spark-512m": [],
                 "delta-spark-512m-nobroadcast": []}})
    root = SCRATCH / "xdelta-incr-db"  # one path: the table's export mark names the database

    def fresh_db() -> None:
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(src, root, ignore=shutil.ignore_patterns("READY"))

    pq_out = SCRATCH / "xdelta-incr-official.parquet"
    if args.only != "incremental-512m":
        fresh_db()
        res = spawn({"kind": "official", "root": str(root), "out": str(pq_out)})
        assert res["rows"] == info["rows_cp2"], (res["rows"], info)
        out["runs"]["official"].append(res)
        log_run(f"incremental {rep} official drain of cp2 -> Parquet (full re-export)", res,
                res["rows"])
    for writer in ("delta-spark",) if args.only == "incremental-512m" else ("delta-spark",
                                                                           "delta-rs"):
        base_table = SCRATCH / f"xdelta-incr-base-{writer}"
        if writer not in out["base_tables"]:
            fresh_db()
            shutil.rmtree(base_table, ignore_errors=True)
            res = spawn(export_spec(args.master, root, base_table, writer, checkpoint=info["cp1"]))
            got = delta_rows(base_table)
            assert got == info["rows_cp1"], f"cp1 {writer}: {got} rows, expected {info['rows_cp1']}"
            out["base_tables"][writer] = res
            log_run(f"incremental setup: full export of cp1 by {writer}", res, info["rows_cp1"])
    variants = [("delta-spark", "delta-spark", {}), ("delta-rs", "delta-rs", {})]
    if args.only == "incremental-512m":
        variants = []
    if (not args.skip_512m and rep == 0) or args.only == "incremental-512m":
        variants.append(("delta-spark-512m", "delta-spark", {"spark.driver.memory": "512m"}))
        variants.append(("delta-spark-512m-nobroadcast", "delta-spark",
                         {"spark.driver.memory": "512m",
                          "spark.sql.autoBroadcastJoinThreshold": "-1"}))
    for label, writer, conf in variants:
        table = SCRATCH / "xdelta-incr-table"
        shutil.rmtree(table, ignore_errors=True)
        shutil.copytree(SCRATCH / f"xdelta-incr-base-{writer}", table)
        fresh_db()
        spec = export_spec(args.master, root, table, writer, mode="incremental",
                           checkpoint=info["cp2"], launch_conf=conf)
        if conf:  # a failure here (say, the driver out of memory) is a result
            try:
                res = spawn(spec)
            except SystemExit as exc:
                out.setdefault("failed", []).append({"label": label, "error": str(exc)[-3000:]})
                print(f"  incremental {rep} {label}: FAILED\n{str(exc)[-3000:]}", flush=True)
                save()
                continue
        else:
            res = spawn(spec)
        got = delta_rows(table)
        assert got == info["rows_cp2"], f"incremental {label}: {got} rows, expected {info['rows_cp2']}"
        assert res["fields"]["writer"] == writer, res["fields"]
        if rep == 0 and label in ("delta-spark", "delta-rs"):
            same = sorted_pairs_of_delta(table).equals(sorted_pairs_of_parquet(pq_out))
            assert same, f"incremental {label}: the table's pairs differ from the official drain"
            res["pairs_equal_official"] = True
        out["runs"][label].append(res)
        log_run(f"incremental {rep} {label}"
                f"{' (driver ' + res['driver_memory'] + ')' if conf else ''}", res,
                info["changes"])
    pq_out.unlink(missing_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(SCRATCH / "xdelta-incr-table", ignore_errors=True)


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for part in ("full", "incremental"):
        if part not in results:
            continue
        r = results[part]
        rows_read = {"official": r["rows"] if part == "full" else r["info"]["rows_cp2"]}
        done = {k: v for k, v in r["runs"].items() if v}
        s: dict[str, Any] = {}
        for name, runs in done.items():
            n = rows_read.get(name, r["rows"] if part == "full" else r["info"]["changes"])
            sec = statistics.median(x["seconds"] for x in runs)
            mems = [mem_mb(x) for x in runs]
            s[name] = {"runs": len(runs), "seconds": round(sec, 2), "rows": n,
                       "rows_s": round(n / sec),
                       "all_seconds": [round(x["seconds"], 2) for x in runs],
                       "session_s": round(statistics.median(x.get("session_s", 0) for x in runs), 1),
                       "peak_mb": {k: max(m[k] for m in mems) for k in mems[0]},
                       "median_peak_mb": {k: statistics.median(m[k] for m in mems) for k in mems[0]}}
        if "official" in s:
            for name in s:
                s[name]["speedup_vs_official"] = round(s["official"]["seconds"] / s[name]["seconds"], 2)
        if "delta-spark" in s and "delta-rs" in s:
            s["delta-spark_vs_delta-rs"] = round(s["delta-rs"]["seconds"] / s["delta-spark"]["seconds"], 2)
        if part == "incremental":
            s["base_tables"] = {w: {"seconds": round(x["seconds"], 2),
                                    "rows_s": round(r["info"]["rows_cp1"] / x["seconds"]),
                                    "peak_mb": mem_mb(x)} for w, x in r["base_tables"].items()}
        summary[part] = s
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run-one", help=argparse.SUPPRESS)
    p.add_argument("--rows", type=int, default=2_300_000)
    p.add_argument("--l0s", type=int, default=10)
    p.add_argument("--base", type=int, default=3_000_000)
    p.add_argument("--changes", type=int, default=3_000_000)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--master", default="local-cluster[2,1,1024]")
    p.add_argument("--only", choices=("full", "incremental", "incremental-512m"),
                   help="incremental-512m: only the delta-spark incremental runs with "
                        "spark.driver.memory=512m (with and without broadcast joins)")
    p.add_argument("--scratch", help="scratch folder (default benchmarks/data/scratch)")
    p.add_argument("--skip-512m", action="store_true",
                   help="leave out the delta-spark incremental run with spark.driver.memory=512m")
    p.add_argument("--json", help="also write the results (updated after every run) here")
    args = p.parse_args()
    if args.run_one:
        print(json.dumps(run_one(json.loads(args.run_one))))
        return
    os.environ.setdefault(JARS_DIR_ENV, str(REPO / "build" / "jars"))
    if args.scratch:
        global SCRATCH
        SCRATCH = Path(args.scratch).resolve()
    SCRATCH.mkdir(parents=True, exist_ok=True)
    do_full = args.only in (None, "full")
    do_incremental = args.only != "full"
    if do_full:
        cached_db(args.rows, args.l0s, args.seed)
    if do_incremental:
        cached_incremental_db(args.base, args.changes, args.seed)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    cores = free_cores()
    print(f"{started}: {os.cpu_count()} cores, load average {os.getloadavg()}, free cores "
          f"{cores}, master {args.master}", flush=True)
    results: dict[str, Any] = {"started": started, "master": args.master,
                               "load_average_start": os.getloadavg(), "free_cores_start": cores}
    SAVE.update(path=args.json, results=results)
    for rep in range(args.repeat):
        if do_full:
            full_runs(args, results, rep)
        if do_incremental:
            incremental_runs(args, results, rep)
        results["summary"] = summarize(results)
        results["repeats_done"] = rep + 1
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    results["load_average_end"] = os.getloadavg()
    results["free_cores_end"] = free_cores()
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    summary = results["summary"]
    for part, s in summary.items():
        print(f"== {part} (medians of {args.repeat})")
        for name, v in s.items():
            if isinstance(v, dict) and "rows_s" in v and "seconds" in v and "runs" in v:
                print(f"  {name}: {v['seconds']}s, {v['rows_s']:,} rows/s "
                      f"({v.get('speedup_vs_official', '-')}x official); peak MB "
                      f"{v['peak_mb']}")
        if "delta-spark_vs_delta-rs" in s:
            print(f"  delta-spark / delta-rs speed: {s['delta-spark_vs_delta-rs']}x")
    print(f"load average {results['load_average_start']} -> {results['load_average_end']}; "
          f"free cores {results['free_cores_start']} -> {results['free_cores_end']}")
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
