"""Bulk load: build a new database whose data is one sorted run, from pairs in any order.

Input pairs are sorted with a bounded-memory external merge sort (runs spill to temporary
files past ``sort_memory_bytes``); for a key given more than once the last pair wins. The
SSTs are uploaded first, then manifest 1 is created with create-if-absent, so a crash
leaves either no database or a complete one (stray SSTs of a failed load are unreferenced
and removed by GC). An existing database is refused.
"""

from __future__ import annotations

import heapq
import logging
import os
import struct
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import BinaryIO

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import Settings
from slatelib.core.manifest import Manifest, SortedRun, SstHandle, SstView
from slatelib.core.row import VALUE, Row
from slatelib.db_manifest import DbManifest
from slatelib.errors import (
    CommitStateUnknownError,
    ConflictError,
    InvalidArgumentError,
    InvalidDbStateError,
)
from slatelib.format.sst import SstWriter, SstWriterOptions
from slatelib.ids import Ulid, UlidGenerator, ulid_to_str
from slatelib.objstore import ObjectStore
from slatelib.paths import normalize_path
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sst_options import sst_writer_options
from slatelib.store.table_store import TableStore

log = logging.getLogger(__name__)

BULK_LOAD_SEQ = 1
_LEN = struct.Struct(">II")
_ENTRY_OVERHEAD = 64


@dataclass
class BulkLoadReport:
    path: str
    rows: int = 0
    input_pairs: int = 0
    ssts: list[str] = field(default_factory=list)
    bytes_written: int = 0
    manifest_id: int = 0
    spilled_runs: int = 0
    seconds: float = 0.0


def _check_pair(pair: object, n: int) -> tuple[bytes, bytes]:
    raw_key: object
    raw_value: object
    try:
        raw_key, raw_value = pair  # type: ignore[misc]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"input item {n} is not a (key, value) pair: {pair!r}") from None
    if not isinstance(raw_key, bytes | bytearray | memoryview) or not isinstance(
        raw_value, bytes | bytearray | memoryview
    ):
        raise InvalidArgumentError(f"input item {n}: key and value must be bytes")
    key, value = bytes(raw_key), bytes(raw_value)
    if not key:
        raise InvalidArgumentError(f"input item {n}: empty key")
    if len(key) > 0xFFFFFFFF or len(value) > 0xFFFFFFFF:
        raise InvalidArgumentError(f"input item {n}: key or value longer than 2**32-1 bytes")
    return key, value


class _ExternalSorter:
    """Sorted, de-duplicated (last wins) pairs with memory bounded by ``budget`` bytes."""

    def __init__(self, budget: int, tmpdir: str | None) -> None:
        self.budget = max(1 << 20, budget)
        self._buf: dict[bytes, bytes] = {}
        self._buf_bytes = 0
        self._runs: list[BinaryIO] = []
        self._tmpdir = tmpdir
        self.count = 0

    def add(self, key: bytes, value: bytes) -> None:
        old = self._buf.get(key)
        self._buf[key] = value
        self._buf_bytes += len(value) + (0 if old is not None else len(key) + _ENTRY_OVERHEAD)
        if old is not None:
            self._buf_bytes -= len(old)
        self.count += 1
        if self._buf_bytes >= self.budget:
            self._spill()

    def _spill(self) -> None:
        f = tempfile.TemporaryFile(dir=self._tmpdir)
        for k in sorted(self._buf):
            v = self._buf[k]
            f.write(_LEN.pack(len(k), len(v)))
            f.write(k)
            f.write(v)
        f.seek(0)
        self._runs.append(f)
        self._buf.clear()
        self._buf_bytes = 0

    @property
    def spilled_runs(self) -> int:
        return len(self._runs)

    def _read_run(self, f: BinaryIO, run_no: int) -> Iterator[tuple[bytes, int, bytes]]:
        while True:
            head = f.read(_LEN.size)
            if not head:
                return
            klen, vlen = _LEN.unpack(head)
            k = f.read(klen)
            v = f.read(vlen)
            yield k, run_no, v

    def sorted_pairs(self) -> Iterator[tuple[bytes, bytes]]:
        if not self._runs:
            for k in sorted(self._buf):
                yield k, self._buf[k]
            return
        mem_run = len(self._runs)
        sources: list[Iterator[tuple[bytes, int, bytes]]] = [
            self._read_run(f, i) for i, f in enumerate(self._runs)
        ]
        sources.append((k, mem_run, self._buf[k]) for k in sorted(self._buf))
        pending: tuple[bytes, int, bytes] | None = None
        for item in heapq.merge(*sources):
            if pending is not None and item[0] != pending[0]:
                yield pending[0], pending[2]
            pending = item  # same key: the later run wins
        if pending is not None:
            yield pending[0], pending[2]

    def close(self) -> None:
        for f in self._runs:
            f.close()
        self._runs.clear()


def _check_absent(manifests: ManifestStore) -> None:
    if manifests.list_ids():
        raise InvalidDbStateError(
            f"a database already exists at {manifests.root!r}: bulk load only creates new ones"
        )


def _commit_manifest(manifests: ManifestStore, manifest: Manifest, ours: set[Ulid]) -> None:
    """Create manifest 1. After a lost response or a lost race, manifest 1 is read back: it
    is ours when it references our SSTs (fresh ULIDs nobody else can have) or equals ours.

    Raises:
        InvalidDbStateError: another creator's manifest 1 won (our SSTs are deleted).
        CommitStateUnknownError: the outcome is unknown and nothing is readable yet.
    """
    unknown: CommitStateUnknownError | None = None
    try:
        manifests.write(1, manifest)
        return
    except ConflictError as exc:
        lost: Exception = exc
    except CommitStateUnknownError as exc:
        lost = unknown = exc
    existing = manifests.try_read(1)
    if existing is not None and (
        existing.value == manifest or ours & existing.value.referenced_sst_ids()
    ):
        log.info("bulk load manifest landed despite a lost response [path=%s]", manifests.root)
        return
    if existing is None and unknown is not None:
        raise unknown
    # Another creator won: nothing can reference our freshly minted SST ids.
    manifests.store.delete_many([manifests.paths.compacted(i) for i in ours])
    raise InvalidDbStateError(
        f"a database was created at {manifests.root!r} concurrently; bulk load aborted"
    ) from lost


def bulk_load(
    path: str,
    store: ObjectStore | str,
    rows: Iterable[tuple[bytes, bytes]],
    *,
    settings: Settings | None = None,
    target_sst_size: int | None = None,
    clock: Clock = SYSTEM_CLOCK,
    tmpdir: str | None = None,
) -> BulkLoadReport:
    """Create a new database at ``path`` holding ``rows`` as one sorted run.

    Raises:
        InvalidDbStateError: a database already exists at ``path`` (or was created while
            loading; the SSTs uploaded are then removed).
        InvalidArgumentError: an input item is not a pair of non-empty bytes key and value.
        CommitStateUnknownError: whether manifest 1 landed cannot be established.
    """
    from slatelib.objstore import resolve_store

    started = time.monotonic()
    settings = settings or Settings()
    root = normalize_path(path, what="database path")
    obj_store = resolve_store(store)
    manifests = DbManifest(obj_store, root)
    _check_absent(manifests)
    tables = TableStore(obj_store, root)
    target = target_sst_size or settings.bulk_load.target_sst_size
    opts = sst_writer_options(settings)
    report = BulkLoadReport(path=root)
    sorter = _ExternalSorter(settings.bulk_load.sort_memory_bytes, tmpdir or os.environ.get("TMPDIR"))
    try:
        for n, pair in enumerate(rows):
            sorter.add(*_check_pair(pair, n))
        report.input_pairs = sorter.count
        report.spilled_runs = sorter.spilled_runs
        handles = _write_ssts(tables, sorter.sorted_pairs(), opts, target, clock, report)
    finally:
        sorter.close()
    now_ms = clock.now_ms()
    views = tuple(SstView.identity(h.id) for h in handles)
    manifest = Manifest.initial().with_trees(
        compacted=[SortedRun(0, views)] if views else [], new_ssts=handles
    )
    if handles:
        manifest = replace(manifest, last_l0_seq=BULK_LOAD_SEQ, last_l0_clock_tick=now_ms)
    _commit_manifest(manifests, manifest, {h.id for h in handles})
    report.manifest_id = 1
    report.seconds = time.monotonic() - started
    log.info("bulk load done [path=%s, rows=%d, ssts=%d, bytes=%d]",
             root, report.rows, len(report.ssts), report.bytes_written)
    return report


def _write_ssts(
    tables: TableStore,
    pairs: Iterator[tuple[bytes, bytes]],
    opts: SstWriterOptions,
    target: int,
    clock: Clock,
    report: BulkLoadReport,
) -> list[SstHandle]:
    ids = UlidGenerator()
    handles: list[SstHandle] = []
    writer: SstWriter | None = None
    create_ts = clock.now_ms()

    def flush(w: SstWriter) -> None:
        encoded = w.finish()
        sst_id = ids.new(clock.now_ms())
        tables.write_sst(sst_id, encoded)
        handles.append(SstHandle(sst_id, encoded.info, encoded.format_version))
        report.ssts.append(ulid_to_str(sst_id))
        report.bytes_written += encoded.size

    for key, value in pairs:
        if writer is None:
            writer = SstWriter(opts)
        row: Row = (key, BULK_LOAD_SEQ, VALUE, value, None, create_ts)
        writer.add(row)
        report.rows += 1
        if writer.estimated_size >= target:
            flush(writer)
            writer = None
    if writer is not None and writer.num_rows:
        flush(writer)
    return handles
