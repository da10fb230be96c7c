"""The compactor's state file as frozen data (format §6). Pure: no I/O, no byte formats.

Mirrors ``CompactionsV1`` and its tables field for field, so a decoded compactions file
re-encodes to the same bytes (see :mod:`slatelib.format.compactions_codec`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from slatelib.core.manifest import SsTableInfo, SstHandle
from slatelib.core.ranges import BytesRange
from slatelib.ids import Ulid

COMPACTIONS_FORMAT_VERSION = 2


class CompactionStatus(IntEnum):
    """``CompactionStatus`` (i8). Lifecycle: SUBMITTED -> SCHEDULED -> RUNNING -> COMPACTED
    (outputs written) -> COMPLETED (manifest committed), or FAILED."""

    SUBMITTED = 0
    RUNNING = 1
    COMPLETED = 2
    FAILED = 3
    COMPACTED = 4
    SCHEDULED = 5

    @property
    def is_active(self) -> bool:
        """Not finished yet (0.17.0 ignores ``output_ssts`` of active compactions)."""
        return self in (CompactionStatus.SUBMITTED, CompactionStatus.SCHEDULED,
                        CompactionStatus.RUNNING)


@dataclass(frozen=True, slots=True)
class CompactedSsTable:
    """``CompactedSsTable``: an output SST of a compaction (also the V1 manifest entry).

    ``format_version`` None means the field was absent, which readers treat as 1.
    """

    id: Ulid
    info: SsTableInfo
    visible_range: BytesRange | None = None
    format_version: int | None = 2

    def handle(self) -> SstHandle:
        """The manifest's ``CompactedSsTableV2`` entry for this SST."""
        return SstHandle(self.id, self.info, self.format_version)


@dataclass(frozen=True, slots=True)
class TieredCompactionSpec:
    """Inputs (L0 views newest first, sorted runs) and the destination run of a compaction.

    ``segment`` is b"" for the top-level tree and None when the field was absent (files
    written before segments existed). ``ssts`` is the deprecated slot 0 (SST ids of L0
    inputs, written by old versions only; 0.17.0 reads it when ``l0_view_ids`` is empty).
    In version-1 files ``destination`` is not stored; decoding infers it as the smallest
    input run id, else 0.
    """

    l0_view_ids: tuple[Ulid, ...] = ()
    sorted_runs: tuple[int, ...] = ()
    destination: int = 0
    segment: bytes | None = b""
    ssts: tuple[Ulid, ...] = ()


@dataclass(frozen=True, slots=True)
class DrainSegmentSpec:
    """SlateDB RFC-0024: drain (retire) the listed L0 views and runs of one segment
    (``segment`` non-empty); it writes no run. 0.17's coordinators execute drains
    themselves and never hand them to workers (docs/rfcs/0018-segments.md)."""

    segment: bytes
    l0_view_ids: tuple[Ulid, ...] = ()
    sorted_runs: tuple[int, ...] = ()


CompactionSpec = TieredCompactionSpec | DrainSegmentSpec


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """The worker that claimed a compaction (``worker_id`` is a ULID string)."""

    worker_id: str
    last_heartbeat_ms: int = 0


@dataclass(frozen=True, slots=True)
class Subcompaction:
    """A key range of a compaction and the SSTs already written for it."""

    range: BytesRange
    output_ssts: tuple[CompactedSsTable, ...] = ()


@dataclass(frozen=True, slots=True)
class TieredCompactionContext:
    """Resumable state of a running compaction."""

    subcompactions: tuple[Subcompaction, ...] = ()
    retention_min_seq: int = 0


@dataclass(frozen=True, slots=True)
class Compaction:
    """One compaction: its spec, status, claiming worker, context and output SSTs."""

    id: Ulid
    spec: CompactionSpec
    status: CompactionStatus = CompactionStatus.SUBMITTED
    output_ssts: tuple[CompactedSsTable, ...] = ()
    worker: WorkerSpec | None = None
    ctx: TieredCompactionContext | None = None


@dataclass(frozen=True, slots=True)
class Compactions:
    """One compactions-file version: the compactor epoch and the recent compactions.

    ``format_version`` is the version the file was read from (2 for new state); the codec
    writes it back so that version-1 files round-trip unchanged.
    """

    compactor_epoch: int = 0
    recent_compactions: tuple[Compaction, ...] = ()
    format_version: int = COMPACTIONS_FORMAT_VERSION

    def compaction(self, compaction_id: Ulid) -> Compaction | None:
        """The compaction with this id, or None."""
        for c in self.recent_compactions:
            if c.id == compaction_id:
                return c
        return None
