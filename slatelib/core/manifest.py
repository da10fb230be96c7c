"""The manifest as frozen data (format §5). Pure: no I/O, no byte formats.

A :class:`Manifest` mirrors ``ManifestV2`` field for field, including the fields slatelib
does not interpret (``sequence_tracker``, ``segments``, ``wal_object_store_uri``), so a
decoded manifest re-encodes to the same bytes. Mutations go through
:func:`dataclasses.replace`; :meth:`Manifest.with_trees` recomputes ``ssts`` from the views.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum

from slatelib.core.ranges import BytesRange
from slatelib.errors import CorruptObjectError
from slatelib.ids import Ulid

I64_MIN = -(1 << 63)
# The 13-byte empty sequence tracker a new 0.17 database writes (format §5.6).
EMPTY_SEQUENCE_TRACKER = bytes.fromhex("01" + "00000000" + "00000000" + "00000000")


class CompressionCodec(IntEnum):
    NONE = 0
    SNAPPY = 1
    ZLIB = 2
    LZ4 = 3
    ZSTD = 4


class SstType(IntEnum):
    COMPACTED = 0
    WAL = 1


class FilterFormat(IntEnum):
    LEGACY = 0
    COMPOSITE = 1


@dataclass(frozen=True, slots=True)
class SsTableInfo:
    """Footer metadata of an SST (format §7.3); the manifest holds an authoritative copy."""

    first_entry: bytes | None
    last_entry: bytes | None
    index_offset: int
    index_len: int
    filter_offset: int
    filter_len: int
    compression: CompressionCodec = CompressionCodec.NONE
    sst_type: SstType = SstType.COMPACTED
    stats_offset: int = 0
    stats_len: int = 0
    filter_format: FilterFormat = FilterFormat.COMPOSITE

    @property
    def meta_offset_hint(self) -> int:
        """End of the last region before the info block (stats, else index)."""
        if self.stats_len:
            return self.stats_offset + self.stats_len
        return self.index_offset + self.index_len


@dataclass(frozen=True, slots=True)
class SstHandle:
    """``CompactedSsTableV2``: an SST id, its info, and the SST format version.

    ``format_version`` None means the field was absent, which readers treat as 1.
    """

    id: Ulid
    info: SsTableInfo
    format_version: int | None = 2

    @property
    def effective_format_version(self) -> int:
        return 1 if self.format_version is None else self.format_version


@dataclass(frozen=True, slots=True)
class SstView:
    """``CompactedSsTableView``: a view of an SST, optionally clipped to a key range."""

    id: Ulid
    sst_id: Ulid
    visible_range: BytesRange | None = None

    @staticmethod
    def identity(sst_id: Ulid) -> SstView:
        return SstView(sst_id, sst_id, None)


@dataclass(frozen=True, slots=True)
class SortedRun:
    id: int
    views: tuple[SstView, ...]


@dataclass(frozen=True, slots=True)
class Segment:
    """SlateDB RFC-0024 segment: a per-prefix LSM tree. Carried through untouched by slatelib."""

    prefix: bytes
    last_compacted_l0_sst_view_id: Ulid | None
    l0: tuple[SstView, ...]
    compacted: tuple[SortedRun, ...]


@dataclass(frozen=True, slots=True)
class ExternalDb:
    path: str
    source_checkpoint_id: uuid.UUID
    final_checkpoint_id: uuid.UUID | None
    sst_ids: tuple[Ulid, ...]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint pins ``manifest_id`` against GC until it expires or is deleted.

    ``expire_time_s`` None means never; ``writer_epoch`` is set for WriterCheckpoint
    metadata (design doc 'checkpoints and clones') and None when the checkpoint has no metadata.
    """

    id: uuid.UUID
    manifest_id: int
    expire_time_s: int | None
    create_time_s: int
    writer_epoch: int | None = None
    name: str | None = None

    def is_expired(self, now_s: float) -> bool:
        return self.expire_time_s is not None and self.expire_time_s <= now_s


@dataclass(frozen=True)
class Manifest:
    """One manifest version. ``ssts`` lists every SST referenced by a view, sorted by id."""

    ssts: tuple[SstHandle, ...] = ()
    l0: tuple[SstView, ...] = ()
    compacted: tuple[SortedRun, ...] = ()
    checkpoints: tuple[Checkpoint, ...] = ()
    external_dbs: tuple[ExternalDb, ...] = ()
    initialized: bool = True
    writer_epoch: int = 0
    compactor_epoch: int = 0
    replay_after_wal_id: int = 0
    wal_id_last_seen: int = 0
    last_compacted_l0_sst_view_id: Ulid | None = None
    last_l0_clock_tick: int = I64_MIN
    last_l0_seq: int = 0
    recent_snapshot_min_seq: int = 0
    sequence_tracker: bytes | None = EMPTY_SEQUENCE_TRACKER
    segments: tuple[Segment, ...] | None = ()
    segment_extractor_name: str | None = None
    # Fields that 0.17 never writes but that round-trip when present.
    manifest_id_field: int = 0
    wal_object_store_uri: str | None = None
    # Extension beyond 0.17 (design doc 'checkpoints and clones' soft destroy); None when not
    # destroyed.
    destroyed_at_s: int | None = None
    _sst_map: dict[Ulid, SstHandle] | None = field(
        default=None, init=False, repr=False, compare=False, hash=False
    )

    # ----------------------------------------------------------------- lookups
    @property
    def sst_map(self) -> Mapping[Ulid, SstHandle]:
        m = self._sst_map
        if m is None:
            m = {h.id: h for h in self.ssts}
            object.__setattr__(self, "_sst_map", m)
        return m

    def prime_sst_map(self, sst_map: dict[Ulid, SstHandle]) -> None:
        """Install :attr:`sst_map` computed elsewhere (a decoder builds it anyway).

        ``sst_map`` must be exactly ``{h.id: h for h in self.ssts}`` and not be used after.
        """
        object.__setattr__(self, "_sst_map", sst_map)

    def sst(self, sst_id: Ulid) -> SstHandle:
        try:
            return self.sst_map[sst_id]
        except KeyError:
            raise CorruptObjectError(f"manifest view references unknown SST {sst_id}") from None

    def all_views(self) -> Iterator[SstView]:
        """Every view of the top-level tree and of every segment."""
        yield from self.l0
        for run in self.compacted:
            yield from run.views
        for seg in self.segments or ():
            yield from seg.l0
            for run in seg.compacted:
                yield from run.views

    def referenced_sst_ids(self) -> set[Ulid]:
        return {v.sst_id for v in self.all_views()}

    def external_sst_paths(self) -> dict[Ulid, str]:
        """SST id -> root path of the external database that owns it."""
        out: dict[Ulid, str] = {}
        for ext in self.external_dbs:
            for sid in ext.sst_ids:
                out[sid] = ext.path
        return out

    @property
    def has_segments(self) -> bool:
        return bool(self.segments) or self.segment_extractor_name is not None

    def checkpoint(self, checkpoint_id: uuid.UUID) -> Checkpoint | None:
        for c in self.checkpoints:
            if c.id == checkpoint_id:
                return c
        return None

    # --------------------------------------------------------------- builders
    @staticmethod
    def initial() -> Manifest:
        """The first manifest of a new (non-clone) database, as 0.17 writes it (format §5.8)."""
        return Manifest()

    def with_trees(
        self,
        l0: Iterable[SstView] | None = None,
        compacted: Iterable[SortedRun] | None = None,
        new_ssts: Iterable[SstHandle] = (),
    ) -> Manifest:
        """Replace the top-level tree and recompute ``ssts`` from all views.

        ``new_ssts`` supplies handles of SSTs not yet in this manifest.
        """
        new_l0 = self.l0 if l0 is None else tuple(l0)
        new_runs = self.compacted if compacted is None else tuple(compacted)
        handles: dict[Ulid, SstHandle] = dict(self.sst_map)
        for h in new_ssts:
            handles[h.id] = h
        draft = replace(self, l0=new_l0, compacted=new_runs)
        used = draft.referenced_sst_ids()
        missing = used - handles.keys()
        if missing:
            raise CorruptObjectError(f"views reference SSTs without a handle: {sorted(missing)}")
        ssts = tuple(handles[i] for i in sorted(used))
        return replace(draft, ssts=ssts)
