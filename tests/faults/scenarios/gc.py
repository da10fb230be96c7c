"""GC scenarios: racing a writer's flush, a writer stalled past min_age that resumes, a
GC stalled between deciding and deleting, a GC killed mid-run, clock skew (F14-F18)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from slatelib.ops.gc import collect_garbage
from tests.faults.faults import Gate, arm, flaky_store, gate_layer, judge
from tests.faults.ledger import AuditFailure
from tests.faults.scenarios.common import (
    check_exit,
    gc_argv,
    gc_now,
    maint_settings,
    open_writer,
    readers,
    record_checkpoint,
    run_compaction_here,
    slate_child,
    write_some,
)
from tests.faults.world import DB, World
from tests.faults.writers import ChildWriter, SlateWriter


class Background:
    """Run ``fn`` in a thread; :meth:`join` re-raises what it raised."""

    def __init__(self, fn: object, name: str) -> None:
        self.error: BaseException | None = None

        def body() -> None:
            try:
                fn()  # type: ignore[operator]
            except BaseException as exc:  # noqa: BLE001 - re-raised by join
                self.error = exc

        self.thread = threading.Thread(target=body, name=name)
        self.thread.start()

    def join(self, timeout_s: float) -> None:
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            raise AuditFailure(f"{self.thread.name} did not finish in {timeout_s}s")
        if self.error is not None:
            raise self.error


def gc_racing_flush(world: World) -> None:
    """F14: GC (slatelib or official, small min_age) runs while a writer uploads an L0 and
    commits it, both slowed down by latency."""
    world.note("F14")
    rng = world.rng
    store, flaky, _ = flaky_store(world.raw, rng, count=0)
    flaky.delay("put_if_absent", "/compacted/", seconds=rng.choice((0.05, 0.2)), times=None)
    flaky.delay("put_if_absent", "/manifest/", seconds=rng.choice((0.05, 0.2)), times=None)
    w = open_writer(world, "slatelib", store=store)
    if not isinstance(w, SlateWriter):
        return
    w.write(rng.randint(10, 40))
    flush = Background(w.flush, "flush")
    time.sleep(rng.choice((0.0, 0.05, 0.15)))
    gc_now(world, min_age=rng.choice((0.5, 1.0)), what="gc racing a flush", audit=False)
    flush.join(60)
    gc_now(world, what="gc after the raced flush")
    readers(world).check("after GC raced a flush")


def gc_stalled_writer_resumes(world: World) -> None:
    """F15: a writer stalls past min_age (in-process: its L0 is uploaded, the manifest CAS
    that commits it waits; child: SIGSTOP), compaction and GC run meanwhile, then it
    resumes: its commit lands or fails, and nothing referenced is gone."""
    world.note("F15")
    rng = world.rng
    if world.clock_tainted:
        return  # a stall past min_age with skewed SST ULIDs is outside the GC guarantee
    min_age = rng.choice((0.5, 1.0))
    resume = _stall_in_process(world) if rng.random() < 0.6 else _stall_child(world)
    if resume is None:
        return
    time.sleep(min_age + 0.3)
    if rng.random() < 0.5:
        run_compaction_here(world, what="compaction while a writer is stalled")
    gc_now(world, kind="slatelib", min_age=min_age, what="gc while a writer is stalled",
           audit=False)
    if rng.random() < 0.4:
        gc_now(world, kind="official", min_age=min_age, audit=False,
               what="official gc while a writer is stalled")
    resume()
    gc_now(world, kind="slatelib", min_age=min_age, what="gc after the stalled writer resumed")
    readers(world).check("after a stalled writer resumed")


def _stall_in_process(world: World) -> Callable[[], None] | None:
    """A slatelib writer whose next manifest write (its flush's commit) stalls at a gate."""
    gate = Gate(timeout_s=30)
    layer = gate_layer(world.store, gate)
    w = open_writer(world, "slatelib", store=layer)
    if not isinstance(w, SlateWriter):
        return None
    arm(layer, "put_if_absent", "/manifest/")
    w.write(world.rng.randint(10, 30))
    flush = Background(w.flush, "stalled flush")
    world.log(f"  flush stalled at its manifest CAS: {gate.wait_reached(10)}")

    def resume() -> None:
        gate.open()
        flush.join(60)

    return resume


def _stall_child(world: World) -> Callable[[], None] | None:
    """A child writer stopped with SIGSTOP (wherever it was) after some acknowledgements."""
    cw = open_writer(world, "child", child={"pace": 0.005, "flush_every": 15, "l0_bytes": 2500})
    if not isinstance(cw, ChildWriter):
        return None
    cw.wait_acks(world.rng.randint(5, 40), 5)
    cw.proc.pause()
    world.log(f"  {cw.wid} paused (SIGSTOP) after {len(cw.acked)} acks")

    def resume() -> None:
        cw.proc.resume()
        cw.wait_acks(len(cw.acked) + 5, 3)

    return resume


def gc_stalled_resumes_late(world: World) -> None:
    """F16: a GC stalls between its decisions and its deletes (in-process: at its first
    delete; child: ``slate gc`` paused at a write) while a writer flushes, a compaction
    commits and a checkpoint is created; then it resumes."""
    world.note("F16")
    rng = world.rng
    write_some(world, rng.randint(10, 30))
    min_age = rng.choice((0.5, 1.0))
    if rng.random() < 0.6:
        gate = Gate(timeout_s=30)
        store = gate_layer(world.store, gate)
        arm(store, "delete_many", rng.choice(("/compacted/", "/wal/", "/manifest/", None)))

        def collect() -> None:
            try:
                collect_garbage(DB, store, min_age=min_age, force=True, dry_run=False,
                                settings=maint_settings())
            except Exception as exc:  # noqa: BLE001 - judged
                world.log(f"  stalled gc: {judge(exc, 'stalled gc')}")

        gc = Background(collect, "stalled gc")
        reached = gate.wait_reached(3)
        world.log(f"  gc stalled before deleting: {reached}")
        _meanwhile(world)
        gate.open()
        gc.join(60)
    else:
        hook = f"pause:{rng.randint(0, 4)}:/"
        proc = slate_child(world, "gc", *gc_argv(min_age), hook=hook)
        paused = proc.wait_for(lambda ln: ln == "PAUSED", 15, stream="err")
        world.log(f"  slate gc paused ({hook}): {paused is not None}")
        _meanwhile(world)
        proc.send_line()
        check_exit(proc, proc.wait(40), "paused slate gc")
    from tests.faults import auditor

    auditor.after_gc(world, "after a stalled GC resumed")
    readers(world).check("after a stalled GC resumed")


def _meanwhile(world: World) -> None:
    rng = world.rng
    write_some(world, rng.randint(10, 30))
    w = world.current
    if w is not None and w.alive:
        w.flush()
    if rng.random() < 0.7:
        run_compaction_here(world, what="compaction while GC is stalled")
    if rng.random() < 0.5:
        record_checkpoint(world, lifetime=rng.choice((None, 60.0)),
                          what="checkpoint while GC is stalled")


def gc_killed_mid_run(world: World) -> None:
    """F17: ``slate gc`` SIGKILLed before or after one of its writes (boundary files,
    checkpoint removal, deletes); a rerun completes; nothing referenced is gone."""
    world.note("F17")
    rng = world.rng
    write_some(world, rng.randint(10, 30))
    run_compaction_here(world, what="compaction before a killed GC")
    time.sleep(0.6)
    hook = f"{rng.choice(('kill', 'kill-after'))}:{rng.randint(0, 6)}:/"
    proc = slate_child(world, "gc", *gc_argv(0.5), hook=hook)
    rc = proc.wait(40)
    world.log(f"  slate gc ({hook}) exit {rc}")
    check_exit(proc, rc, "killed slate gc")
    from tests.faults import auditor

    auditor.after_gc(world, "after a killed GC")
    gc_now(world, what="gc rerun after a kill")


def clock_skew(world: World) -> None:
    """F18: clock skew between processes: a GC whose clock runs minutes ahead or behind
    (writers accurate), or a writer whose clock runs up to a minute off (then GC with an
    accurate clock, and no official GC until the skewed SSTs are old)."""
    world.note("F18")
    rng = world.rng
    if rng.random() < 0.5 and not world.clock_tainted:
        skew = rng.choice((-120.0, -30.0, -2.0, 2.0, 30.0, 120.0))
        write_some(world)
        run_compaction_here(world, what="compaction before a skewed GC")
        gc_now(world, kind="slatelib", skew_s=skew, min_age=rng.choice((1.0, 2.0, 5.0)),
               what=f"gc with its clock {skew:+}s")
    else:
        skew = rng.choice((-60.0, -5.0, 5.0, 60.0))
        kind = rng.choice(("slatelib", "child"))
        w = open_writer(world, kind, skew_s=skew,
                        child={"pace": 0.005, "flush_every": 20, "l0_bytes": 2500})
        world.log(f"  writer {w.wid if w else None} with its clock {skew:+}s")
        write_some(world, 30)
        if w is not None:
            w.flush()
        run_compaction_here(world, what="compaction after a skewed writer")
        gc_now(world, what="gc with a skewed writer")
    readers(world).check("after clock skew")
