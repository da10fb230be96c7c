"""Worker-mode benchmark: an official SlateDB 0.17.0 writer ingesting as fast as it can,
compacted by its embedded compactor, or by its coordinator plus slatelib's Spark worker.

One official ``Db`` in this process writes for ``--seconds`` (default 60): batches of
``--batch`` puts (default 1000; 16-byte random keys, 100-byte random values), each batch
awaited durable (``await (await db.write(b)).await_durable()``), ``--inflight`` batches at a
time (default 1). Writer settings: ``flush_interval`` 10 ms, ``l0_sst_size_bytes`` 4 MiB
(``--l0-mib``; an L0 SST every second or two), ``max_unflushed_bytes`` 32 MiB
(``--unflushed-mib``: 0.17's default of 1 GiB would let the writer buffer a whole run's
ingest in memory, so back-pressure would never reach it), 0.17's default ``l0_max_ssts``
(8), embedded GC off (so that every manifest and compactions version stays for the
figures). The two configurations run one after the other, on fresh databases:

- official: ``compactor_options`` at 0.17's defaults (coordinator with the size-tiered
  scheduler polling every 5 s, and an embedded worker);
- ours: the same coordinator with ``compactor_options.worker = null``, plus
  ``jobs/compact.py --worker --db file://... --run-for ...`` in a child process
  (``local[2]``, ``[worker]`` and ``[compaction]`` defaults: it polls ``compactions/``
  every 1 s where 0.17's embedded worker polls every 5 s; ``--worker-poll 5s`` evens that
  out), started before the writer; the writer starts once the worker logs that it runs
  (the Spark session start is reported apart). When the writer stops, the official ``Db``
  is shut down first (0.17's shutdown waits for the compactions its coordinator scheduled,
  which only our worker executes), then the worker gets SIGTERM.

Measured over the writer's window: rows and MB (keys + values) acknowledged durable per
second; write latencies and the wall time covered by stalled writes (latency above
``max(10 x median, 250 ms)``); the L0 depth and sorted-run count sampled every 0.5 s from
a thread with slatelib's ``ManifestStore`` (min/median/max, time at ``l0_max_ssts``, and
the max per 5 s); compactions committed (new sorted runs across the manifest versions of
the window) and the statuses of each in the ``compactions/`` versions (with their file
times: how long a job waited to be claimed, ran, and waited for its commit); the bytes of
the SSTs compactions wrote (sorted-run SSTs of every manifest version of the window) per
second; sorted runs at the end; CPU seconds of this process (the writer,
plus the embedded compactor in the official configuration) and of the Spark process tree.
After each run every acknowledged key is read back (slatelib ``DbReader``, or the official
reader with ``--check official``): the database must hold exactly the acknowledged keys.

    .venv/bin/python benchmarks/bench_worker.py [--seconds 60] [--repeat 1] [--batch 1000]
        [--inflight 1] [--l0-mib 4] [--unflushed-mib 32] [--worker-poll 5s]
        [--check slatelib|official] [--only official|ours] [--keep] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import signal
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

from bench_compaction import DATA, MB, free_cores, local_store, official  # noqa: E402

DB = "db"
KEY_LEN = 16
VALUE_LEN = 100
SAMPLE_S = 0.5
WINDOW_S = 5.0
L0_MAX_SSTS = 8  # 0.17's default, kept
READY_LINE = "compaction worker started"


# ------------------------------------------------------------------------------ settings
def writer_settings(mode: str, l0_bytes: int, unflushed_bytes: int) -> Any:
    s = official()
    st = s.Settings.default()
    co = json.loads(st.to_json_string())["compactor_options"]
    assert json.loads(st.to_json_string())["l0_max_ssts"] == L0_MAX_SSTS
    if mode == "ours":
        co["worker"] = None  # a coordinator only: Scheduled jobs wait for our worker
    for key, value in {"flush_interval": '"10ms"', "l0_sst_size_bytes": str(l0_bytes),
                       "max_unflushed_bytes": str(unflushed_bytes),
                       "garbage_collector_options": "null",
                       "compactor_options": json.dumps(co)}.items():
        st.set(key, value)
    return st


# ------------------------------------------------------------------------------- sampler
class Sampler(threading.Thread):
    """L0 depth and sorted runs of the latest manifest every ``SAMPLE_S`` seconds."""

    def __init__(self, root: Path) -> None:
        super().__init__(name="l0-sampler", daemon=True)
        from slatelib.objstore import open_store
        from slatelib.store.manifest_store import ManifestStore

        self.ms = ManifestStore(open_store(f"file://{root}"), DB)
        self.samples: list[tuple[float, int, int]] = []  # (monotonic, l0, sorted runs)
        self.stop_event = threading.Event()
        self.errors = 0

    def run(self) -> None:
        nxt = time.monotonic()
        while not self.stop_event.is_set():
            try:
                m = self.ms.read_latest().value
                self.samples.append((time.monotonic(), len(m.l0), len(m.compacted)))
            except Exception:  # a version being written; next tick
                self.errors += 1
            nxt += SAMPLE_S
            self.stop_event.wait(max(0.0, nxt - time.monotonic()))

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)


# -------------------------------------------------------------------------- spark worker
def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, and of reaped children) of ``pid`` and its descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d.name)] = int(fields[1])
        cpu[int(d.name)] = sum(int(x) for x in fields[11:15]) / tick
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += cpu.get(p, 0.0)
        todo.extend(c for c, pp in parent.items() if pp == p)
    return total


class SparkWorker:
    """``jobs/compact.py --worker`` in a child process on ``local[2]``; stderr lines are
    timestamped as they arrive."""

    def __init__(self, root: Path, run_for_s: float, poll: str | None = None) -> None:
        self.log_path = root.parent / f"{root.name}-worker.log"
        env = {**os.environ, "SLATELIB_SPARK_MASTER": "local[2]",
               "SLATELIB_SPARK_LOG_LEVEL": "ERROR", "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable}
        if poll:
            env["SLATELIB_WORKER__COMPACTIONS_POLL_INTERVAL"] = poll
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "jobs/compact.py", "--worker", "--db", f"file://{root}/{DB}",
             "--run-for", f"{int(run_for_s)}s", "-v"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.ready_at: float | None = None
        self.lines: list[tuple[float, str]] = []
        self.stdout = ""
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._out = threading.Thread(target=self._read_out, daemon=True)
        self._err.start()
        self._out.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        with self.log_path.open("w") as log:
            for line in self.proc.stderr:
                now = time.monotonic()
                self.lines.append((now, line.rstrip("\n")))
                log.write(f"{now - self.started:9.3f} {line}")
                if self.ready_at is None and READY_LINE in line:
                    self.ready_at = now

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()

    def wait_ready(self, timeout_s: float = 180.0) -> float:
        deadline = time.monotonic() + timeout_s
        while self.ready_at is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise SystemExit(f"the Spark worker did not start; see {self.log_path}")
            time.sleep(0.05)
        return self.ready_at - self.started

    def cpu_s(self) -> float:
        return tree_cpu_s(self.proc.pid)

    def stop(self) -> dict[str, Any]:
        """SIGTERM (running jobs are handed back), then the worker's JSON report."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.join(10)
        self._err.join(10)
        if self.proc.returncode != 0:
            raise SystemExit(f"the Spark worker exited with {self.proc.returncode}; see "
                             f"{self.log_path}")
        report: dict[str, Any] = json.loads(self.stdout)
        return report


# ------------------------------------------------------------------------------- one run
def _self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_once(mode: str, root: Path, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    s = official()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    out: dict[str, Any] = {"mode": mode, "load_average": [round(os.getloadavg()[0], 2)]}

    async def go() -> dict[str, Any]:
        builder = s.DbBuilder(DB, local_store(root))
        builder.with_settings(writer_settings(mode, args.l0_mib << 20,
                                              args.unflushed_mib << 20))
        db = await builder.build()
        worker = None
        if mode == "ours":
            worker = SparkWorker(root, args.seconds + 600, args.worker_poll)
            out["session_start_s"] = round(await asyncio.to_thread(worker.wait_ready), 2)
        sampler = Sampler(root)
        rng = random.Random(seed)
        acked: list[bytes] = []
        lat: list[tuple[float, float, int]] = []  # (start, latency, rows)
        batch = args.batch
        spark_cpu0 = worker.cpu_s() if worker else 0.0
        cpu0 = _self_cpu_s()
        sampler.start()
        t0 = time.monotonic()
        t0_wall = time.time()
        deadline = t0 + args.seconds

        async def writer() -> None:
            while time.monotonic() < deadline:
                keys = rng.randbytes(KEY_LEN * batch)
                values = rng.randbytes(VALUE_LEN * batch)
                wb = s.WriteBatch()
                for i in range(batch):
                    wb.put(keys[KEY_LEN * i:KEY_LEN * (i + 1)],
                           values[VALUE_LEN * i:VALUE_LEN * (i + 1)])
                t = time.monotonic()
                handle = await db.write(wb)
                await handle.await_durable()
                lat.append((t - t0, time.monotonic() - t, batch))
                acked.append(keys)

        await asyncio.gather(*(writer() for _ in range(args.inflight)))
        t_end = time.monotonic()
        cpu1 = _self_cpu_s()
        spark_cpu1 = worker.cpu_s() if worker else 0.0
        sampler.stop()
        from slatelib.objstore import open_store
        from slatelib.store.compactions_store import CompactionsStore
        from slatelib.store.manifest_store import ManifestStore

        store = open_store(f"file://{root}")
        snap = {"manifest": ManifestStore(store, DB).read_latest().id,
                "compactions": (CompactionsStore(store, DB).try_read_latest()
                                or _NoVersion()).id}
        # The Db first, while our worker still runs: 0.17's shutdown waits until the
        # compactions its coordinator scheduled are done, and with worker = null only our
        # worker does them (stopped first, it would leave the shutdown waiting forever).
        t_close = time.monotonic()
        try:
            await asyncio.wait_for(db.shutdown(), timeout=300)
        except TimeoutError:
            if worker is not None:
                worker.proc.kill()
            raise SystemExit(f"{mode}: the official Db did not shut down in 300 s") from None
        out["db_shutdown_s"] = round(time.monotonic() - t_close, 2)
        if worker is not None:
            out["worker_report"] = await asyncio.to_thread(worker.stop)
            out["worker_log"] = str(worker.log_path)
        return {"elapsed": t_end - t0, "acked": acked, "lat": lat, "cpu": cpu1 - cpu0,
                "spark_cpu": spark_cpu1 - spark_cpu0, "samples": sampler.samples,
                "sample_errors": sampler.errors, "t0": t0, "snap": snap,
                "t0_wall": t0_wall}

    r = asyncio.run(go())
    out["load_average"].append(round(os.getloadavg()[0], 2))
    elapsed = r["elapsed"]
    rows = sum(n for _, _, n in r["lat"])
    out.update({
        "seconds": round(elapsed, 2), "rows": rows,
        "rows_per_s": round(rows / elapsed), "mb_per_s": round(rows * (KEY_LEN + VALUE_LEN)
                                                               / MB / elapsed, 2),
        "writer_process_cpu_s": round(r["cpu"], 1), "spark_cpu_s": round(r["spark_cpu"], 1),
    })
    out["writes"] = write_stats(r["lat"])
    out["l0"] = l0_stats(r["samples"], r["t0"], elapsed)
    out["l0"]["sample_errors"] = r["sample_errors"]
    out["compaction"] = compaction_stats(root, r["snap"], elapsed, r["t0_wall"])
    out["verified"] = verify(root, r["acked"], args.check)
    if "worker_report" in out:
        wr = out.pop("worker_report")
        jobs = [j for d in wr["databases"] for j in d["jobs"] if j["status"] == "compacted"]
        out["worker"] = {"totals": wr["totals"], "polls": wr["polls"],
                         "job_s": [j["seconds"] for j in jobs],
                         "job_ranges": [j["ranges"] for j in jobs],
                         "job_mb_out": [round(j["bytes_out"] / MB, 1) for j in jobs]}
    return out


class _NoVersion:
    id = 0


def write_stats(lat: list[tuple[float, float, int]]) -> dict[str, Any]:
    """Latencies, and the wall time covered by stalled writes (their intervals' union)."""
    ls = sorted(x for _, x, _ in lat)
    med = statistics.median(ls)
    threshold = max(10 * med, 0.25)
    slow = sorted((t, t + x) for t, x, _ in lat if x > threshold)
    stalled, end = 0.0, -1.0
    for a, b in slow:
        if b > end:
            stalled += b - max(a, end)
            end = b
    return {"batches": len(ls), "p50_ms": round(med * 1000, 1),
            "p99_ms": round(ls[int(0.99 * (len(ls) - 1))] * 1000, 1),
            "max_s": round(ls[-1], 2), "stall_threshold_ms": round(threshold * 1000),
            "stalled_writes": len(slow), "stalled_s": round(stalled, 2),
            "stalls": [[round(a, 1), round(b - a, 2)] for a, b in slow][:40]}


def l0_stats(samples: list[tuple[float, int, int]], t0: float, elapsed: float,
             ) -> dict[str, Any]:
    inside = [(t - t0, l0, runs) for t, l0, runs in samples if t - t0 <= elapsed + SAMPLE_S]
    depths = [l0 for _, l0, _ in inside]
    series, runs_series = [], []
    w = 0.0
    while w < elapsed:
        win = [(l0, runs) for t, l0, runs in inside if w <= t < w + WINDOW_S]
        if win:
            series.append(max(l0 for l0, _ in win))
            runs_series.append(win[-1][1])
        w += WINDOW_S
    return {"samples": len(depths), "min": min(depths), "median": statistics.median(depths),
            "max": max(depths),
            "at_max_s": round(sum(1 for d in depths if d >= L0_MAX_SSTS) * SAMPLE_S, 1),
            "max_per_5s": series, "sorted_runs_per_5s": runs_series,
            "max_sorted_runs": max(runs for _, _, runs in inside)}


def compaction_stats(root: Path, snap: dict[str, int], elapsed: float, t0_wall: float,
                     ) -> dict[str, Any]:
    """From the versions written up to the end of the writer's window: compactions
    completed (``compactions/``), and the SSTs of every sorted run of every manifest
    version (what compactions wrote), L0 SSTs flushed, sorted runs at the end."""
    from slatelib.objstore import open_store
    from slatelib.store.compactions_store import CompactionsStore
    from slatelib.store.manifest_store import ManifestStore

    store = open_store(f"file://{root}")
    ms = ManifestStore(store, DB)
    run_ssts: set[Any] = set()
    l0_ssts: set[Any] = set()
    new_runs: set[tuple[Any, ...]] = set()  # each commit of a compaction makes a new run
    last = None
    for vid in ms.list_ids():
        if vid > snap["manifest"]:
            break
        m = ms.read(vid).value
        l0_ssts.update(v.sst_id for v in m.l0)
        run_ssts.update(v.sst_id for r in m.compacted for v in r.views)
        new_runs.update(tuple(v.sst_id for v in r.views) for r in m.compacted)
        last = m
    cs = CompactionsStore(store, DB)
    # per compaction: when each status first shows in a compactions version (file mtimes)
    seen: dict[Any, dict[str, float]] = {}
    sources: dict[Any, int] = {}
    for vid in cs.list_ids():
        if vid > snap["compactions"]:
            break
        mtime = (root / cs.path(vid)).stat().st_mtime - t0_wall
        for c in cs.read(vid).value.recent_compactions:
            seen.setdefault(c.id, {}).setdefault(c.status.name.lower(), mtime)
            spec = c.spec
            sources.setdefault(c.id, len(spec.l0_view_ids) + len(spec.sorted_runs))
    first_seen = {c: min(st.values()) for c, st in seen.items()}
    completed = {c: st["completed"] for c, st in seen.items() if "completed" in st}

    def gap(a: str, b: str) -> float | None:
        xs = [st[b] - st[a] for st in seen.values() if a in st and b in st]
        return round(statistics.median(xs), 2) if xs else None
    sst_dir = root / DB / "compacted"

    def size(ids: set[Any]) -> int:
        from slatelib.ids import ulid_to_str

        total = 0
        for i in ids:
            p = sst_dir / f"{ulid_to_str(i)}.sst"
            total += p.stat().st_size if p.exists() else 0
        return total

    out_bytes = size(run_ssts)
    durations = [completed[c] - first_seen[c] for c in completed]
    return {"committed": len(new_runs), "completed": len(completed),
            "scheduled": len(first_seen),
            "mb_written": round(out_bytes / MB, 1),
            "mb_per_s": round(out_bytes / MB / elapsed, 2),
            "l0_flushed": len(l0_ssts), "l0_mb_flushed": round(size(l0_ssts) / MB, 1),
            "sorted_runs_end": 0 if last is None else len(last.compacted),
            "l0_end": 0 if last is None else len(last.l0),
            "run_ssts_end": [] if last is None else [len(r.views) for r in last.compacted],
            "scheduled_to_completed_s": {
                "median": round(statistics.median(durations), 2) if durations else None,
                "max": round(max(durations), 2) if durations else None},
            "median_gaps_s": {"scheduled_to_running": gap("scheduled", "running"),
                              "running_to_compacted": gap("running", "compacted"),
                              "compacted_to_completed": gap("compacted", "completed")},
            "timeline": [{"sources": sources[c], **{k: round(v, 2) for k, v in st.items()}}
                         for c, st in sorted(seen.items(), key=lambda kv: first_seen[kv[0]])]}


def verify(root: Path, acked: list[bytes], how: str) -> dict[str, Any]:
    """Every acknowledged key, and nothing else, is in the database."""
    want: set[bytes] = set()
    for blob in acked:
        want.update(blob[i:i + KEY_LEN] for i in range(0, len(blob), KEY_LEN))
    t = time.perf_counter()
    if how == "official":
        s = official()

        async def scan() -> set[bytes]:
            reader = await s.DbReaderBuilder(DB, local_store(root)).build()
            it = await reader.scan(s.KeyRange(start=None, start_inclusive=True, end=None,
                                              end_inclusive=False))
            got: set[bytes] = set()
            while True:
                batch = await it.next_batch(4096)
                got.update(kv.key for kv in batch)
                if len(batch) < 4096:
                    break
            await reader.shutdown()
            return got

        got = asyncio.run(scan())
    else:
        from slatelib import DbReader

        with DbReader.open(DB, f"file://{root}", mode="latest") as reader:
            got = {k for k, _ in reader.scan()}
    ok = got == want
    res = {"reader": how, "acked_keys": len(want), "keys_read": len(got),
           "missing": len(want - got), "unexpected": len(got - want), "ok": ok,
           "seconds": round(time.perf_counter() - t, 1)}
    if not ok:
        raise SystemExit(f"verification failed: {res}")
    return res


# ---------------------------------------------------------------------------------- main
def _med(xs: list[float]) -> float:
    return round(statistics.median(xs), 2)


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def m(f: Any) -> float:
        return _med([f(r) for r in runs])

    return {
        "rows_per_s": m(lambda r: r["rows_per_s"]), "mb_per_s": m(lambda r: r["mb_per_s"]),
        "stalled_s": m(lambda r: r["writes"]["stalled_s"]),
        "write_p50_ms": m(lambda r: r["writes"]["p50_ms"]),
        "write_p99_ms": m(lambda r: r["writes"]["p99_ms"]),
        "write_max_s": m(lambda r: r["writes"]["max_s"]),
        "l0_min": m(lambda r: r["l0"]["min"]), "l0_median": m(lambda r: r["l0"]["median"]),
        "l0_max": m(lambda r: r["l0"]["max"]), "l0_at_max_s": m(lambda r: r["l0"]["at_max_s"]),
        "compactions": m(lambda r: r["compaction"]["committed"]),
        "compaction_mb_per_s": m(lambda r: r["compaction"]["mb_per_s"]),
        "sorted_runs_end": m(lambda r: r["compaction"]["sorted_runs_end"]),
        "writer_process_cpu_s": m(lambda r: r["writer_process_cpu_s"]),
        "spark_cpu_s": m(lambda r: r["spark_cpu_s"]),
    }


def describe(r: dict[str, Any]) -> str:
    w, l0, c = r["writes"], r["l0"], r["compaction"]
    lines = [
        f"  {r['mode']}: {r['rows']:,} rows in {r['seconds']}s = {r['rows_per_s']:,} rows/s, "
        f"{r['mb_per_s']} MB/s acknowledged durable"
        + (f" (Spark session start {r['session_start_s']}s, not counted)"
           if "session_start_s" in r else "")
        + f"; load average {r['load_average'][0]} -> {r['load_average'][1]}",
        f"    writes: {w['batches']} batches, p50 {w['p50_ms']} ms, p99 {w['p99_ms']} ms, max "
        f"{w['max_s']} s; stalled {w['stalled_s']} s ({w['stalled_writes']} writes over "
        f"{w['stall_threshold_ms']} ms)",
        f"    L0 depth: min {l0['min']}, median {l0['median']}, max {l0['max']}; at "
        f"l0_max_ssts ({L0_MAX_SSTS}) {l0['at_max_s']} s; max per 5 s {l0['max_per_5s']}",
        f"    sorted runs per 5 s {l0['sorted_runs_per_5s']}",
        f"    compactions committed {c['committed']} (compactions/: {c['scheduled']} "
        f"scheduled, {c['completed']} shown Completed), "
        f"{c['mb_written']} MB written = {c['mb_per_s']} MB/s; scheduled -> completed "
        f"median {c['scheduled_to_completed_s']['median']} s, max "
        f"{c['scheduled_to_completed_s']['max']} s (median gaps {c['median_gaps_s']}); "
        f"L0 SSTs flushed {c['l0_flushed']} "
        f"({c['l0_mb_flushed']} MB); at the end {c['l0_end']} L0 + {c['sorted_runs_end']} "
        f"sorted runs {c['run_ssts_end']}",
        f"    CPU seconds: writer process {r['writer_process_cpu_s']}, Spark tree "
        f"{r['spark_cpu_s']}; Db shutdown afterwards {r['db_shutdown_s']} s",
        f"    verified ({r['verified']['reader']} reader): {r['verified']['keys_read']:,} keys "
        f"read = {r['verified']['acked_keys']:,} acknowledged, ok {r['verified']['ok']}",
    ]
    if "worker" in r:
        wk = r["worker"]
        lines.append(f"    our worker: {wk['totals']}; job seconds {wk['job_s']}; ranges "
                     f"{wk['job_ranges']}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--inflight", type=int, default=1)
    p.add_argument("--l0-mib", type=int, default=4)
    p.add_argument("--unflushed-mib", type=int, default=32)
    p.add_argument("--worker-poll", help="our worker's [worker] compactions_poll_interval "
                   "(default: the setting, 1s; 0.17's embedded worker polls every 5s)")
    p.add_argument("--check", choices=("slatelib", "official"), default="slatelib")
    p.add_argument("--only", choices=("official", "ours"))
    p.add_argument("--keep", action="store_true", help="keep the databases (scratch dir)")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args()
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    scratch = DATA / "scratch" / "worker"
    load_before = [round(x, 2) for x in os.getloadavg()]
    cores_before = free_cores()
    print(f"{os.cpu_count()} cores; load average {load_before}; free cores {cores_before}; "
          f"writer: batches of {args.batch}, {args.inflight} in flight, "
          f"{args.seconds:g} s per run; our worker polls every {args.worker_poll or '1s'}",
          flush=True)
    modes = [args.only] if args.only else ["official", "ours"]
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for i in range(args.repeat):
        for mode in modes:
            r = run_once(mode, scratch / f"{mode}-{i}", args, seed=1000 + i)
            runs[mode].append(r)
            print(describe(r), flush=True)
            if not args.keep:
                shutil.rmtree(scratch / f"{mode}-{i}", ignore_errors=True)
    cores_after = free_cores()
    load_after = [round(x, 2) for x in os.getloadavg()]
    results: dict[str, Any] = {
        "seconds": args.seconds, "repeat": args.repeat, "batch": args.batch,
        "inflight": args.inflight, "l0_sst_size_mib": args.l0_mib,
        "max_unflushed_mib": args.unflushed_mib, "l0_max_ssts": L0_MAX_SSTS,
        "worker_poll": args.worker_poll or "1s (default)",
        "load_average": [load_before, load_after], "free_cores": [cores_before, cores_after],
        "medians": {m: summarize(rs) for m, rs in runs.items()},
        "runs": runs,
    }
    if "ours" in runs:
        results["ours_session_start_s"] = [r["session_start_s"] for r in runs["ours"]]
    if len(modes) == 2:
        med = results["medians"]
        results["ratio_ours_over_official"] = {
            "rows_per_s": round(med["ours"]["rows_per_s"] / med["official"]["rows_per_s"], 3),
            "per_run": [round(o["rows_per_s"] / f["rows_per_s"], 3)
                        for o, f in zip(runs["ours"], runs["official"], strict=True)]}
    print(json.dumps({k: v for k, v in results.items() if k != "runs"}, indent=2))
    if len(modes) == 2:
        med = results["medians"]
        print(f"ingest: official {med['official']['rows_per_s']:,} rows/s "
              f"({med['official']['mb_per_s']} MB/s), ours {med['ours']['rows_per_s']:,} rows/s "
              f"({med['ours']['mb_per_s']} MB/s); ratio ours / official "
              f"{results['ratio_ours_over_official']['rows_per_s']}x")
    print(f"load average {load_before[0]} -> {load_after[0]}; free cores {cores_before} -> "
          f"{cores_after}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
