"""Readers of a soak run: a long-lived slatelib ``DbReader`` and official ``DbReader``
(both managed: each keeps its own checkpoint and follows the database), and one-shot reads
of the latest state or of a checkpoint by both."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from slatelib import DbReader
from slatelib.config import ReaderSettings, Settings
from tests.faults.ledger import AuditFailure
from tests.faults.world import World

READER_LIFETIME_S = 600.0
"""Longer than any GC clock skew of the harness (a checkpoint only protects while GC
agrees it is unexpired)."""


def reader_settings(poll_s: float = 0.3) -> Settings:
    return replace(Settings(), reader=replace(ReaderSettings(), manifest_poll_interval=poll_s,
                                              checkpoint_lifetime=READER_LIFETIME_S,
                                              io_threads=2))


def official_managed(world: World, path: str) -> Any:
    from slatedb.uniffi import DbReaderBuilder, ReaderOptions

    from tests.interop.official import OfficialReader, as_store, run

    builder = DbReaderBuilder(path, as_store(world.root))
    builder.with_options(ReaderOptions(manifest_poll_interval_ms=100,
                                       checkpoint_lifetime_ms=int(READER_LIFETIME_S * 1000),
                                       max_memtable_bytes=1 << 26, skip_wal_replay=False))
    return OfficialReader(run(builder.build()))


def read_ours(world: World, path: str, checkpoint: uuid.UUID | None = None,
              mode: str = "latest") -> list[tuple[bytes, bytes]]:
    """One slatelib read of the whole database (latest state, or a checkpoint)."""
    with DbReader.open(path, world.store, checkpoint=checkpoint,
                       mode="managed" if checkpoint is not None else mode,
                       settings=reader_settings(), auto_refresh=False) as r:
        return list(r.scan())


def read_theirs(world: World, path: str, checkpoint: uuid.UUID | None = None
                ) -> list[tuple[bytes, bytes]]:
    """One official read (it writes a checkpoint of its own unless given one)."""
    from tests.interop.official import OfficialReader

    with OfficialReader.open(world.root, path,
                             checkpoint=None if checkpoint is None else str(checkpoint)) as r:
        rows: list[tuple[bytes, bytes]] = r.scan()
        return rows


class Readers:
    """The long-lived pair on the main database."""

    def __init__(self, world: World, path: str) -> None:
        self.world = world
        self.path = path
        self.ours: DbReader | None = None
        self.theirs: Any = None

    def open(self) -> None:
        self.close()
        self.ours = DbReader.open(self.path, self.world.store, settings=reader_settings(),
                                  auto_refresh=True)
        self.theirs = official_managed(self.world, self.path)
        self.world.log("  readers opened (slatelib managed, official managed)")

    def check(self, what: str, *, official_wait_s: float = 6.0) -> None:
        """Both readers show every write acknowledged before the check began, and only
        writes that were tried (the official one is given time to poll)."""
        w = self.world
        if self.ours is None:
            self.open()
        assert self.ours is not None
        w.pump()
        required = w.ledger.snapshot()
        self.ours.refresh()
        ours = list(self.ours.scan())
        w.pump()
        w.ledger.check_read(ours, f"{what}: slatelib managed reader", required=required)
        deadline = time.monotonic() + official_wait_s
        while True:
            theirs = self.theirs.scan()
            w.pump()
            try:
                w.ledger.check_read(theirs, f"{what}: official managed reader",
                                    required=required)
                return
            except AuditFailure:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def close(self) -> None:
        if self.ours is not None:
            self.ours.close()
            self.ours = None
        if self.theirs is not None:
            try:
                self.theirs.close()
            finally:
                self.theirs = None
