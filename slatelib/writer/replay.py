"""WAL replay on open: rows above ``last_l0_seq`` into memtables bounded by the L0 size."""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass

from slatelib.core.invariants import check_writer_epoch
from slatelib.core.manifest import Manifest
from slatelib.core.merge import MergeOperator
from slatelib.core.row import MERGE
from slatelib.errors import DataError, MergeOperatorMissingError, ObjectMissingError
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.memtables import WalMemTable
from slatelib.store.wal_store import WalStore


@dataclass
class Replayed:
    """Memtables rebuilt from the WAL (oldest first; the last one stays active)."""

    memtables: list[WalMemTable]
    last_seq: int
    last_tick: int


def replay_into_memtables(
    wal: WalStore,
    manifests: ManifestStore,
    manifest: Manifest,
    last_wal_id: int,
    *,
    epoch: int,
    max_memtable_bytes: int,
    merge_operator: MergeOperator | None,
    executor: Executor | None = None,
) -> Replayed:
    """Replay WAL ids ``(replay_after_wal_id, last_wal_id]`` (format §8.3).

    Memtables are cut at WAL boundaries once they reach ``max_memtable_bytes``, so each
    one's ``last_wal_id`` is exact.

    Raises:
        FencedError: a WAL vanished because a newer writer moved on (and GC removed it).
        DataError: a WAL in the range is missing for any other reason, or does not decode.
        MergeOperatorMissingError: the WAL holds merge operands and no operator is set.
    """
    after = manifest.replay_after_wal_id
    floor = manifest.last_l0_seq
    tables = [WalMemTable(after)]
    last_seq = floor
    last_tick = manifest.last_l0_clock_tick
    try:
        for wal_id, rows in wal.replay(after, last_wal_id, executor=executor):
            fresh = [r for r in rows if r[1] > floor]
            if fresh:
                if merge_operator is None:
                    merge = next((r for r in fresh if r[2] == MERGE), None)
                    if merge is not None:
                        raise MergeOperatorMissingError(merge[0])
                current = tables[-1]
                current.add_rows(fresh, wal_id)
                last_seq = max(last_seq, current.last_seq)
                last_tick = max(last_tick, current.last_tick)
            tables[-1].last_wal_id = wal_id
            if tables[-1].size_bytes >= max_memtable_bytes:
                tables.append(WalMemTable(wal_id))
    except ObjectMissingError as exc:
        check_writer_epoch(manifests.read_latest().value, epoch)
        raise DataError(f"WAL replay of {manifests.root!r} hit a missing WAL: {exc}") from exc
    return Replayed(tables, last_seq, last_tick)
