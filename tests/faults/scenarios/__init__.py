"""The scenario registry: one entry per line of docs/fault-scenarios.md (same ids), and the
background workload steps run between scenarios.

A soak run deals the entries in a seeded shuffled order, each once per round; pending
entries are listed but never dealt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from tests.faults.scenarios import checkpoint, clone, compaction, gc, rescale, writer
from tests.faults.scenarios.common import (
    gc_now,
    open_writer,
    readers,
    run_compaction_here,
    write_some,
)
from tests.faults.world import World


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    where: Callable[..., None]
    """The function that exercises it (named in docs/fault-scenarios.md)."""
    params: tuple[tuple[str, str], ...] = ()
    pending: str | None = None

    @property
    def qualname(self) -> str:
        return f"{self.where.__module__}.{self.where.__qualname__}"

    def run(self, world: World) -> None:
        if self.pending:
            raise RuntimeError(f"{self.id} is pending: {self.pending}")
        partial(self.where, **dict(self.params))(world)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("F01", "zombie writer after fencing", writer.zombie_writer),
    Scenario("F02", "two writers opening at once", writer.writers_open_at_once),
    Scenario("F03", "writer crash between WAL put / L0 upload and manifest update",
             writer.writer_killed_mid_flush),
    Scenario("F04", "writer SIGKILLed at a random point", writer.writer_killed_random),
    Scenario("F05", "WAL gap after a crash", writer.wal_gap_after_crash),
    Scenario("F06", "lost response on a WAL put", writer.lost_response_wal_put),
    Scenario("F07", "lost CAS response on a manifest", writer.lost_response_manifest_cas),
    Scenario("F08", "store errors before a call takes effect", writer.store_errors),
    Scenario("F09", "store latency", writer.slow_store),
    Scenario("F10", "compactor crash before its commit CAS", compaction.compactor_killed,
             params=(("when", "before"),)),
    Scenario("F11", "compactor crash after its commit CAS", compaction.compactor_killed,
             params=(("when", "after"),)),
    Scenario("F12", "two compactors racing", compaction.compactors_racing),
    Scenario("F13", "lost response on the compaction commit",
             compaction.compactor_lost_commit_response),
    Scenario("F14", "GC racing a writer's flush", gc.gc_racing_flush),
    Scenario("F15", "GC with a stalled writer resuming late", gc.gc_stalled_writer_resumes),
    Scenario("F16", "GC stalled between deciding and deleting, resuming late",
             gc.gc_stalled_resumes_late),
    Scenario("F17", "GC killed mid-run", gc.gc_killed_mid_run),
    Scenario("F18", "clock skew between GC, writers and readers", gc.clock_skew),
    Scenario("F19", "checkpoint expiring during a read",
             checkpoint.checkpoint_expiring_during_read),
    Scenario("F20", "clone crash mid-way", clone.clone_crash_midway),
    Scenario("F21", "destroy during clone", clone.destroy_during_clone),
    Scenario("F22", "readers during compaction and GC", compaction.reader_during_compaction),
    Scenario("R01", "rescale under faults", rescale.rescale_under_faults),
)

BY_ID = {s.id: s for s in SCENARIOS}


def background(world: World) -> None:
    """One step of the steady workload between scenarios."""
    rng = world.rng
    step = rng.choices(("write", "flush", "writer", "checkpoint", "compact", "gc", "read"),
                       weights=(6, 2, 1, 2, 2, 2, 1))[0]
    if step == "write":
        write_some(world)
    elif step == "flush":
        write_some(world)
        w = world.current
        if w is not None and w.alive:
            w.flush()
    elif step == "writer":
        open_writer(world)
        write_some(world)
    elif step == "checkpoint":
        checkpoint.checkpoint_churn(world)
    elif step == "compact":
        run_compaction_here(world, world.faulty("compaction") if rng.random() < 0.3 else None)
    elif step == "gc":
        gc_now(world)
    else:
        readers(world).check("background read")
