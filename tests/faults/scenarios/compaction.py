"""Compaction scenarios: ``slate compact`` killed around its commit, two compactors
racing, a lost commit response, readers during compaction (F10-F13, F22)."""

from __future__ import annotations

import threading

from slatelib.errors import CommitStateUnknownError
from slatelib.ops.compaction import run_compaction
from tests.faults.faults import flaky_store, judge
from tests.faults.scenarios.common import (
    check_exit,
    compaction_failed,
    ensure_writer,
    gc_now,
    maint_settings,
    readers,
    run_compaction_here,
    slate_child,
    write_some,
)
from tests.faults.world import World

COMPACT = ("compact", "--policy", "full", "--parallelism", "2")


def _something_to_compact(world: World) -> None:
    w = ensure_writer(world)
    for _ in range(world.rng.randint(1, 3)):
        write_some(world, world.rng.randint(10, 30))
        if w is not None and w.alive:
            w.flush()


def compactor_killed(world: World, when: str) -> None:
    """F10 (``when="before"``) / F11 (``"after"``): ``slate compact`` SIGKILLed right before
    its commit CAS (or at a random earlier write), or right after it (before the
    Completed mark); a rerun completes, GC keeps everything referenced."""
    world.note("F10" if when == "before" else "F11")
    rng = world.rng
    _something_to_compact(world)
    if when == "before":
        hook = rng.choice(("kill:1:/manifest/", f"kill:{rng.randint(0, 8)}:/"))
    else:
        hook = rng.choice(("kill-after:1:/manifest/", "kill-after:0:/compacted/"))
    proc = slate_child(world, "compact", *COMPACT, hook=hook)
    rc = proc.wait(40)
    world.log(f"  slate compact ({hook}) exit {rc}")
    check_exit(proc, rc, "killed slate compact")
    readers(world).check("after a killed compaction")
    if rng.random() < 0.5:
        gc_now(world, what="gc before the compaction rerun")
    run_compaction_here(world, what="compaction rerun")
    gc_now(world, what="gc after the compaction rerun")


def compactors_racing(world: World) -> None:
    """F12: two ``slate compact`` processes: the first paused at one of its writes while
    the second runs to completion (and fences it), then resumed; or both at once."""
    world.note("F12")
    rng = world.rng
    _something_to_compact(world)
    if rng.random() < 0.6:
        hook = rng.choice(("pause:0:/manifest/", "pause:1:/manifest/", "pause:0:/compacted/",
                           "pause:1:/compactions/"))
        first = slate_child(world, "compact-a", *COMPACT, hook=hook)
        paused = first.wait_for(lambda ln: ln == "PAUSED", 20, stream="err")
        write_some(world)
        second = slate_child(world, "compact-b", *COMPACT)
        rc2 = second.wait(40)
        first.send_line()
        rc1 = first.wait(40)
        world.log(f"  racing compactors ({hook}, paused {paused is not None}): "
                  f"first exit {rc1}, second exit {rc2}")
    else:
        first = slate_child(world, "compact-a", *COMPACT)
        second = slate_child(world, "compact-b", *COMPACT)
        rc1, rc2 = first.wait(40), second.wait(40)
        world.log(f"  compactors started at once: exits {rc1}, {rc2}")
    check_exit(first, rc1, "first racing compactor")  # exit 7 here was finding K1
    check_exit(second, rc2, "second racing compactor")
    readers(world).check("after racing compactors")
    gc_now(world, what="gc after racing compactors")


def compactor_lost_commit_response(world: World) -> None:
    """F13: the compaction's commit CAS lands but its response is lost and reading back
    fails too: the outcome is unknown (CommitStateUnknownError); the next run resolves the
    open entry; nothing is lost either way."""
    world.note("F13")
    rng = world.rng
    _something_to_compact(world)
    store, flaky, _ = flaky_store(world.raw, rng, count=0, retries=False)
    flaky.fail_after("put_if_absent", "/manifest/", skip=1, times=1)
    if rng.random() < 0.7:
        flaky.fail_before("get", "/manifest/", skip=rng.randint(1, 3), times=8)
    try:
        report = run_compaction("db", store, settings=maint_settings(), policy="full",
                                parallelism=2)
        world.log(f"  compaction with a lost commit response: {report.status}")
    except CommitStateUnknownError as exc:
        world.log(f"  compaction commit unknown: {str(exc)[:120]}")
    except Exception as exc:  # noqa: BLE001 - judged
        compaction_failed(world, exc, "compaction (lost commit response)")
    readers(world).check("after a compaction with a lost commit response")
    run_compaction_here(world, what="compaction after an unknown commit")
    gc_now(world, what="gc after an unknown commit")


def reader_during_compaction(world: World) -> None:
    """F22: both managed readers keep reading (and polling) while a compaction commits and
    a GC then deletes its inputs."""
    world.note("F22")
    rng = world.rng
    _something_to_compact(world)
    rs = readers(world)
    if rng.random() < 0.3:
        rs.open()  # fresh checkpoints right before the compaction
    stop = threading.Event()
    errors: list[BaseException] = []

    def read_loop() -> None:
        assert rs.ours is not None
        while not stop.is_set():
            try:
                list(rs.ours.scan())
            except BaseException as exc:  # noqa: BLE001 - reported on the main thread
                errors.append(exc)
                return

    t = threading.Thread(target=read_loop)
    t.start()
    try:
        run_compaction_here(world, what="compaction under readers")
        gc_now(world, min_age=rng.choice((0.5, 1.0)), what="gc under readers", audit=False)
    finally:
        stop.set()
        t.join(30)
    if errors:
        judge(errors[0], "slatelib managed reader during compaction and GC")
    rs.check("readers during compaction")
    gc_now(world, what="gc after reading")
