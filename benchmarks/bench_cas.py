"""CAS benchmark: manifest commits through put-if-absent, native and two-phase, in one run.

Each case commits ``--commits`` successive manifests of one database (``ManifestStore.write``
of id ``n + 1`` after id ``n``: encode, then ``put_if_absent`` of the next name, the write of
every manifest commit), from one client, and reports commits per second and the p50/p99
latency of one commit. Cases:

- ``local``: local disk, native create-if-absent (slatelib's link-based conditional put);
- ``local+sqlite``, ``local+postgresql``: local disk with ``conditional_writes = false`` and
  two-phase CAS through SQLite (a file on the same disk, ``synchronous=FULL``) or
  PostgreSQL (a throwaway cluster on 127.0.0.1 with ``fsync=on``, started by the benchmark
  as an unprivileged user);
- ``s3``: the tests' moto S3 server (``tests/s3_server.py``), native ``If-None-Match``;
- ``s3+sqlite``, ``s3+postgresql``: the same S3 server with conditional writes refused and
  two-phase CAS: the setting two-phase CAS is for.

The manifest is a real one (the initial manifest of a database, a few hundred bytes).
The run ends with a JSON line of every figure.

Usage::

    .venv/bin/python benchmarks/bench_cas.py [--commits 300] [--only local,s3+postgresql]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from slatelib.core.manifest import Manifest  # noqa: E402
from slatelib.objstore import ObjectStore, open_store  # noqa: E402
from slatelib.store.manifest_store import ManifestStore  # noqa: E402
from tests.pg_server import PgServer, start_pg  # noqa: E402
from tests.s3_server import create_bucket, start_moto_server  # noqa: E402

CASES = ("local", "local+sqlite", "local+postgresql", "s3", "s3+sqlite", "s3+postgresql")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def commit_loop(store: ObjectStore, commits: int, db: str = "db") -> dict[str, float]:
    """Create the database ``db``, then time ``commits`` manifest commits."""
    manifests = ManifestStore(store, db)
    manifest = Manifest.initial()
    manifests.write(1, manifest)
    latencies: list[float] = []
    start = time.perf_counter()
    for n in range(2, commits + 2):
        t0 = time.perf_counter()
        manifests.write(n, manifest)
        latencies.append(time.perf_counter() - t0)
    total = time.perf_counter() - start
    return {"commits": commits, "seconds": round(total, 3),
            "commits_per_s": round(commits / total, 1),
            "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
            "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
            "mean_ms": round(statistics.fmean(latencies) * 1000, 2)}


@contextmanager
def environment(cases: list[str]) -> Iterator[dict[str, Any]]:
    """The servers the chosen cases need, started once and stopped at the end."""
    env: dict[str, Any] = {}
    with ExitStack() as stack:
        if any(c.startswith("s3") for c in cases):
            moto = start_moto_server()
            stack.callback(moto.stop)
            env["moto"] = moto.endpoint
        if any(c.endswith("postgresql") for c in cases):
            pg: PgServer = start_pg(fsync=True)  # durable commits, as in production
            stack.callback(pg.close)
            env["pg"] = pg
        yield env


def open_case(case: str, tmp: Path, env: dict[str, Any]) -> ObjectStore:
    backend = case.partition("+")[2]
    options: dict[str, str | bool] = {}
    if backend == "sqlite":
        options = {"cas": f"sqlite://{tmp}/cas-{case.replace('+', '-')}.sqlite",
                   "conditional_writes": False}
    elif backend == "postgresql":
        server: PgServer = env["pg"]
        options = {"cas": server.url(), "conditional_writes": False}
    if case.startswith("s3"):
        bucket = create_bucket(env["moto"])
        return open_store(bucket.url, **bucket.options, **options)
    return open_store(f"file://{tmp}/{case.replace('+', '-')}", **options)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commits", type=int, default=300)
    p.add_argument("--only", default=",".join(CASES),
                   help=f"comma-separated cases (default all: {', '.join(CASES)})")
    args = p.parse_args(argv)
    cases = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        p.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    results: dict[str, dict[str, float]] = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-cas-") as tmp, environment(cases) as env:
        for case in cases:
            store = open_case(case, Path(tmp), env)
            commit_loop(store, 20, "warmup")  # connections, table creation, page cache
            results[case] = commit_loop(store, args.commits)
            r = results[case]
            print(f"{case:18s} {r['commits_per_s']:8.1f} commits/s   p50 {r['p50_ms']:7.2f} ms"
                  f"   p99 {r['p99_ms']:7.2f} ms   ({r['commits']} commits, {r['seconds']} s)",
                  flush=True)
    load_after = os.getloadavg()
    print(json.dumps({"results": results, "loadavg_before": load_before,
                      "loadavg_after": load_after, "cpus": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
