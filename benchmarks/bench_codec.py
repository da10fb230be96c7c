"""SST codec throughput, native (slatelib._speedups) vs pure Python. Not a test.

    .venv/bin/python benchmarks/bench_codec.py [--rows 200000] [--repeat 3]

Runs every measurement in this process (native when the extension is built) and again in a
child process with ``SLATELIB_NO_NATIVE=1`` (the pure-Python reference), then prints both.
Rows: 16-byte keys, 100-byte values, one seq, a create_ts (as 0.17.0 writes), 4 KiB blocks,
10 bits/key bloom, no compression. "payload MB/s" counts key + value bytes; "sst MB/s"
counts the encoded SST bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slatelib.core.row import VALUE, Row  # noqa: E402
from slatelib.format import bloom, native  # noqa: E402
from slatelib.format.block import decode_block_v2  # noqa: E402
from slatelib.format.sst import EncodedSst, SstWriter, SstWriterOptions, parse_sst  # noqa: E402

CHILD_FLAG = "--child"


def make_rows(n: int) -> list[Row]:
    return [(b"user:%011d" % i, 42, VALUE, b"v%099d" % i, None, 1_700_000_000_000)
            for i in range(n)]


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def measure(n: int, repeat: int) -> dict[str, float]:
    rows = make_rows(n)
    keys = [r[0] for r in rows]
    payload = sum(len(r[0]) + len(r[3]) for r in rows)
    opts = SstWriterOptions()

    def encode() -> EncodedSst:
        w = SstWriter(opts)
        w.add_rows(rows)
        return w.finish()

    def encode_per_row() -> EncodedSst:
        w = SstWriter(opts)
        for r in rows:
            w.add(r)
        return w.finish()

    sst = encode().to_bytes()
    assert encode_per_row().to_bytes() == sst
    parsed = parse_sst(sst)
    raw_blocks = [parsed.block_region(i)[:-4] for i in range(len(parsed.index.offsets))]
    assert parsed.rows() == rows

    def decode_blocks() -> None:
        for b in raw_blocks:
            decode_block_v2(b)

    hashes = bloom.siphash13_many(keys)
    t_enc = best(encode, repeat)
    t_enc1 = best(encode_per_row, repeat)
    t_dec = best(decode_blocks, repeat)
    t_rows = best(parsed.rows, repeat)
    t_many = best(lambda: bloom.siphash13_many(keys), repeat)
    t_one = best(lambda: [bloom.siphash13(k) for k in keys], repeat)
    t_bloom = best(lambda: bloom.build_bloom_from_hashes(hashes, 10), repeat)
    return {
        "native": float(native.HAVE_NATIVE),
        "rows": n, "payload_bytes": payload, "sst_bytes": len(sst), "blocks": len(raw_blocks),
        "encode_s": t_enc, "encode_per_row_s": t_enc1, "decode_blocks_s": t_dec,
        "parse_rows_s": t_rows, "siphash_many_s": t_many, "siphash_one_s": t_one,
        "bloom_build_s": t_bloom,
    }


def report(label: str, m: dict[str, float]) -> None:
    n, mb = m["rows"], 1e6
    print(f"\n== {label} ({int(n)} rows, {int(m['blocks'])} blocks, "
          f"SST {m['sst_bytes'] / mb:.1f} MB)")
    for name, key in (("encode SST (add_rows)", "encode_s"),
                      ("encode SST (add per row)", "encode_per_row_s")):
        t = m[key]
        print(f"  {name:<28} {n / t / 1e6:7.3f} M rows/s  {m['payload_bytes'] / t / mb:7.1f}"
              f" payload MB/s  {m['sst_bytes'] / t / mb:7.1f} sst MB/s")
    for name, key in (("decode_block_v2 (all)", "decode_blocks_s"),
                      ("parse_sst().rows() (+CRC)", "parse_rows_s")):
        t = m[key]
        print(f"  {name:<28} {n / t / 1e6:7.3f} M rows/s  {m['sst_bytes'] / t / mb:7.1f}"
              " sst MB/s")
    print(f"  {'siphash13_many':<28} {m['siphash_many_s'] / n * 1e9:7.1f} ns/key")
    print(f"  {'siphash13 (one call/key)':<28} {m['siphash_one_s'] / n * 1e9:7.1f} ns/key")
    print(f"  {'bloom build (10 bits/key)':<28} {m['bloom_build_s'] * 1e3:7.2f} ms"
          f"  ({m['bloom_build_s'] / n * 1e9:.1f} ns/key)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--native-only", action="store_true")
    ap.add_argument(CHILD_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.rows, args.repeat)))
        return
    results = {}
    if native.HAVE_NATIVE:
        results["native"] = measure(args.rows, args.repeat)
    else:
        print("slatelib._speedups is not built (or SLATELIB_NO_NATIVE is set)")
    if not args.native_only:
        env = dict(os.environ, SLATELIB_NO_NATIVE="1")
        out = subprocess.run(
            [sys.executable, __file__, CHILD_FLAG, "--rows", str(args.rows),
             "--repeat", str(args.repeat)],
            env=env, check=True, capture_output=True, text=True,
        ).stdout
        results["pure Python"] = json.loads(out.strip().splitlines()[-1])
    for label, m in results.items():
        report(label, m)
    if len(results) == 2:
        nat, py = results["native"], results["pure Python"]
        print("\n== speedup (native / pure Python)")
        for key in ("encode_s", "encode_per_row_s", "decode_blocks_s", "parse_rows_s",
                    "siphash_many_s", "bloom_build_s"):
            print(f"  {key:<28} {py[key] / nat[key]:7.1f}x")


if __name__ == "__main__":
    main()
