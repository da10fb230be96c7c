"""Memtables of WAL rows: the writer's (acknowledged WAL SSTs) and the readers' (replay).

Rows enter a memtable only once the WAL SST holding them is durable and every WAL before it
is too (acknowledgements are strictly in WAL order), so a memtable always holds exactly the
rows of a contiguous range of WAL ids and ``last_wal_id`` is the exact
``replay_after_wal_id`` of its L0 flush.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor

from slatelib.core.manifest import I64_MIN, Manifest
from slatelib.core.memtable import MemTable
from slatelib.core.row import Row
from slatelib.errors import ObjectMissingError
from slatelib.format.seq_tracker import SEQ_TRACKER_INTERVAL_S, Pair
from slatelib.store.wal_store import WalStore

log = logging.getLogger(__name__)


class WalMemTable:
    """Rows of a contiguous range of WAL SSTs ending at ``last_wal_id`` (a writer's active
    or immutable memtable, or a reader's replayed table)."""

    __slots__ = ("table", "last_wal_id", "first_seq", "last_seq", "last_tick", "tracker")

    def __init__(self, last_wal_id: int) -> None:
        self.table = MemTable()
        self.last_wal_id = last_wal_id
        self.first_seq: int | None = None
        self.last_seq = 0
        self.last_tick = I64_MIN
        self.tracker: list[Pair] = []

    @property
    def size_bytes(self) -> int:
        return self.table.size_bytes

    def is_empty(self) -> bool:
        return self.table.is_empty()

    def add_rows(self, rows: Iterable[Row], wal_id: int) -> None:
        """Insert the rows of WAL ``wal_id`` (in seq order)."""
        put = self.table.put
        last_seq, last_tick, first = self.last_seq, self.last_tick, self.first_seq
        for row in rows:
            put(row)
            seq = row[1]
            if seq > last_seq:
                last_seq = seq
            if first is None or seq < first:
                first = seq
            ts = row[5]
            if ts is not None and ts > last_tick:
                last_tick = ts
        self.last_seq, self.last_tick, self.first_seq = last_seq, last_tick, first
        if wal_id > self.last_wal_id:
            self.last_wal_id = wal_id

    def record_batches(self, batches: Sequence[tuple[int, int]]) -> None:
        """Sample ``(seq, create time)`` of committed batches for the manifest's sequence
        tracker: the first batch of the memtable, then one per 60 s (as 0.17 does)."""
        tracker = self.tracker
        for seq, create_ms in batches:
            ts = create_ms // 1000
            if tracker and ts - tracker[-1][1] < SEQ_TRACKER_INTERVAL_S:
                continue
            if tracker and (seq < tracker[-1][0] or ts < tracker[-1][1]):
                continue
            tracker.append((seq, ts))


def purge_tables(tables: Sequence[WalMemTable], last_l0_seq: int) -> list[WalMemTable]:
    """Tables (newest first) without the rows that a manifest's ``last_l0_seq`` covers."""
    out: list[WalMemTable] = []
    for t in tables:
        if t.last_seq <= last_l0_seq:
            continue
        if t.first_seq is not None and t.first_seq > last_l0_seq:
            out.append(t)
            continue
        kept = WalMemTable(t.last_wal_id)
        kept.add_rows([r for r in t.table.rows() if r[1] > last_l0_seq], t.last_wal_id)
        out.append(kept)
    return out


def replay_tail(
    wal: WalStore,
    manifest: Manifest,
    tables: Sequence[WalMemTable],
    *,
    after_wal_id: int = 0,
    applied_seq: int = 0,
    last_wal_id: int | None,
    max_memtable_bytes: int,
    executor: Executor | None = None,
) -> tuple[list[WalMemTable], int, int]:
    """Replay the WAL SSTs after ``after_wal_id`` (and after the manifest's
    ``replay_after_wal_id``) into ``tables`` (newest first), keeping rows above both
    ``applied_seq`` and ``last_l0_seq`` (format §8.3). A full table starts a new one.

    ``last_wal_id`` None probes for the newest WAL. Returns the tables, the WAL watermark
    (every WAL up to it is applied) and the highest seq applied.

    Replay stops at the first missing WAL id (the end of what is readable).

    Raises:
        CorruptObjectError: a WAL SST does not decode.
    """
    out = list(tables)
    after = max(manifest.replay_after_wal_id, after_wal_id)
    floor = max(manifest.last_l0_seq, applied_seq)
    last = wal.last_wal_id(after) if last_wal_id is None else max(last_wal_id, after)
    applied = after
    try:
        for wal_id, rows in wal.replay(after, last, executor=executor):
            applied = wal_id
            fresh = [r for r in rows if r[1] > floor]
            if not fresh:
                continue
            if not out or out[0].size_bytes >= max_memtable_bytes:
                out.insert(0, WalMemTable(wal_id - 1))
            out[0].add_rows(fresh, wal_id)
            floor = max(floor, out[0].last_seq)
    except ObjectMissingError as exc:
        # The end of the readable WAL, as for 0.17's readers: a gap (a crashed writer's
        # WAL write that never landed) or a WAL that GC removed after a newer flush.
        log.info("wal replay stops at a missing WAL [after=%d, error=%s]", applied, exc)
    return out, applied, floor
