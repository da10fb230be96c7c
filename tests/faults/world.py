"""The shared state of one soak run: the seed's random stream, the local store, the
databases, the writers, readers, checkpoints and clones alive, the ledger, the event log.

One ``random.Random(seed)`` (``world.rng``) makes every choice; child processes and
per-actor fault rules get their seeds from it. Time bounds: ``deadline`` (monotonic) and
``max_episodes``; :meth:`World.close` kills every child process and closes every handle.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from slatelib.objstore import ObjectStore, open_raw_store
from slatelib.objstore.registry import with_retries
from tests.faults.faults import StoreFaults, flaky_store
from tests.faults.ledger import Ledger
from tests.faults.procs import Proc

if TYPE_CHECKING:
    from tests.faults.readers import Readers
    from tests.faults.writers import Writer

DB = "db"
CONF = """
[sst]
block_size = 1024
min_filter_keys = 1
[compaction]
min_range_bytes = 1
max_sst_size = "16KiB"
parallelism = 2
manifest_update_timeout = "20s"
[gc]
db_delete_grace = "0s"
"""


@dataclass
class CheckpointRecord:
    """A checkpoint the harness created, and what it showed when created."""

    id: uuid.UUID
    path: str
    content: list[tuple[bytes, bytes]] | None
    expires: bool
    created: float = field(default_factory=time.monotonic)


@dataclass
class CloneRecord:
    """A clone the harness created from checkpoint ``source`` (content must equal it)."""

    path: str
    content: list[tuple[bytes, bytes]]
    initialized: bool = False


class World:
    def __init__(self, seed: int, root: Path, *, deadline: float, max_episodes: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.root = root
        self.url = f"file://{root}"
        self.deadline = deadline
        self.max_episodes = max_episodes
        self.raw: ObjectStore = open_raw_store(self.url)
        self.store: ObjectStore = with_retries(self.raw)  # fault-free, for the auditor
        self.ledger = Ledger()
        self.writers: list[Writer] = []
        self.procs: list[Proc] = []
        self.checkpoints: dict[uuid.UUID, CheckpointRecord] = {}
        self.clones: dict[str, CloneRecord] = {}
        self.clone_paths: set[str] = set()
        """Every path a clone was ever attempted at (complete or not)."""
        self.readers: Readers | None = None
        self.events: list[str] = []
        self.covered: dict[str, int] = {}
        self.next_writer = 0
        self._ids = threading.Lock()
        self.next_gen = 0
        self.next_checkpoint = 0
        self.needs_slatelib_open = False
        """A child with several WAL writes in flight was killed: only a slatelib writer
        may open next (README: an official writer does not repair a WAL gap)."""
        self.clock_taint_until = 0.0
        """Until then a writer's clock was skewed: its SST ULIDs do not order with real
        time, so only slatelib GC with an accurate clock runs (official GC has no
        object-age guard), and no writer is stalled past min_age."""
        self.official_writers_after = 0.0
        """A writer whose clock ran ahead left ``last_l0_clock_tick`` in the future: an
        official 0.17 writer refuses to write ("invalid clock tick, must be monotonic")
        until real time passes it (slatelib's writer keeps its ticks monotonic instead)."""
        self.conf = root / "slate.toml"
        self.conf.write_text(CONF)
        self.episode = 0
        self.started = time.monotonic()

    # ------------------------------------------------------------------ helpers
    def log(self, text: str) -> None:
        self.events.append(f"[{time.monotonic() - self.started:7.2f}s ep{self.episode}] {text}")

    def note(self, scenario: str) -> None:
        self.covered[scenario] = self.covered.get(scenario, 0) + 1

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def child_seed(self) -> int:
        return self.rng.randrange(1 << 30)

    def faulty(self, actor: str, **kw: object) -> ObjectStore:
        """A store for one actor with seeded faults (logged)."""
        store, _flaky, what = flaky_store(self.raw, random.Random(self.child_seed()), **kw)  # type: ignore[arg-type]
        self.log_faults(actor, what)
        return store

    def log_faults(self, actor: str, what: StoreFaults) -> None:
        if what.rules:
            self.log(f"  faults for {actor} ({'retries' if what.retries else 'bare'}): "
                     + "; ".join(what.rules))

    def new_writer_id(self, kind: str) -> tuple[str, int]:
        with self._ids:
            self.next_writer += 1
            self.next_gen += 1
            return f"{kind}{self.next_writer}", self.next_gen

    def official_writer_may_open(self) -> bool:
        return not self.needs_slatelib_open and time.monotonic() >= self.official_writers_after

    @property
    def clock_tainted(self) -> bool:
        return time.monotonic() < self.clock_taint_until or any(
            w.alive and w.skew_s for w in self.writers)

    @property
    def current(self) -> Writer | None:
        for w in reversed(self.writers):
            if w.alive and w.fenced_at is None:
                return w
        return None

    def spawn(self, name: str, module_args: list[str]) -> Proc:
        proc = Proc.python(name, module_args)
        self.procs.append(proc)
        return proc

    def slate_argv(self, path: str, *command: str) -> list[str]:
        return ["--db", f"{self.url}/{path}", "--conf", str(self.conf), *command]

    def pump(self) -> None:
        for w in self.writers:
            w.pump()

    def close(self) -> None:
        """Kill every child, close every writer and reader (errors are logged only)."""
        for w in self.writers:
            try:
                w.close()
            except Exception as exc:  # noqa: BLE001 - shutting down after whatever happened
                self.log(f"close {w.wid}: {type(exc).__name__}: {exc}")
        for proc in self.procs:
            proc.close()
        if self.readers is not None:
            self.readers.close()
