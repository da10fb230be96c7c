"""Writer scenarios: zombies, racing opens, crashes, WAL gaps, lost responses, store
errors and latency (docs/fault-scenarios.md, F01-F09)."""

from __future__ import annotations

import threading
import time

from slatelib.errors import FencedError
from tests.faults.faults import flaky_store, judge
from tests.faults.ledger import AuditFailure
from tests.faults.scenarios.common import (
    ensure_writer,
    gc_now,
    open_writer,
    readers,
    record_checkpoint,
    run_compaction_here,
    write_some,
)
from tests.faults.world import World
from tests.faults.writers import (
    ChildWriter,
    OfficialWriter,
    SlateWriter,
    Writer,
    official_fenced,
)


def zombie_writer(world: World) -> None:
    """F01: a newer writer fences the current one, which keeps writing: every write it
    tries afterwards fails and never appears (slatelib, official and child zombies)."""
    world.note("F01")
    old = ensure_writer(world)
    if old is None:
        return
    write_some(world, world.rng.randint(2, 15))
    new = open_writer(world, keep_previous=True)
    if new is None:
        return
    if isinstance(old, SlateWriter | OfficialWriter) and old.alive:
        done = old.write(world.rng.randint(1, 4))  # forbidden: acking one fails the audit
        if done:
            raise AuditFailure(f"zombie {old.wid} acknowledged {done} write(s) after "
                               f"{new.wid} fenced it")
        old.close()
    write_some(world)
    if isinstance(old, ChildWriter):
        old.wait_acks(len(old.acked) + 1000, 1.0)  # it must stop, fenced
    readers(world).check("after a zombie writer")


def writers_open_at_once(world: World) -> None:
    """F02: two writers (slatelib+slatelib or slatelib+official) open at the same moment;
    exactly one of them can write."""
    world.note("F02")
    ensure_writer(world)
    other = world.rng.choice(("slatelib", "official"))
    if not world.official_writer_may_open():
        other = "slatelib"
    go = threading.Barrier(2, timeout=30)
    box: dict[str, object] = {}

    def open_ours(tag: str) -> None:
        try:
            go.wait()
            box[tag] = SlateWriter.open(world, world.store)
        except Exception as exc:  # noqa: BLE001 - judged below
            box[tag] = exc

    t = threading.Thread(target=open_ours, args=("a",))
    t.start()
    if other == "official":
        go.wait()
        try:
            box["b"] = OfficialWriter.open(world)
        except Exception as exc:  # noqa: BLE001
            box["b"] = exc
    else:
        open_ours("b")
    t.join(60)
    opened = [w for w in (box.get("a"), box.get("b")) if isinstance(w, Writer)]
    fenced = 0
    for tag in ("a", "b"):
        v = box.get(tag)
        if isinstance(v, FencedError) or (isinstance(v, BaseException) and official_fenced(v)):
            # Opening fails when the other opener claimed the next epoch meanwhile:
            # slatelib with FencedError, official 0.17 with Closed(FENCED).
            world.log(f"  racing open {tag} fenced: {type(v).__name__}: {str(v)[:160]}")
            fenced += 1
        elif not isinstance(v, Writer) and v is not None:
            judge(v, f"racing open {tag}")  # type: ignore[arg-type]
    world.log(f"  racing opens ({other}): {[w.wid for w in opened]} opened")
    survivors = []
    for w in opened:
        w.lane = 1  # unique keys only: the two are not ordered
        w.may_fail = True
        if w.write(1):
            survivors.append(w)
    if len(survivors) != 1 and (opened or fenced == 2):  # the newest claim must open
        raise AuditFailure(f"racing opens: {len(survivors)} writers could write "
                           f"({[w.wid for w in survivors]})")
    for w in opened:
        if w not in survivors:
            w.fenced_at = time.monotonic()
            w.close()
    if survivors:
        winner = survivors[0]
        winner.lane, winner.may_fail = 0, False
        from tests.faults.scenarios.common import fence_previous

        fence_previous(world, winner)
        write_some(world)


def writer_killed_mid_flush(world: World) -> None:
    """F03: a child writer SIGKILLed around its L0 upload or the manifest CAS that
    commits it (before or after): acknowledged writes survive, the next writer of
    either kind takes over."""
    world.note("F03")
    rng = world.rng
    point = rng.choice(("compacted/", "manifest/"))
    when = rng.choice(("kill", "kill-after"))
    at = rng.randint(0, 2) if point == "compacted/" else rng.randint(1, 3)
    w = open_writer(world, "child", child={"hook": f"{when}:{at}:{point}", "l0_bytes": 2500,
                                            "flush_every": 0, "pace": 0.0, "ops": 2000})
    if not isinstance(w, ChildWriter):
        return
    w.proc.wait(15)
    w.pump()
    world.log(f"  {w.wid}: {w.stop_reason}, {len(w.acked)} acked, hook fired {w.hooked}")
    open_writer(world)
    write_some(world)
    readers(world).check("after a writer killed mid-flush")


def writer_killed_random(world: World) -> None:
    """F04: a writer process (slatelib with 1-2 writing threads, or official 0.17)
    SIGKILLed after a random number of acknowledgements; then GC, and the next writer."""
    world.note("F04")
    rng = world.rng
    official = rng.random() < 0.4
    w = open_writer(world, "child", child={"lanes": rng.choice((1, 2)), "pace": 0.0,
                                            "flush_every": rng.choice((0, 20)),
                                            "official": official})
    if not isinstance(w, ChildWriter):
        return
    w.wait_acks(rng.randint(1, 120), 10)
    w.kill()
    world.log(f"  {w.wid} killed after {len(w.acked)} acks")
    if rng.random() < 0.5:
        gc_now(world, what="gc after a writer kill")
    open_writer(world)
    write_some(world)


def wal_gap_after_crash(world: World) -> None:
    """F05: a child writer with 4 WAL writes in flight on 3 lanes (WAL writes landing out
    of order) is killed: a later WAL SST may land behind a missing one. Readers stop at
    the gap; the next writer must be slatelib (it repairs the gap), then any writer."""
    world.note("F05")
    rng = world.rng
    w = open_writer(world, "child", child={"lanes": 3, "in_flight": 4, "wal_jitter": True,
                                            "pace": 0.0, "flush_every": 0, "l0_bytes": 3000})
    if not isinstance(w, ChildWriter):
        return
    w.wait_acks(rng.randint(10, 150), 10)
    w.kill()
    world.needs_slatelib_open = True
    world.log(f"  {w.wid} (4 in flight) killed after {len(w.acked)} acks")
    readers(world).check("WAL gap before repair")
    open_writer(world, rng.choice(("official", "slatelib", "child")))  # official -> slatelib
    if world.needs_slatelib_open:
        return  # no writer could open (faults): the gap waits for the next one
    write_some(world)
    open_writer(world, rng.choice(("official", "slatelib")))
    write_some(world)
    readers(world).check("WAL gap repaired")


def lost_response_wal_put(world: World) -> None:
    """F06: a WAL put lands but its response is lost (with retries: resolved by reading it
    back; bare: the write's outcome is unknown and the writer stops)."""
    world.note("F06")
    rng = world.rng
    store, flaky, _ = flaky_store(world.raw, rng, count=0)
    flaky.fail_after("put_if_absent", "/wal/", times=rng.choice((1, 2)),
                     skip=rng.randint(0, 12))
    w = open_writer(world, "slatelib", store=store)
    if w is None:
        return
    w.write(rng.randint(5, 30))
    world.log(f"  lost WAL responses fired {flaky.rules[0].fired}x; {w.wid} alive {w.alive}")
    if rng.random() < 0.5:
        open_writer(world)
        write_some(world)
    readers(world).check("after lost WAL responses")


def lost_response_manifest_cas(world: World) -> None:
    """F07: a manifest CAS lands but its response is lost, for a writer's L0 commit, a
    checkpoint, a compaction commit or GC's removal of expired checkpoints."""
    world.note("F07")
    rng = world.rng
    store, flaky, _ = flaky_store(world.raw, rng, count=0, retries=rng.random() < 0.7)
    flaky.fail_after("put_if_absent", "/manifest/", times=1, skip=rng.randint(0, 1))
    actor = rng.choice(("writer", "checkpoint", "compaction", "gc"))
    world.log(f"  lost manifest CAS response for the {actor}")
    if actor == "writer":
        w = open_writer(world, "slatelib", store=store)
        if w is not None:
            w.write(rng.randint(5, 20))
            w.flush()
    elif actor == "checkpoint":
        record_checkpoint(world, lifetime=rng.choice((None, 60.0)), store=store,
                          what="checkpoint (lost CAS response)")
    elif actor == "compaction":
        write_some(world)
        run_compaction_here(world, store, what="compaction (lost CAS response)")
    else:
        record_checkpoint(world, lifetime=1.0, what="soon expired checkpoint")
        time.sleep(1.1)
        gc_now(world, kind="slatelib", store=store, what="gc (lost CAS response)")
    readers(world).check(f"after a lost manifest response ({actor})")


def store_errors(world: World) -> None:
    """F08: store calls fail before they take effect (transient errors), for a writer,
    a compaction, a GC and a checkpoint in turn."""
    world.note("F08")
    rng = world.rng
    w = open_writer(world, "slatelib", store=world.faulty("writer", count=rng.randint(1, 3),
                                                           lost=False))
    if w is not None:
        w.write(rng.randint(5, 30))
        w.flush()
    run_compaction_here(world, world.faulty("compaction", count=rng.randint(1, 3), lost=False),
                        what="compaction (store errors)")
    gc_now(world, kind="slatelib", store=world.faulty("gc", count=rng.randint(1, 3), lost=False),
           what="gc (store errors)")
    record_checkpoint(world, lifetime=None, store=world.faulty("checkpoint", lost=False),
                      what="checkpoint (store errors)")
    readers(world).check("after store errors")


def slow_store(world: World) -> None:
    """F09: every store call of the writer and of a compaction running beside it may be
    slow (seeded latency rules): the writer writes and flushes while the compaction runs in
    another thread."""
    world.note("F09")
    rng = world.rng
    store, flaky, _ = flaky_store(world.raw, rng, count=0)
    flaky.delay(None, "/wal/", seconds=rng.choice((0.005, 0.02)), times=None)
    flaky.delay(None, "/manifest/", seconds=rng.choice((0.01, 0.05)), times=None)
    w = open_writer(world, "slatelib", store=store)
    cstore, cflaky, _ = flaky_store(world.raw, rng, count=0)
    cflaky.delay(None, None, seconds=rng.choice((0.005, 0.02)), times=None)
    errors: list[BaseException] = []

    def compact() -> None:
        try:
            run_compaction_here(world, cstore, what="slow compaction")
        except BaseException as exc:  # noqa: BLE001 - re-raised on the main thread
            errors.append(exc)

    t = threading.Thread(target=compact)
    t.start()
    if w is not None:
        for _ in range(3):
            w.write(rng.randint(3, 10))
            w.flush()
    t.join(60)
    if errors:
        raise errors[0]
    readers(world).check("after a slow store")
