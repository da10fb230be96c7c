"""Per-core throughput of one compaction task: decode, merge + retention, encode, finish.

One process, one task of a benchmark database (W1 by default: 10 official-written L0s),
built the way ``run_compaction`` builds its tasks (``--tasks`` key ranges, ``--task`` picks
one), run with :func:`slatelib.ops.engine.execute_compaction_task` against a ``memory://``
store preloaded with the database's objects, so storage I/O is out of the figures.

Reports, as medians of ``--repeat`` runs: the task's input MB (stored bytes of its blocks)
per CPU second (``mb_per_cpu_s``, the per-core figure) and per wall second, and a split
measured stage by stage in this thread (``split``): ``fetch`` (ranged gets from the memory
store: copies only), ``decode`` (CRC-32 and block checks, decompression), ``merge_encode``
(the native merge with retention into the block writer), ``framing`` (compression, CRC-32
and placement of finished blocks), ``finish`` (filter, index, stats, footer, the SST's
bytes).

``--codec-limit`` adds the codec library's own speed on the same bytes: every input block
decompressed and every output block compressed with the same library calls the task makes,
one thread (the limit for compressed data), and the ratio ours/limit.

``--callgrind`` re-runs one smaller task (``--callgrind-tasks`` ranges) under
``valgrind --tool=callgrind``, counting only the task (``--zero-before=getppid``,
``--dump-before=getpgrp``), and prints instructions per input byte; repeatable from run to
run, for before/after comparisons. ``--json FILE`` writes the report.

    python benchmarks/bench_core.py --repeat 5 --callgrind --json /tmp/core.json
    python benchmarks/bench_core.py --rows 1000000 --l0s 4 --codec lz4 --codec-limit
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from slatelib.objstore import ObjectStore, open_store  # noqa: E402
from slatelib.ops.engine import CompactionTask, execute_compaction_task  # noqa: E402

MB = 1_000_000
W1 = (2_300_000, 10, 42)


class _Captured(Exception):
    def __init__(self, tasks: list[CompactionTask]) -> None:
        super().__init__("captured")
        self.tasks = tasks


def load_store(src: Path, name: str) -> tuple[ObjectStore, str]:
    """A ``memory://`` store holding the database directory ``src/db``; returns it and the
    database path."""
    store = open_store(f"memory://{name}/")
    base = src / "db"
    for p in sorted(base.rglob("*")):
        if p.is_file():
            store.put("db/" + str(p.relative_to(base)), p.read_bytes())
    return store, "db"


def file_store(src: Path) -> tuple[ObjectStore, str]:
    """A ``file://`` store over a scratch copy of ``src`` (the benchmark database is never
    modified): the task then reads and writes local files, as the real job's tasks do."""
    import shutil

    dst = Path(tempfile.mkdtemp(prefix="bench_core_db_"))
    shutil.copytree(src / "db", dst / "db")
    return open_store(f"file://{dst}"), "db"


def build_tasks(store: ObjectStore, root: str, tasks: int) -> list[CompactionTask]:
    """The tasks ``run_compaction`` would run with ``tasks`` slots (one task per slot);
    the compaction is then marked failed in this throw-away store."""
    from slatelib.config import Settings
    from slatelib.ops.compaction import run_compaction

    def runner(ts: Any) -> Any:
        raise _Captured(list(ts))

    settings = Settings()
    try:
        run_compaction(root, store, settings=settings, parallelism=tasks, runner=runner)
    except _Captured as got:
        return got.tasks
    raise RuntimeError("run_compaction ran no task")


def _drop_outputs(store: ObjectStore, root: str, result: Any) -> None:
    from slatelib.paths import DbPaths

    paths = DbPaths.of(root)
    store.delete_many([paths.compacted(h.id) for h in result.outputs])


def _minflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def run_task(store: ObjectStore, root: str, task: CompactionTask) -> dict[str, Any]:
    f0 = _minflt()
    t0, c0 = time.perf_counter(), time.process_time()
    result = execute_compaction_task(task, store=store)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    faults = _minflt() - f0
    _drop_outputs(store, root, result)
    m = result.metrics
    return {"wall_s": wall, "cpu_s": cpu, "bytes_in": m.bytes_in, "bytes_out": m.bytes_out,
            "rows_in": m.rows_in, "rows_out": m.rows_out, "ssts_out": len(result.outputs),
            "read_s": m.read_s, "merge_s": m.merge_s, "write_s": m.write_s,
            "page_faults": faults}


def split_stages(store: ObjectStore, task: CompactionTask) -> dict[str, float]:
    """Seconds of each stage of ``task``, run one after another in this thread."""
    from concurrent.futures import ThreadPoolExecutor

    from slatelib.core.retention import RetentionPolicy, RetentionStats
    from slatelib.format import seam
    from slatelib.format.native_pipe import RetainPipe
    from slatelib.format.sst import SstWriter
    from slatelib.ops.engine._execute import input_buffers
    from slatelib.ops.engine._input import _get_group, _groups, open_inputs
    from slatelib.ops.engine._output import sst_size_hint

    out = {"fetch": 0.0, "decode": 0.0, "merge_encode": 0.0, "framing": 0.0, "finish": 0.0}
    faults = dict.fromkeys(out, 0)
    with ThreadPoolExecutor(2) as pool:
        sources = [v for v in open_inputs(task, store, pool) if v]
    _, fetch_bytes = input_buffers(len(task.sources), task.max_fetch_tasks, task.bytes_to_fetch)
    checked: list[list[Any]] = []
    for views in sources:
        groups: list[Any] = []
        for vi in views:
            for a, b in _groups(vi, fetch_bytes):
                t, f = time.perf_counter(), _minflt()
                data, start, end = _get_group(store, vi, a, b)
                out["fetch"] += time.perf_counter() - t
                faults["fetch"] += _minflt() - f
                bounds = [o - start for o in vi.index.offsets[a:b]]
                bounds.append(end - start)
                t, f = time.perf_counter(), _minflt()
                c = seam.check_group(data, bounds, vi.reader.version,
                                     vi.reader.info.compression, vi.range)
                out["decode"] += time.perf_counter() - t
                faults["decode"] += _minflt() - f
                assert c is not None
                if len(c):
                    groups.append(c)
                if c.ended:
                    break
        checked.append(groups)
    policy = RetentionPolicy(min_seq=task.retention_min_seq, bottom=task.bottom,
                             clock_tick=task.clock_tick)
    pipe = RetainPipe(checked, policy, RetentionStats())
    done = False
    while not done:
        w = SstWriter(task.sst_options, size_hint=sst_size_hint(task.max_sst_size))
        while not done and w.estimated_size < task.max_sst_size:
            budget = max(1, min(4 << 20, task.max_sst_size - w.estimated_size))
            t, f = time.perf_counter(), _minflt()
            done = pipe.fill(w.block_writer, budget)
            t1, f1 = time.perf_counter(), _minflt()
            w._collect()
            out["merge_encode"] += t1 - t
            out["framing"] += time.perf_counter() - t1
            faults["merge_encode"] += f1 - f
            faults["framing"] += _minflt() - f1
        t, f = time.perf_counter(), _minflt()
        if w.num_rows:
            enc = w.finish()
            data = enc.to_bytes()
            del data
        out["finish"] += time.perf_counter() - t
        faults["finish"] += _minflt() - f
    out.update({f"faults_{k}": float(v) for k, v in faults.items()})
    return out


def codec_limit(store: ObjectStore, root: str, task: CompactionTask) -> dict[str, Any]:
    """The codec library's own seconds on this task's bytes: every input block decompressed,
    every output block (from a run of the task) compressed, one thread, same calls."""
    from concurrent.futures import ThreadPoolExecutor

    from slatelib.format.compression import block_compressor, block_decompressor, decompress
    from slatelib.format.sst import block_range, parse_sst
    from slatelib.ops.engine._input import open_inputs
    from slatelib.paths import DbPaths

    with ThreadPoolExecutor(2) as pool:
        sources = [v for v in open_inputs(task, store, pool) if v]
    blocks_in: list[tuple[int, bytes]] = []
    for views in sources:
        for vi in views:
            info = vi.reader.info
            s0 = block_range(vi.index, info, vi.lo)[0]
            data = store.get_range(vi.path, s0, block_range(vi.index, info, vi.hi - 1)[1])
            for i in range(vi.lo, vi.hi):
                s, e = block_range(vi.index, info, i)
                blocks_in.append((info.compression, data[s - s0:e - s0 - 4]))
    result = execute_compaction_task(task, store=store)
    paths = DbPaths.of(root)
    raw_out: list[bytes] = []
    codec_out = task.sst_options.codec
    for h in result.outputs:
        parsed = parse_sst(store.get(paths.compacted(h.id)))
        for i in range(len(parsed.index.offsets)):
            raw_out.append(decompress(codec_out, parsed.block_region(i)[:-4]))
    _drop_outputs(store, root, result)
    unpack = {c: block_decompressor(c) for c, _ in blocks_in}
    pack = block_compressor(codec_out)
    t = time.process_time()
    for codec, b in blocks_in:
        fn = unpack[codec]
        if fn is not None:
            fn(b)
    dec = time.process_time() - t
    t = time.process_time()
    if pack is not None:
        for b in raw_out:
            pack(b)
    enc = time.process_time() - t
    return {"decompress_cpu_s": dec, "compress_cpu_s": enc, "blocks_in": len(blocks_in),
            "blocks_out": len(raw_out), "cpu_s": dec + enc}


def callgrind(args: argparse.Namespace) -> dict[str, Any]:
    """Instructions of one task of the ``--callgrind-tasks`` split, under callgrind."""
    out_dir = tempfile.mkdtemp(prefix="bench_core_cg_")
    cmd = ["valgrind", "--tool=callgrind", "--zero-before=getppid", "--dump-before=getpgrp",
           "--dump-instr=no", f"--callgrind-out-file={out_dir}/cg.%p",
           sys.executable, __file__, "--child-callgrind", "--rows", str(args.rows),
           "--l0s", str(args.l0s), "--seed", str(args.seed),
           "--tasks", str(args.callgrind_tasks), "--task", "0"]
    if args.codec:
        cmd += ["--codec", args.codec]
    child = subprocess.run(cmd, capture_output=True, text=True, check=True)
    info = json.loads(child.stdout.strip().splitlines()[-1])
    dumps = sorted(glob.glob(f"{out_dir}/cg.*.*"))
    if not dumps:
        raise RuntimeError(f"no callgrind dump in {out_dir}: {child.stderr[-2000:]}")
    total = 0
    with open(dumps[-1]) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                total = int(line.split()[1])
    top = subprocess.run(["callgrind_annotate", "--threshold=100", dumps[-1]],
                         capture_output=True, text=True).stdout
    return {"instructions": total, "bytes_in": info["bytes_in"],
            "instr_per_byte": round(total / max(1, info["bytes_in"]), 3),
            "dump": dumps[-1], "top": _top_lines(top, total, 30)}


def _top_lines(text: str, total: int, n: int) -> list[str]:
    """The functions with the most instructions of their own, as ``instructions/byte``
    lines (callgrind_annotate also lists callers' inclusive counts from before the zeroing
    and thread entry points: anything above half the task's count is left out)."""
    out: list[str] = []
    lines = text.splitlines()
    start = next((i for i, x in enumerate(lines) if "file:function" in x), len(lines))
    for line in lines[start + 2:]:
        parts = line.split()
        if not parts or not parts[0].replace(",", "").isdigit():
            break
        count = int(parts[0].replace(",", ""))
        if count > total // 2:
            continue
        name = parts[-2] if parts[-1].startswith("[") else parts[-1]
        out.append(f"{count / total:6.1%}  {count:>12,}  {name.split('/')[-1]}")
        if len(out) >= n:
            break
    return out


def _db(args: argparse.Namespace) -> Path:
    from bench_compaction import cached_db

    return cached_db(args.rows, args.l0s, args.seed, args.codec)


def child_callgrind(args: argparse.Namespace) -> None:
    store, root = load_store(_db(args), "cg")
    task = build_tasks(store, root, args.tasks)[args.task]
    execute_compaction_task(task, store=store)  # warm: imports, first allocations
    os.getppid()  # callgrind --zero-before
    result = execute_compaction_task(task, store=store)
    os.getpgrp()  # callgrind --dump-before
    print(json.dumps({"bytes_in": result.metrics.bytes_in}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=W1[0])
    ap.add_argument("--l0s", type=int, default=W1[1])
    ap.add_argument("--seed", type=int, default=W1[2])
    ap.add_argument("--codec", default=None, help="a compressed variant: snappy, lz4, zstd")
    ap.add_argument("--store", choices=("memory", "file"), default="memory",
                    help="memory: I/O out of the figures; file: a scratch copy on local disk")
    ap.add_argument("--tasks", type=int, default=2, help="key ranges (slots) of the split")
    ap.add_argument("--task", type=int, default=0, help="which task to run")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-split", action="store_true", help="skip the stage split")
    ap.add_argument("--codec-limit", action="store_true")
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--callgrind-tasks", type=int, default=16)
    ap.add_argument("--child-callgrind", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.child_callgrind:
        child_callgrind(args)
        return
    src = _db(args)
    store, root = load_store(src, "bench") if args.store == "memory" else file_store(src)
    task = build_tasks(store, root, args.tasks)[args.task]
    run_task(store, root, task)  # warm-up
    runs = [run_task(store, root, task) for _ in range(args.repeat)]
    bytes_in = runs[0]["bytes_in"]
    cpu = statistics.median(r["cpu_s"] for r in runs)
    wall = statistics.median(r["wall_s"] for r in runs)
    report: dict[str, Any] = {
        "db": str(src), "store": args.store, "codec": args.codec, "tasks": args.tasks, "task": args.task,
        "bytes_in": bytes_in, "rows_in": runs[0]["rows_in"], "rows_out": runs[0]["rows_out"],
        "bytes_out": runs[0]["bytes_out"], "ssts_out": runs[0]["ssts_out"],
        "cpu_s": round(cpu, 4), "wall_s": round(wall, 4),
        "mb_per_cpu_s": round(bytes_in / MB / cpu, 1),
        "mb_per_cpu_s_best": round(bytes_in / MB / min(r["cpu_s"] for r in runs), 1),
        "mb_per_wall_s": round(bytes_in / MB / wall, 1),
        "page_faults": int(statistics.median(r["page_faults"] for r in runs)),
        "runs": runs,
    }
    if not args.no_split:
        splits = [split_stages(store, task) for _ in range(max(1, min(3, args.repeat)))]
        report["split"] = {k: round(statistics.median(s[k] for s in splits), 4)
                           for k in splits[0]}
        report["split_mb_per_s"] = round(
            bytes_in / MB / sum(v for k, v in report["split"].items()
                                if k != "fetch" and not k.startswith("faults")), 1)
    if args.codec_limit:
        lim = codec_limit(store, root, task)
        lim["mb_per_cpu_s"] = round(bytes_in / MB / lim["cpu_s"], 1)
        lim["ours_over_limit"] = round(report["mb_per_cpu_s"] / lim["mb_per_cpu_s"], 3)
        report["codec_limit"] = lim
    if args.callgrind:
        report["callgrind"] = callgrind(args)
    short = {k: v for k, v in report.items() if k not in ("runs",)}
    if "callgrind" in short:
        short["callgrind"] = {k: v for k, v in report["callgrind"].items() if k != "top"}
    print(json.dumps(short, indent=1))
    if args.callgrind:
        print("\n".join(report["callgrind"]["top"]))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
