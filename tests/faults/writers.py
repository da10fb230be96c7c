"""The writers of a soak run: slatelib ``Db`` in this process, official 0.17 ``Db`` in this
process, and slatelib ``Db`` in a child process (killed, paused, resumed).

Every write goes through the ledger: recorded as tried before the call, acknowledged when
the call returns (slatelib) or when the WAL flush after it returns (official: ``write``
only buffers, ``flush_wal`` makes it durable). A writer that a newer one fenced is a
zombie: what it tries from then on is forbidden (it must fail and never appear).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from slatelib import Db
from slatelib.clock import Clock
from slatelib.config import Settings
from slatelib.objstore import ObjectStore
from tests.faults.faults import SkewedClock, judge
from tests.faults.ledger import ACKED, Attempt, AuditFailure, plan_op
from tests.faults.procs import Proc
from tests.faults.world import DB, World
from tests.unit.writer.support import writer_settings

OFFICIAL_FLUSH_TIMEOUT_S = 30.0
STOP_ERRORS = {"FencedError", "CommitStateUnknownError", "UnavailableError",
               "InvalidDbStateError", "ConflictError"}
"""Errors a child writer may stop on (it reports the type name)."""


L0_MAX = 64
"""Writers block their L0 flushes at this many L0 views until a compaction makes room
(the harness compacts before a flush when L0 is half full)."""


def make_room(world: World) -> None:
    """Compact when L0 is half full, so a flush never waits for a compactor forever."""
    from slatelib.ops.compaction import run_compaction
    from slatelib.store.manifest_store import ManifestStore

    if len(ManifestStore(world.store, DB).read_latest().value.l0) < L0_MAX // 2:
        return
    from tests.faults.scenarios.common import compaction_failed, maint_settings

    try:
        run_compaction(DB, world.store, settings=maint_settings(), policy="full")
        world.log("  compacted to make room in L0")
    except Exception as exc:  # noqa: BLE001 - judged
        compaction_failed(world, exc, "compaction to make room")


@contextmanager
def room_kept(world: World) -> Iterator[None]:
    """While the body runs (a memtable flush), a compactor keeps L0 below its limit, as a
    deployment's compactor would: a writer replaying a long WAL flushes many L0s at once,
    and its flush would otherwise wait at ``l0_max_ssts`` forever."""
    done = threading.Event()
    errors: list[BaseException] = []

    def keep() -> None:
        while not done.wait(0.3):
            try:
                make_room(world)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the flushing thread
                errors.append(exc)
                return

    make_room(world)
    keeper = threading.Thread(target=keep, name="room-keeper", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        done.set()
        keeper.join(60)
    if errors:
        raise errors[0]


def official_settings() -> Any:
    """Official writers: no embedded compactor (slatelib compaction would refuse its epoch)
    and no GC of their own; room for L0 views as slatelib writers have."""
    from tests.interop.official import DbSettings

    return DbSettings(block_size=1024, compactor=False,
                      extra={"garbage_collector_options": "null", "l0_max_ssts": str(L0_MAX),
                             "l0_max_ssts_per_key": str(L0_MAX)})


def slatelib_settings(**writer: object) -> Settings:
    w: dict[str, object] = {"l0_sst_size_bytes": 4000, "l0_max_ssts": L0_MAX,
                            "manifest_poll_interval": 0.5, "checkpoint_lifetime": 600.0}
    w.update(writer)
    s = writer_settings(**w)
    return replace(s, sst=replace(s.sst, block_size=1024))


class Writer:
    """What the scenarios use of every writer."""

    kind = "?"

    def __init__(self, world: World, wid: str, gen: int, skew_s: float = 0.0) -> None:
        self.world = world
        self.wid = wid
        self.gen = gen
        self.skew_s = skew_s
        self.alive = True
        self.fenced_at: float | None = None
        """When a newer writer's open returned (what this one tries later is forbidden)."""
        self.fencing_since: float | None = None
        """When that open began (from then on this writer may find itself fenced)."""
        self.next_n = 0
        self.lane = 0
        self.may_fail = False
        """Racing another opener: failing to write is expected even before a fence."""
        self.acked: list[str] = []
        self.stop_reason: str | None = None

    def attempt(self, lane: int, n: int) -> Attempt:
        key, value = plan_op(self.world.seed, self.wid, lane, n)
        a = self.world.ledger.tried(Attempt(self.wid, lane, n, self.gen, key, value))
        if self.fenced_at is not None:
            self.world.ledger.forbid(a.ident)
        return a

    def acknowledge(self, a: Attempt) -> None:
        self.world.ledger.ack(a.ident)
        self.acked.append(a.ident)

    def mark_flushed(self, idents: list[str]) -> None:
        self.world.ledger.mark_flushed(idents)

    def write(self, count: int) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def flush(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def pump(self) -> None:
        return None

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def stopped(self, reason: str) -> None:
        self.alive = False
        self.stop_reason = reason
        self.world.log(f"  {self.wid} stopped: {reason}")


class SlateWriter(Writer):
    """slatelib ``Db`` in this process (single writing thread: lane 0)."""

    kind = "slatelib"

    def __init__(self, world: World, wid: str, gen: int, db: Db, skew_s: float) -> None:
        super().__init__(world, wid, gen, skew_s)
        self.db = db

    @classmethod
    def open(cls, world: World, store: ObjectStore, *, skew_s: float = 0.0,
             settings: Settings | None = None) -> SlateWriter:
        wid, gen = world.new_writer_id("s")
        clock: Clock | None = SkewedClock(skew_s) if skew_s else None
        db = Db.open(DB, store, settings or slatelib_settings(), clock=clock)
        return cls(world, wid, gen, db, skew_s)

    def write(self, count: int) -> int:
        done = 0
        for _ in range(count):
            if not self.alive:
                break
            a = self.attempt(self.lane, self.next_n)
            self.next_n += 1
            try:
                if a.value is None:
                    self.db.delete(a.key)
                else:
                    self.db.put(a.key, a.value)
            except Exception as exc:  # noqa: BLE001 - judged
                self.stopped(judge(exc, f"{self.wid} write {a.ident}"))
                break
            self.acknowledge(a)
            done += 1
        return done

    def flush(self) -> None:
        if not self.alive:
            return
        before = list(self.acked)
        try:
            with room_kept(self.world):
                self.db.flush()
        except Exception as exc:  # noqa: BLE001 - judged
            self.stopped(judge(exc, f"{self.wid} flush"))
            return
        self.mark_flushed(before)

    def close(self) -> None:
        self.alive = False
        try:
            self.db.close(flush=None)
        except Exception as exc:  # noqa: BLE001 - judged
            judge(exc, f"{self.wid} close")


def official_fenced(exc: BaseException) -> bool:
    """``exc`` is the official 0.17 binding's "fenced" error, ``Closed(FENCED)`` ("detected
    newer DB client"). Its open raises it when a newer writer claimed the next epoch while
    it opened (seen by the manifest refresh after a taken WAL id or by its final refresh),
    as slatelib's open raises ``FencedError``; a write or flush raises it when its WAL id
    is taken."""
    from slatedb.uniffi import CloseReason, Error

    return isinstance(exc, Error.Closed) and exc.reason == CloseReason.FENCED


class OfficialWriter(Writer):
    """Official 0.17 ``Db`` in this process: no compactor, no GC of its own, WAL written
    only by explicit flushes (so a write is acknowledged by the flush that follows it)."""

    kind = "official"

    def __init__(self, world: World, wid: str, gen: int, db: Any) -> None:
        super().__init__(world, wid, gen)
        self.db = db
        self.pending: list[Attempt] = []

    @classmethod
    def open(cls, world: World) -> OfficialWriter:
        from tests.interop.official import OfficialDb

        wid, gen = world.new_writer_id("o")
        return cls(world, wid, gen, OfficialDb.open(world.root, DB, official_settings()))

    def _failed(self, exc: Exception, what: str) -> None:
        if self.fenced_at is None and not self.may_fail:
            raise AuditFailure(f"{self.wid} {what} failed before any newer writer opened: "
                               f"{type(exc).__name__}: {exc}") from exc
        self.stopped(f"{what}: {type(exc).__name__}: {str(exc)[:300]}")

    def write(self, count: int) -> int:
        from tests.interop.official import Delete, Put

        if not self.alive:
            return 0
        for _ in range(count):
            a = self.attempt(self.lane, self.next_n)
            self.next_n += 1
            self.pending.append(a)
            try:
                self.db.write([Delete(a.key)] if a.value is None else [Put(a.key, a.value)])
            except Exception as exc:  # noqa: BLE001 - the binding's error types
                self._failed(exc, "write")
                return 0
        return self._flush("wal")

    def _flush(self, kind: str) -> int:
        import asyncio

        from slatedb.uniffi import FlushOptions, FlushType

        from tests.interop.official import run

        flush_type = FlushType.WAL if kind == "wal" else FlushType.MEM_TABLE
        try:
            run(asyncio.wait_for(self.db.db.flush_with_options(
                FlushOptions(flush_type=flush_type)), OFFICIAL_FLUSH_TIMEOUT_S))
        except TimeoutError as exc:
            raise AuditFailure(f"{self.wid}: flush {kind} did not return in "
                               f"{OFFICIAL_FLUSH_TIMEOUT_S}s") from exc
        except Exception as exc:  # noqa: BLE001 - the binding's error types
            self._failed(exc, f"flush {kind}")
            return 0
        done = len(self.pending)
        for a in self.pending:
            self.acknowledge(a)
        self.pending = []
        return done

    def flush(self) -> None:
        if self.alive:
            with room_kept(self.world):
                self._flush("memtable")
            if self.alive:
                self.mark_flushed(list(self.acked))

    def close(self) -> None:
        self.alive = False
        try:
            self.db.close(flush=None)
        except Exception as exc:  # noqa: BLE001 - a fenced official Db may refuse to close
            self.world.log(f"  {self.wid} close: {type(exc).__name__}")


class ChildWriter(Writer):
    """slatelib ``Db`` in a child process (:mod:`tests.faults.child`), writing its plan on
    ``lanes`` threads; lane 0 also writes the hot keys and flushes every ``flush_every``."""

    kind = "child"

    def __init__(self, world: World, wid: str, gen: int, proc: Proc, *, skew_s: float,
                 lanes: int, in_flight: int, official: bool = False) -> None:
        super().__init__(world, wid, gen, skew_s)
        self.official = official
        if official:
            self.kind = "official"  # it repairs no WAL gap
        self.proc = proc
        self.lanes = lanes
        self.in_flight = in_flight
        self.opened = False
        self.done_lanes = 0
        self.flush_started: list[str] | None = None
        self.hooked = False
        self.paused_at_hook = False

    @classmethod
    def start(cls, world: World, *, lanes: int = 1, in_flight: int = 1, ops: int = 400,
              flush_every: int = 0, skew_s: float = 0.0, hook: str | None = None,
              pace: float = 0.0, l0_bytes: int = 4000, wal_jitter: bool = False,
              official: bool = False) -> ChildWriter:
        if official:
            return cls._start_official(world, ops=ops, flush_every=flush_every, pace=pace)
        wid, gen = world.new_writer_id("c")
        argv = ["tests.faults.child", "writer", "--root", str(world.root), "--path", DB,
                "--writer", wid, "--seed", str(world.seed), "--lanes", str(lanes),
                "--ops", str(ops), "--in-flight", str(in_flight), "--flush-every",
                str(flush_every), "--clock-offset", str(skew_s), "--pace", str(pace),
                "--l0-bytes", str(l0_bytes)]
        if hook:
            argv += ["--hook", hook]
        if wal_jitter:
            argv.append("--wal-jitter")
        w = cls(world, wid, gen, world.spawn(wid, argv), skew_s=skew_s, lanes=lanes,
                in_flight=in_flight)
        world.log(f"  child writer {wid} (gen {gen}, lanes {lanes}, in flight {in_flight}, "
                  f"skew {skew_s}s, hook {hook})")
        return w

    @classmethod
    def _start_official(cls, world: World, *, ops: int, flush_every: int,
                        pace: float) -> ChildWriter:
        wid, gen = world.new_writer_id("p")
        argv = ["tests.faults.child", "official-writer", "--root", str(world.root), "--path",
                DB, "--writer", wid, "--seed", str(world.seed), "--ops", str(ops),
                "--flush-every", str(flush_every), "--pace", str(pace)]
        w = cls(world, wid, gen, world.spawn(wid, argv), skew_s=0.0, lanes=1, in_flight=1,
                official=True)
        world.log(f"  official child writer {wid} (gen {gen})")
        return w

    def wait_open(self, timeout_s: float = 20.0) -> bool:
        line = self.proc.wait_for(lambda ln: ln.startswith(("OPEN", "STOP")), timeout_s)
        self.pump()
        if not self.opened:
            self.stopped(f"did not open: {line} / {self.proc.tail(5)}")
        return self.opened

    def pump(self) -> None:
        for line in self.proc.pump():
            self._line(line)
        if self.alive and not self.proc.alive:
            for line in self.proc.pump():
                self._line(line)
            self.alive = False
            self.stop_reason = self.stop_reason or f"exited {self.proc.p.returncode}"

    def _line(self, line: str) -> None:
        word, _, rest = line.partition(" ")
        if word == "OPEN":
            self.opened = True
        elif word == "TRY":
            lane, n, mono = rest.split()
            a = self.world.ledger.tried(self._attempt(int(lane), int(n)))
            if self.fenced_at is not None and float(mono) > self.fenced_at:
                self.world.ledger.forbid(a.ident)
        elif word == "ACK":
            lane, n, _seq = rest.split()
            ident = f"{self.wid}.{lane}.{n}"
            self.world.ledger.ack(ident)
            self.acked.append(ident)
        elif word == "FLUSH-START":
            self.flush_started = list(self.acked)
        elif word == "FLUSHED":
            self.mark_flushed(self.flush_started or [])
            self.flush_started = None
        elif word == "STOP":
            lane, err, *more = rest.split(" ", 2)
            if self.official:
                mono = float(more[0].split(" ", 1)[0]) if more else 0.0
                if self.fencing_since is None or mono < self.fencing_since:
                    raise AuditFailure(f"official child writer {self.wid} failed before a newer "
                                       f"writer opened: {rest}\n{self.proc.tail()}")
            elif err not in STOP_ERRORS:
                raise AuditFailure(f"child writer {self.wid} lane {lane}: unexpected {rest}\n"
                                   f"{self.proc.tail()}")
            self.world.log(f"  {self.wid} lane {lane} stopped: {err}")
        elif word == "DONE":
            self.done_lanes += 1
        elif word == "HOOK":
            self.hooked = True
            self.world.log(f"  {self.wid} hook: {rest}")
        elif word == "PAUSED":
            self.paused_at_hook = True

    def _attempt(self, lane: int, n: int) -> Attempt:
        key, value = plan_op(self.world.seed, self.wid, lane, n)
        return Attempt(self.wid, lane, n, self.gen, key, value)

    def acked_count(self) -> int:
        return sum(1 for s, a in self.world.ledger.snapshot().values()
                   if a.writer == self.wid and s == ACKED)

    def wait_acks(self, count: int, timeout_s: float) -> int:
        """Pump until ``count`` acknowledgements (or the process ends, or time is up)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.pump()
            if len(self.acked) >= count or not self.proc.alive:
                break
            self.proc.wait_for(lambda ln: ln.startswith("ACK"), 0.05)
        self.pump()
        return len(self.acked)

    def write(self, count: int) -> int:
        self.pump()
        return 0

    def flush(self) -> None:
        self.pump()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.pump()
        self.alive = False
        self.stop_reason = self.stop_reason or "killed"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        try:
            self.pump()
        finally:
            self.alive = False
            self.proc.close()
