"""``make demo-s3``: the newcomer path on S3, end to end, on a local S3 server.

    s3_demo.py [--rows N] [--l0s K] [--workdir DIR] [--seed S]

1. starts ``moto_server`` (the ``moto[server]`` test dependency) on 127.0.0.1, on a free
   port, and creates a bucket;
2. writes ``--env-file`` DIR/s3.env with the endpoint and (dummy) credentials, the way a
   user keeps S3 settings out of ``conf/`` (an ``http://`` endpoint infers ``allow_http``);
3. writes a database ``s3://BUCKET/demo/db`` with the OFFICIAL ``slatedb==0.17.0`` package
   (``compactor_options = null``): ``--rows`` operations in random key order (puts,
   overwrites, deletes) flushed into ``--l0s`` L0 SSTs;
4. runs ``slate-spark compact --policy l0`` and then ``slate-spark gc --no-dry-run`` (Spark
   ``local[2]`` from ``conf/dev.toml``) against the server, printing each command (the
   job prints its headline on stderr; its JSON report goes to DIR/compact.json, gc.json);
5. checks with the official ``DbReader`` that every key reads as written (full scan and a
   point get per key), that the L0s became one sorted run and that GC deleted objects
   (superseded manifests, compaction records, replayed WAL);
6. stops the server (also on failure).

Exit code 0 when every check passed, 1 otherwise. The JSON reports and the server log stay
in ``--workdir`` (default ``var/demo-s3``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DB_PATH = "demo/db"
REGION = "us-east-1"
ACCESS_KEY = SECRET_KEY = "testing"  # moto accepts any credentials


class DemoFailed(Exception):
    """A step of the demo failed (the message says which)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(workdir: Path, timeout_s: float = 30.0) -> tuple[subprocess.Popen[bytes], str]:
    """``moto_server -H 127.0.0.1 -p PORT``, once it answers; returns it and its endpoint."""
    exe = BIN / "moto_server"
    cmd = [str(exe) if exe.exists() else "moto_server", "-H", "127.0.0.1"]
    for _ in range(3):  # the free port may be taken by someone else in between
        port = free_port()
        endpoint = f"http://127.0.0.1:{port}"
        log = open(workdir / "moto.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([*cmd, "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(endpoint + "/moto-api/", timeout=1) as r:
                    if r.status == 200:
                        return proc, endpoint
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        stop_server(proc)
    raise DemoFailed(f"moto_server did not start; see {workdir / 'moto.log'}")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def create_bucket(endpoint: str, name: str) -> None:
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                 aws_secret_access_key=SECRET_KEY).create_bucket(Bucket=name)


def official_store(endpoint: str, bucket: str) -> Any:
    from slatedb.uniffi import ObjectStoreBuilder, ObjectStoreType

    builder = ObjectStoreBuilder.from_env(ObjectStoreType.S3)
    for key, value in {"bucket": bucket, "endpoint": endpoint, "region": REGION,
                       "access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY,
                       "allow_http": "true", "virtual_hosted_style_request": "false"}.items():
        builder.with_config(key, value)
    return builder.build()


def write_official(store: Any, rows: int, l0s: int, seed: int) -> dict[bytes, bytes | None]:
    """Write the database with the official package; returns key -> last value (None:
    deleted)."""
    from slatedb.uniffi import (
        CloseOptions,
        DbBuilder,
        FlushOptions,
        FlushType,
        Settings,
        WriteBatch,
    )

    settings = Settings.default()
    settings.set("compactor_options", "null")  # the Spark job is the compactor
    settings.set("flush_interval", "null")
    builder = DbBuilder(DB_PATH, store)
    builder.with_settings(settings)
    rng = random.Random(seed)
    model: dict[bytes, bytes | None] = {}
    written: list[bytes] = []
    per_l0 = max(1, rows // l0s)

    async def go() -> None:
        db = await builder.build()
        batch, in_batch = WriteBatch(), 0
        for i in range(rows):
            roll = rng.random()
            if written and roll < 0.1:
                key = rng.choice(written)
                batch.delete(key)
                model[key] = None
            else:
                key = (rng.choice(written) if written and roll < 0.4
                       else f"user:{rng.randrange(10**8):08d}".encode())
                value = f"v{i}-{rng.randrange(1 << 30):x}".encode() * rng.randint(1, 4)
                batch.put(key, value)
                if key not in model:
                    written.append(key)
                model[key] = value
            in_batch += 1
            if in_batch == 500 or (i + 1) % per_l0 == 0 or i + 1 == rows:
                await db.write(batch)
                batch, in_batch = WriteBatch(), 0
            if (i + 1) % per_l0 == 0 and i + 1 < rows:
                await db.flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE))
        await db.flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE))
        await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))

    asyncio.run(go())
    return model


def manifest_tree(store: Any) -> tuple[int, int]:
    """(L0 SSTs, sorted runs) of the latest manifest, as the official package reads it."""
    from slatedb.uniffi import AdminBuilder

    async def go() -> Any:
        return await AdminBuilder(DB_PATH, store).build().read_manifest(None)

    m = asyncio.run(go())
    return len(m.l0), len(m.compacted)


def verify_official(store: Any, model: dict[bytes, bytes | None]) -> None:
    """Every key of ``model`` through the official ``DbReader``: a full scan and point
    gets."""
    from slatedb.uniffi import DbReaderBuilder, KeyRange

    async def go() -> tuple[list[tuple[bytes, bytes]], dict[bytes, bytes | None]]:
        reader = await DbReaderBuilder(DB_PATH, store).build()
        try:
            it = await reader.scan(KeyRange(start=None, start_inclusive=True, end=None,
                                            end_inclusive=False))
            scanned: list[tuple[bytes, bytes]] = []
            while True:
                got = await it.next_batch(4096)
                scanned.extend((kv.key, kv.value) for kv in got)
                if len(got) < 4096:
                    break
            gets = {k: await reader.get(k) for k in model}
            return scanned, gets
        finally:
            await reader.shutdown()

    scanned, gets = asyncio.run(go())
    expected = sorted((k, v) for k, v in model.items() if v is not None)
    if scanned != expected:
        raise DemoFailed(f"official scan: {len(scanned)} rows, expected {len(expected)}"
                         f" (first difference near "
                         f"{next((a for a, b in zip(scanned, expected, strict=False) if a != b), None)})")
    wrong = [k for k, v in model.items() if gets[k] != v]
    if wrong:
        raise DemoFailed(f"official point gets: {len(wrong)} keys differ, e.g. {wrong[0]!r}")


def run_job(job: str, args: list[str], env: dict[str, str], report: Path) -> dict[str, Any]:
    """``slate-spark JOB ARGS --report FILE``; returns the report (raises on failure)."""
    exe = BIN / "slate-spark"
    cmd = ([str(exe)] if exe.exists() else [sys.executable, "-m", "slatelib.jobs.launcher"])
    cmd += [job, *args, "--report", str(report)]
    shown = " ".join(shlex.quote(c) for c in [Path(cmd[0]).name, *cmd[1:]])
    print(f"\n$ {shown}", flush=True)
    proc = subprocess.run(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, text=True,
                          check=False)  # stderr (progress, headline) passes through
    if proc.returncode != 0:
        raise DemoFailed(f"slate-spark {job} exited {proc.returncode}; stdout:\n{proc.stdout}")
    result: dict[str, Any] = json.loads(proc.stdout)
    if result.get("status") != "success":
        raise DemoFailed(f"slate-spark {job}: status {result.get('status')}")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--l0s", type=int, default=4)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--workdir", default=str(REPO / "var" / "demo-s3"))
    args = p.parse_args(argv)
    if args.rows < args.l0s or args.l0s < 2:
        p.error("need --l0s >= 2 and --rows >= --l0s")
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    bucket = "slatelib-demo"
    url = f"s3://{bucket}/{DB_PATH}"

    server, endpoint = start_server(workdir)
    print(f"moto_server on {endpoint} (pid {server.pid}); bucket {bucket}", flush=True)
    try:
        create_bucket(endpoint, bucket)
        env_file = workdir / "s3.env"
        env_file.write_text(
            "# S3 settings for the demo (make demo-s3); secrets belong here, not in conf/\n"
            f"SLATELIB_S3_ENDPOINT={endpoint}\n"
            f"SLATELIB_S3_REGION={REGION}\n"
            f"SLATELIB_S3_ACCESS_KEY_ID={ACCESS_KEY}\n"
            f"SLATELIB_S3_SECRET_ACCESS_KEY={SECRET_KEY}\n")
        store = official_store(endpoint, bucket)
        started = time.monotonic()
        model = write_official(store, args.rows, args.l0s, args.seed)
        l0, runs = manifest_tree(store)
        print(f"official slatedb 0.17.0 wrote {url}: {len(model)} keys "
              f"({sum(v is None for v in model.values())} deleted), {l0} L0 SSTs, "
              f"{runs} sorted runs ({time.monotonic() - started:.1f} s)", flush=True)
        if l0 < 2:
            raise DemoFailed(f"expected several L0 SSTs, got {l0}")

        # The jobs see the server only through the env file (and conf/dev.toml for Spark):
        # no SLATELIB_S3_* variables of the caller's shell get in the way (they would win).
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLATELIB_S3_")}
        common = ["--env-file", str(env_file), "--conf", str(REPO / "conf" / "dev.toml"),
                  "--db", url]
        run_job("compact", [*common, "--policy", "l0"], env,
                workdir / "compact.json")
        l0_after, runs_after = manifest_tree(store)
        if l0_after != 0 or runs_after != 1:
            raise DemoFailed(f"after compaction: {l0_after} L0 SSTs and {runs_after} sorted "
                             "runs, expected 0 and 1")
        gc = run_job("gc", [*common, "--no-dry-run", "--min-age", "0s", "--force"], env,
                     workdir / "gc.json")
        deleted = int((gc.get("totals") or {}).get("deleted", 0) or 0)
        if deleted < 1:
            raise DemoFailed("gc deleted nothing, expected the superseded manifests, "
                             "compactions and WAL")

        verify_official(store, model)
        print(f"\nok: the official reader sees every one of the {len(model)} keys as written "
              f"after compaction ({l0} L0 -> 1 sorted run) and GC ({deleted} objects "
              f"deleted); reports in {workdir}", flush=True)
        return 0
    except DemoFailed as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        stop_server(server)
        print(f"moto_server stopped (pid {server.pid})", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
