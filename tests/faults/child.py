"""Subprocess entry points of the soak harness (``python -m tests.faults.child ...``).

``writer``: a slatelib ``Db`` writing the deterministic plan of :func:`plan_op` from one
or more threads ("lanes") and reporting on stdout, one line each, flushed:

    OPEN <mono>                 the writer is open (fenced every older one)
    TRY <lane> <n> <mono>       about to write op n of lane (printed BEFORE the call)
    ACK <lane> <n> <seq>        op n returned: acknowledged
    FLUSH-START / FLUSHED       a memtable flush began / returned (lane 0)
    STOP <lane> <error> <msg>   the lane stopped on an error (FencedError, ...)
    DONE <lane>                 the lane wrote its whole plan

``official-writer``: the official 0.17 ``Db`` writing lane 0 of the same plan, in
batches acknowledged by the WAL flush after them (same lines; STOP carries ``<mono>``).

``slate``: the ``slate`` command line, unchanged.

Both take ``--hook WHEN:AT:MATCH``: count the store writes (put, put_if_absent,
put_if_match, delete, delete_many) whose path contains MATCH and, at the AT-th one (0-based),
``kill`` the process with SIGKILL before the write, ``kill-after`` right after it, or
``pause``: print ``PAUSED`` (stdout for the writer, stderr for slate) and wait for a line
on stdin before doing it. ``<mono>`` is ``time.monotonic()`` (CLOCK_MONOTONIC, comparable
across processes), so the parent can tell a write tried after it fenced this writer.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TextIO

WRITES = ("put", "put_if_absent", "put_if_match", "delete", "delete_many")


def install_hook(spec: str | None, out: TextIO) -> None:  # pragma: no cover - subprocess
    if not spec:
        return
    when, at_text, match = spec.split(":", 2)
    at = int(at_text)
    from slatelib.objstore.obstore_store import ObstoreObjectStore

    lock = threading.Lock()
    counter = [0]

    def hooked(name: str) -> Callable[..., Any]:
        original = getattr(ObstoreObjectStore, name)

        def write(self: object, path: object, *args: object, **kwargs: object) -> Any:
            text = ",".join(map(str, path)) if name == "delete_many" else str(path)  # type: ignore[call-overload]
            hit = False
            if match in text:
                with lock:
                    hit = counter[0] == at
                    counter[0] += 1
            if hit:
                out.write(f"HOOK {when} {name} {text}\n")
                out.flush()
                if when == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                if when == "pause":
                    out.write("PAUSED\n")
                    out.flush()
                    sys.stdin.readline()
            result = original(self, path, *args, **kwargs)
            if hit and when == "kill-after":
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        return write

    for name in WRITES:
        setattr(ObstoreObjectStore, name, hooked(name))


class JitterWal:  # pragma: no cover - subprocess
    """WAL writes take 0 to 6 ms at random, so with several in flight they land out of
    order (a kill then can leave a later WAL SST behind a missing one)."""

    def __init__(self, inner: Any, seed: int) -> None:
        import random

        self._inner = inner
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def put_if_absent(self, path: str, data: bytes) -> None:
        if "/wal/" in path and data:
            with self._lock:
                delay = self._rng.choice((0.0, 0.0, 0.0005, 0.006))
            time.sleep(delay)
        self._inner.put_if_absent(path, data)


def writer(args: argparse.Namespace) -> int:  # pragma: no cover - subprocess
    from slatelib import Db
    from slatelib.objstore import open_store
    from tests.faults.faults import SkewedClock
    from tests.faults.ledger import plan_op
    from tests.unit.writer.support import writer_settings

    out = sys.stdout
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            out.write(line + "\n")
            out.flush()

    install_hook(args.hook, out)
    s = writer_settings(l0_sst_size_bytes=args.l0_bytes, l0_max_ssts=64,
                        wal_max_in_flight=args.in_flight, manifest_poll_interval=0.5,
                        checkpoint_lifetime=600.0,
                        flush_interval=0.0 if args.lanes > 1 else None)
    s = replace(s, sst=replace(s.sst, block_size=1024))
    clock = SkewedClock(args.clock_offset) if args.clock_offset else None
    store: Any = open_store(f"file://{args.root}")
    if args.wal_jitter:
        store = JitterWal(store, args.seed)
    db = Db.open(args.path, store, s, clock=clock)
    say(f"OPEN {time.monotonic()}")

    def lane(t: int) -> None:
        try:
            for n in range(args.start, args.start + args.ops):
                key, value = plan_op(args.seed, args.writer, t, n)
                say(f"TRY {t} {n} {time.monotonic()}")
                seq = db.put(key, value) if value is not None else db.delete(key)
                say(f"ACK {t} {n} {seq}")
                if t == 0 and args.flush_every and n % args.flush_every == args.flush_every - 1:
                    say("FLUSH-START")
                    db.flush()
                    say("FLUSHED")
                if args.pace:
                    time.sleep(args.pace)
            say(f"DONE {t}")
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which judges it
            say(f"STOP {t} {type(exc).__name__} {str(exc)[:200]!r}")

    threads = [threading.Thread(target=lane, args=(t,)) for t in range(args.lanes)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        db.close(flush=None)
    except Exception as exc:  # noqa: BLE001
        say(f"CLOSE {type(exc).__name__}")
    return 0


def official_writer(args: argparse.Namespace) -> int:  # pragma: no cover - subprocess
    """The official 0.17 ``Db`` writing lane 0 of the plan in batches: TRY lines, the
    writes (buffered), a WAL flush, then ACK lines (acknowledged = durable)."""
    import random

    from tests.faults.ledger import plan_op
    from tests.faults.writers import official_settings
    from tests.interop.official import Delete, OfficialDb, Put

    out = sys.stdout

    def say(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    db = OfficialDb.open(args.root, args.path, official_settings())
    say(f"OPEN {time.monotonic()}")
    rng = random.Random(args.seed)
    n = args.start
    try:
        while n < args.start + args.ops:
            batch = range(n, min(n + rng.randint(1, 8), args.start + args.ops))
            for i in batch:
                key, value = plan_op(args.seed, args.writer, 0, i)
                say(f"TRY 0 {i} {time.monotonic()}")
                db.write([Delete(key)] if value is None else [Put(key, value)])
            db.flush_wal()
            for i in batch:
                say(f"ACK 0 {i} 0")
            n = batch[-1] + 1
            if args.flush_every and rng.random() < 1.0 / args.flush_every:
                say("FLUSH-START")
                db.flush_memtable()
                say("FLUSHED")
            if args.pace:
                time.sleep(args.pace)
        say("DONE 0")
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which judges it
        say(f"STOP 0 Official{type(exc).__name__} {time.monotonic()} {str(exc)[:200]!r}")
    db.close(flush=None)
    return 0


def slate(args: argparse.Namespace) -> int:  # pragma: no cover - subprocess
    from slatelib.cli import main

    install_hook(args.hook, sys.stderr)
    return main(list(args.argv))


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - subprocess
    p = argparse.ArgumentParser(prog="python -m tests.faults.child")
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("writer")
    w.add_argument("--root", required=True)
    w.add_argument("--path", default="db")
    w.add_argument("--writer", required=True)
    w.add_argument("--seed", type=int, required=True)
    w.add_argument("--lanes", type=int, default=1)
    w.add_argument("--start", type=int, default=0)
    w.add_argument("--ops", type=int, default=400)
    w.add_argument("--in-flight", type=int, default=1)
    w.add_argument("--l0-bytes", type=int, default=4000)
    w.add_argument("--flush-every", type=int, default=0)
    w.add_argument("--clock-offset", type=float, default=0.0)
    w.add_argument("--pace", type=float, default=0.0)
    w.add_argument("--wal-jitter", action="store_true")
    w.add_argument("--hook", default=None)
    o = sub.add_parser("official-writer")
    for name, default in (("--root", None), ("--path", "db"), ("--writer", None)):
        o.add_argument(name, default=default, required=default is None)
    for name, default in (("--seed", 0), ("--start", 0), ("--ops", 400), ("--flush-every", 0)):
        o.add_argument(name, type=int, default=default)
    o.add_argument("--pace", type=float, default=0.0)
    s = sub.add_parser("slate")
    s.add_argument("--hook", default=None)
    s.add_argument("argv", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.command == "writer":
        return writer(args)
    if args.command == "official-writer":
        return official_writer(args)
    if args.argv and args.argv[0] == "--":
        args.argv = args.argv[1:]
    return slate(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
