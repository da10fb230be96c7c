"""Writer benchmark: slatelib ``Db`` vs the official slatedb 0.17.0 ``Db``, same machine, one run.

Measures, each repeated and reported as the median:

- **put throughput with durable acknowledgement**: one client writes 116-byte entries
  (16-byte keys, 100-byte values) in batches of 1, 100 and 2,000 and waits until each
  batch is durable (slatelib: every write call returns once durable; official:
  ``await (await db.write(batch)).await_durable()``), for a fixed time per case. The
  official writer runs with its default ``flush_interval`` (100 ms, the setting behind the
  issue's 12,300 puts/s) and with ``flush_interval = 1ms``; slatelib runs with its defaults
  (100 ms, but an idle pipeline writes a WAL SST at once) on a local directory.
- **point-get latency**, p50 and p99: a database of ``--get-keys`` entries written by the
  slatelib writer and flushed to L0 SSTs is read with random existing keys through
  slatelib's ``DbReader`` (read-only mode) and the official ``DbReader`` (after a warm-up
  pass each).

Usage::

    .venv/bin/python benchmarks/bench_writer.py [--seconds 3] [--repeat 3] [--get-keys 300000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from slatelib import Db, DbReader, WriteBatch
from slatelib.config import Settings, WriterSettings
from slatelib.format.native import HAVE_NATIVE

KEY_LEN, VALUE_LEN = 16, 100
BATCHES = (1, 100, 2000)
DB = "bench"


def official() -> Any:
    import slatedb.uniffi as s

    return s


def official_store(root: Path) -> Any:
    s = official()
    b = s.ObjectStoreBuilder.from_env(s.ObjectStoreType.LOCAL)
    b.with_config("local_path", str(root))
    return b.build()


def entries(rng: random.Random, n: int) -> list[tuple[bytes, bytes]]:
    return [(rng.randbytes(KEY_LEN), rng.randbytes(VALUE_LEN)) for _ in range(n)]


def ours_puts(root: Path, batch: int, seconds: float, rng: random.Random) -> float:
    settings = replace(Settings(), writer=replace(WriterSettings(), l0_max_ssts=1000))
    db = Db.open(DB, f"file://{root}", settings)
    n = 0
    deadline = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < deadline:
        pairs = entries(rng, batch)
        if batch == 1:
            db.put(*pairs[0])
        else:
            wb = WriteBatch()
            for k, v in pairs:
                wb.put(k, v)
            db.write(wb)
        n += batch
    elapsed = time.perf_counter() - t0
    db.close(flush=None)
    return n / elapsed


def official_puts(root: Path, batch: int, seconds: float, rng: random.Random,
                  flush_interval: str | None) -> float:
    s = official()

    async def run() -> float:
        st = s.Settings.default()
        if flush_interval is not None:
            st.set("flush_interval", json.dumps(flush_interval))
        st.set("compactor_options", "null")
        st.set("l0_max_ssts", "1000")
        b = s.DbBuilder(DB, official_store(root))
        b.with_settings(st)
        db = await b.build()
        n = 0
        deadline = time.perf_counter() + seconds
        t0 = time.perf_counter()
        while time.perf_counter() < deadline:
            wb = s.WriteBatch()
            for k, v in entries(rng, batch):
                wb.put(k, v)
            handle = await db.write(wb)
            await handle.await_durable()
            n += batch
        elapsed = time.perf_counter() - t0
        await db.shutdown()
        return n / elapsed

    return asyncio.run(run())


def build_get_db(root: Path, n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    settings = replace(Settings(), writer=replace(WriterSettings(), l0_sst_size_bytes=16 << 20,
                                                  l0_max_ssts=1000))
    keys = []
    with Db.open(DB, f"file://{root}", settings) as db:
        for start in range(0, n, 5000):
            wb = WriteBatch()
            for k, v in entries(rng, min(5000, n - start)):
                wb.put(k, v)
                keys.append(k)
            db.write(wb)
    return keys


def percentiles(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return s[len(s) // 2], s[min(len(s) - 1, int(len(s) * 0.99))]


def ours_gets(root: Path, keys: list[bytes]) -> list[float]:
    with DbReader.open(DB, f"file://{root}", mode="latest") as r:
        for k in keys:  # warm-up: index, filters and blocks in the cache
            r.get(k)
        out = []
        for k in keys:
            t0 = time.perf_counter()
            v = r.get(k)
            out.append(time.perf_counter() - t0)
            assert v is not None
    return out


def official_gets(root: Path, keys: list[bytes]) -> list[float]:
    s = official()

    async def run() -> list[float]:
        reader = await s.DbReaderBuilder(DB, official_store(root)).build()
        for k in keys:
            await reader.get(k)
        out = []
        for k in keys:
            t0 = time.perf_counter()
            v = await reader.get(k)
            out.append(time.perf_counter() - t0)
            assert v is not None
        await reader.shutdown()
        return out

    return asyncio.run(run())


def in_fresh_dir(fn: Callable[[Path], float]) -> float:
    d = Path(tempfile.mkdtemp(prefix="bench-writer-"))
    try:
        return fn(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def median_of(repeat: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(repeat))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--get-keys", type=int, default=300_000)
    ap.add_argument("--gets", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    results: dict[str, Any] = {"native": HAVE_NATIVE, "seconds": args.seconds,
                               "repeat": args.repeat, "puts_per_s": {}}
    print(f"put throughput, durable acknowledgement, {KEY_LEN + VALUE_LEN}-byte entries, "
          f"one client, local directory (median of {args.repeat} x {args.seconds}s)")
    print(f"{'batch':>6} {'slatelib':>12} {'official':>12} {'official 1ms':>13} {'ratio':>7}")
    for batch in BATCHES:
        ours = median_of(args.repeat, partial(
            in_fresh_dir, lambda d, b=batch: ours_puts(d, b, args.seconds, rng)))
        theirs = median_of(args.repeat, partial(
            in_fresh_dir, lambda d, b=batch: official_puts(d, b, args.seconds, rng, None)))
        theirs_fast = median_of(args.repeat, partial(
            in_fresh_dir, lambda d, b=batch: official_puts(d, b, args.seconds, rng, "1ms")))
        results["puts_per_s"][batch] = {"slatelib": ours, "official_default": theirs,
                                        "official_1ms": theirs_fast}
        print(f"{batch:>6} {ours:>12,.0f} {theirs:>12,.0f} {theirs_fast:>13,.0f} "
              f"{ours / theirs:>6.1f}x")

    root = Path(tempfile.mkdtemp(prefix="bench-gets-"))
    try:
        keys = build_get_db(root, args.get_keys, args.seed)
        sample = random.Random(args.seed + 1).sample(keys, min(args.gets, len(keys)))
        ours_p, theirs_p = [], []
        for _ in range(args.repeat):
            ours_p.append(percentiles(ours_gets(root, sample)))
            theirs_p.append(percentiles(official_gets(root, sample)))
        o50, o99 = (statistics.median(p[i] for p in ours_p) * 1e6 for i in (0, 1))
        t50, t99 = (statistics.median(p[i] for p in theirs_p) * 1e6 for i in (0, 1))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results["get_us"] = {"slatelib": {"p50": o50, "p99": o99},
                         "official": {"p50": t50, "p99": t99}, "keys": args.get_keys}
    print(f"point get on a flushed database of {args.get_keys:,} entries, {len(sample):,} random "
          f"existing keys (median of {args.repeat})")
    print(f"  slatelib DbReader:  p50 {o50:7.1f} us   p99 {o99:7.1f} us")
    print(f"  official DbReader:  p50 {t50:7.1f} us   p99 {t99:7.1f} us   "
          f"(p50 ratio {t50 / o50:.1f}x)")
    print(json.dumps(results))


if __name__ == "__main__":
    os.environ.setdefault("RUST_LOG", "error")
    main()
