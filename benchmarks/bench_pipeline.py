"""Native pipeline benchmark: the native decode -> merge -> sink pipeline against the row path,
in one process, no Spark (docs/rfcs/0015-native-pipeline.md), and the scan side by side with
the official 0.17 reader's scan of the same copy.

Uses the compaction benchmark's database (``benchmarks/data/compaction_2300000_10_42``: 2.3 M
entries, 10 L0 SSTs, 316 MB, official-written; ``benchmarks/bench_compaction.py`` builds it)
and times, each path on the same inputs, medians of ``--repeat``:

- compaction: one task over all 10 L0s (``execute_compaction_task``, outputs kept in memory),
  ``use_native_pipe=True`` vs ``False``;
- scan stats: ``DbReader.scan_stats()`` vs ``range_stats(DbReader.scan())`` (what a
  rescale's validation did before) over the whole database;
- scan: ``DbReader.scan()`` drained, the pipeline vs ``native_merge.resolved_pairs`` over
  decoded rows;
- export: one of two partitions of ``scan_task_batches`` (Arrow batches), native vs rows;
- official: the official ``DbReader.scan()`` of the whole database drained with
  ``next_batch(4096)``, against our native scan (the ratio printed last).

    .venv/bin/python benchmarks/bench_pipeline.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_read import official_scan  # type: ignore[import-not-found]

from slatelib import DbReader
from slatelib.core.compaction_plan import PlanOptions, Policy, plan_compaction
from slatelib.core.ranges import BytesRange
from slatelib.format.native_merge import resolved_pairs
from slatelib.format.native_pipe import HAVE_NATIVE_PIPE
from slatelib.format.sst import SstWriterOptions
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.engine import TaskOptions, build_tasks, execute_compaction_task, input_views
from slatelib.ops.export.arrow_rows import arrow_schema, scan_task_batches
from slatelib.ops.export.pin import create_read_checkpoint
from slatelib.ops.export.scan import plan_scan
from slatelib.ops.rescale.validate import range_stats
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.table_store import TableStore

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "compaction_2300000_10_42"


class _DropPuts:
    """The store, but output SSTs are dropped (the benchmark times the task, not a disk)."""

    def __init__(self, inner: ObjectStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def put_if_absent(self, path: str, data: bytes) -> None:
        return None


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``fn``, after one warm-up call."""
    fn()
    walls, cpus = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    if not (DATA / "READY").exists():
        raise SystemExit(f"{DATA} is missing: run benchmarks/bench_compaction.py once")
    if not HAVE_NATIVE_PIPE:
        raise SystemExit("the native pipeline is not built (or SLATELIB_NO_NATIVE=1)")
    print(f"load average {os.getloadavg()}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    try:
        shutil.copytree(DATA / "db", tmp / "db")
        store = open_store(f"file://{tmp}")
        rows = 2_300_000
        m = ManifestStore(store, "db").read_latest().value
        spec = plan_compaction(m, None, PlanOptions(Policy.L0))
        views = input_views(spec, m, TableStore(store, "db"))
        [task] = build_tasks(spec, views, [BytesRange.all()], TaskOptions(
            store.spec, "db", spec.l0_views[0].id, SstWriterOptions(), 256 << 20, None, 4,
            2 << 20, 0))
        sink = _DropPuts(store)
        results: list[tuple[str, float, float, float, float]] = []

        def pair(name: str, native: Callable[[], object], rows_path: Callable[[], object]) -> None:
            n = timed(native, args.repeat)
            r = timed(rows_path, args.repeat)
            results.append((name, *n, *r))
            print(f"{name:12s} native {n[0]:.3f} s (cpu {n[1]:.3f})  rows {r[0]:.3f} s "
                  f"(cpu {r[1]:.3f})  {r[0] / n[0]:.2f}x")

        pair("compaction",
             lambda: execute_compaction_task(task, store=sink, use_native_pipe=True),  # type: ignore[arg-type]
             lambda: execute_compaction_task(task, store=sink, use_native_pipe=False))  # type: ignore[arg-type]
        with DbReader.open("db", store, mode="latest") as reader:
            view = reader._current()
            pair("scan stats", reader.scan_stats, lambda: range_stats(_old_pairs(view)))
            pair("scan", lambda: sum(1 for _ in reader.scan()),
                 lambda: sum(1 for _ in _old_pairs(view)))
        pinned = create_read_checkpoint(store, "db", name="bench", lifetime_s=3600)
        tasks = plan_scan(store, "db", pinned.manifest, manifest_id=pinned.manifest_id,
                          checkpoint_id=pinned.checkpoint.id, partitions=2, min_partition_bytes=1)
        schema = arrow_schema(("key", "value"))
        pair("export part",
             lambda: sum(b.num_rows for b in scan_task_batches(tasks[0], schema, store=store)),
             lambda: sum(b.num_rows for b in scan_task_batches(tasks[0], schema, store=store,
                                                               use_native=False)))
        official = sorted(official_scan(tmp, "db")[1] for _ in range(args.repeat))
        off_s = official[len(official) // 2]
        scan_s = results[2][1]
        print(f"official scan {off_s:.3f} s; native scan / official: {off_s / scan_s:.1f}x "
              f"({rows / scan_s / 1e6:.2f} M rows/s against {rows / off_s / 1e6:.2f} M)")
        print(f"rows: {rows} (compaction, scans); per row, native: "
              + ", ".join(f"{name} {w / rows * 1e6:.2f} us" for name, w, _, _, _ in results[:3]))
        print(f"load average {os.getloadavg()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _old_pairs(view: Any) -> Any:
    """The scan's pairs as before the pipeline: decoded Python rows merged natively
    (``native_merge.resolved_pairs``, now the pipeline's ``Pipe`` over those rows)."""
    return resolved_pairs([s.iter_blocks(None, None) for s in view.all_sources()], None)


if __name__ == "__main__":
    main()
