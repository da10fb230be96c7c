"""Read-path benchmark: slatelib vs the official slatedb 0.17.0 binding, same database.

Builds (once, cached under benchmarks/data/) a database of about 300 MB with the official
package: random 16-byte keys, 100-byte values, written in batches and flushed to L0 SSTs
(compactor off). Then, in one run, measures:

- SST decode (slatelib): every SST's bytes already in memory -> rows (rows/s, MB/s);
- SST encode (slatelib): the same rows -> SST bytes with the same block size (rows/s, MB/s);
- full scan: slatelib ``DbReader.scan()`` vs the official ``DbReader.scan()`` (rows/s, MB/s),
  and their ratio.

Each measurement is repeated and the median is reported. Usage::

    .venv/bin/python benchmarks/bench_read.py [--rows 2600000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from slatelib import DbReader
from slatelib.format.native import HAVE_NATIVE
from slatelib.format.sst import SstWriterOptions, encode_sst, parse_sst
from slatelib.store.manifest_store import ManifestStore

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
DB_NAME = "read_bench"


def official():  # type: ignore[no-untyped-def]
    import slatedb.uniffi as s

    return s


def build_db(root: Path, rows: int, seed: int) -> None:
    s = official()

    async def run() -> None:
        b = s.ObjectStoreBuilder.from_env(s.ObjectStoreType.LOCAL)
        b.with_config("local_path", str(root))
        store = b.build()
        st = s.Settings.default()
        st.set("flush_interval", "null")
        st.set("compactor_options", "null")
        st.set("l0_max_ssts", "64")
        st.set("l0_sst_size_bytes", json.dumps(64 * 1024 * 1024))
        st.set("max_unflushed_bytes", json.dumps(1 << 31))
        db_b = s.DbBuilder(DB_NAME, store)
        db_b.with_settings(st)
        db = await db_b.build()
        rng = random.Random(seed)
        batch_rows = 20_000
        per_l0 = max(batch_rows, rows // 4)
        written = 0
        while written < rows:
            wb = s.WriteBatch()
            for _ in range(min(batch_rows, rows - written)):
                wb.put(rng.randbytes(16), rng.randbytes(100))
            await db.write(wb)
            written += batch_rows
            if written % per_l0 < batch_rows:
                await db.flush_with_options(s.FlushOptions(flush_type=s.FlushType.MEM_TABLE))
        await db.flush_with_options(s.FlushOptions(flush_type=s.FlushType.MEM_TABLE))
        await db.shutdown()

    asyncio.run(run())


def official_scan(root: Path, name: str = DB_NAME) -> tuple[int, float]:
    """Rows and seconds of the official ``DbReader.scan()`` of database ``name`` under
    ``root``, drained with ``next_batch(4096)`` (the reader's open is not timed)."""
    s = official()

    async def run() -> tuple[int, float]:
        b = s.ObjectStoreBuilder.from_env(s.ObjectStoreType.LOCAL)
        b.with_config("local_path", str(root))
        store = b.build()
        reader = await s.DbReaderBuilder(name, store).build()
        t0 = time.perf_counter()
        it = await reader.scan(s.KeyRange(start=None, start_inclusive=True, end=None,
                                          end_inclusive=False))
        n = 0
        while True:
            batch = await it.next_batch(4096)
            if not batch:
                break
            n += len(batch)
        elapsed = time.perf_counter() - t0
        await reader.shutdown()
        return n, elapsed

    return asyncio.run(run())


def slatelib_scan(root: Path) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = 0
    with DbReader.open(DB_NAME, f"file://{root}", **_read_only()) as reader:
        for _ in reader.scan():
            n += 1
    return n, time.perf_counter() - t0


def _read_only() -> dict[str, Any]:
    """Read-only mode once the reader grows a checkpoint protocol (keyword varies)."""
    import inspect

    params = inspect.signature(DbReader.open).parameters
    return {"mode": "latest"} if "mode" in params else {}


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_600_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()
    root = DATA / f"read_{args.rows}"
    if args.rebuild and root.exists():
        shutil.rmtree(root)
    if not (root / DB_NAME / "manifest").exists():
        root.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        build_db(root, args.rows, args.seed)
        print(f"built database with the official package in {time.perf_counter() - t0:.1f}s")
    from slatelib.objstore import open_store

    store = open_store(f"file://{root}")
    manifest = ManifestStore(store, DB_NAME).read_latest().value
    paths = [root / DB_NAME / "compacted" / (f"{_ulid(h.id)}.sst") for h in manifest.ssts]
    blobs = [p.read_bytes() for p in paths]
    total_bytes = sum(len(b) for b in blobs)
    print(f"database: {len(blobs)} SSTs, {total_bytes / 1e6:.1f} MB, native={HAVE_NATIVE}")

    decode_t, rows_all = [], 0
    decoded: list[list[Any]] = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        decoded = [parse_sst(b).rows() for b in blobs]
        decode_t.append(time.perf_counter() - t0)
    rows_all = sum(len(r) for r in decoded)
    block_size = 4096
    encode_t = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for rows in decoded:
            encode_sst(rows, SstWriterOptions(block_size=block_size, min_filter_keys=1000))
        encode_t.append(time.perf_counter() - t0)
    del decoded
    ours_scan, theirs_scan = [], []
    n_ours = n_theirs = 0
    for _ in range(args.repeat):
        n_ours, t = slatelib_scan(root)
        ours_scan.append(t)
        n_theirs, t = official_scan(root)
        theirs_scan.append(t)
    assert n_ours == n_theirs, f"scan row counts differ: {n_ours} vs {n_theirs}"

    def rate(n: int, t: float) -> str:
        return f"{n / t / 1e6:6.2f} M rows/s  {total_bytes / t / 1e6:7.1f} MB/s"

    res = {
        "sst_decode_s": median(decode_t), "sst_encode_s": median(encode_t),
        "scan_slatelib_s": median(ours_scan), "scan_official_s": median(theirs_scan),
        "rows_in_ssts": rows_all, "live_keys": n_ours, "bytes": total_bytes,
        "native": HAVE_NATIVE, "repeat": args.repeat,
    }
    print(f"SST decode (slatelib):        {rate(rows_all, res['sst_decode_s'])}")
    print(f"SST encode (slatelib):        {rate(rows_all, res['sst_encode_s'])}")
    print(f"full scan  (slatelib):        {rate(n_ours, res['scan_slatelib_s'])}")
    print(f"full scan  (official 0.17.0): {rate(n_theirs, res['scan_official_s'])}")
    print(f"scan ratio slatelib/official: {res['scan_official_s'] / res['scan_slatelib_s']:.2f}x")
    print(json.dumps(res))


def _ulid(v: int) -> str:
    from slatelib.ids import ulid_to_str

    return ulid_to_str(v)


if __name__ == "__main__":
    os.environ.setdefault("RUST_LOG", "error")
    main()
