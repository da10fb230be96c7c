"""JSON renderings of manifests, SSTs and rows for the CLI. Pure.

Times keep their epoch field (``create_time_s``) and gain an ISO 8601 twin
(``create_time``); tables show only the ISO one."""

from __future__ import annotations

from typing import Any

from slatelib.cli.output import iso_s
from slatelib.core.manifest import (
    Checkpoint,
    ExternalDb,
    Manifest,
    SortedRun,
    SsTableInfo,
    SstView,
)
from slatelib.core.ranges import BoundKind, BytesRange
from slatelib.core.row import KIND_NAMES, Row
from slatelib.ids import ulid_to_str


def hexb(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def render_range(r: BytesRange | None) -> dict[str, Any] | None:
    if r is None:
        return None

    def bound(kind: BoundKind, key: bytes | None) -> dict[str, Any]:
        return {"type": kind.name.lower(), "key": hexb(key)}

    return {"start": bound(r.start.kind, r.start.key), "end": bound(r.end.kind, r.end.key)}


def render_info(info: SsTableInfo, *, wal: bool = False) -> dict[str, Any]:
    first: Any = hexb(info.first_entry)
    if wal and info.first_entry is not None and len(info.first_entry) == 8:
        first = {"first_seq": int.from_bytes(info.first_entry, "big")}
    return {
        "first_entry": first,
        "last_entry": hexb(info.last_entry),
        "index_offset": info.index_offset,
        "index_len": info.index_len,
        "filter_offset": info.filter_offset,
        "filter_len": info.filter_len,
        "compression": info.compression.name.lower(),
        "sst_type": info.sst_type.name.lower(),
        "stats_offset": info.stats_offset,
        "stats_len": info.stats_len,
        "filter_format": info.filter_format.name.lower(),
    }


def render_view(v: SstView) -> dict[str, Any]:
    out: dict[str, Any] = {"view_id": ulid_to_str(v.id), "sst_id": ulid_to_str(v.sst_id)}
    if v.visible_range is not None:
        out["visible_range"] = render_range(v.visible_range)
    return out


def render_run(run: SortedRun) -> dict[str, Any]:
    return {"id": run.id, "views": [render_view(v) for v in run.views]}


def render_checkpoint(c: Checkpoint) -> dict[str, Any]:
    return {
        "id": str(c.id),
        "name": c.name,
        "manifest_id": c.manifest_id,
        "create_time_s": c.create_time_s,
        "expire_time_s": c.expire_time_s,
        "create_time": iso_s(c.create_time_s),
        "expire_time": iso_s(c.expire_time_s),
        "writer_epoch": c.writer_epoch,
    }


def render_external(e: ExternalDb) -> dict[str, Any]:
    return {
        "path": e.path,
        "source_checkpoint_id": str(e.source_checkpoint_id),
        "final_checkpoint_id": None if e.final_checkpoint_id is None else str(e.final_checkpoint_id),
        "sst_ids": [ulid_to_str(i) for i in e.sst_ids],
    }


def render_manifest(m: Manifest, manifest_id: int) -> dict[str, Any]:
    return {
        "id": manifest_id,
        "initialized": m.initialized,
        "writer_epoch": m.writer_epoch,
        "compactor_epoch": m.compactor_epoch,
        "replay_after_wal_id": m.replay_after_wal_id,
        "wal_id_last_seen": m.wal_id_last_seen,
        "last_compacted_l0_sst_view_id": (
            None if m.last_compacted_l0_sst_view_id is None
            else ulid_to_str(m.last_compacted_l0_sst_view_id)
        ),
        "last_l0_seq": m.last_l0_seq,
        "last_l0_clock_tick": m.last_l0_clock_tick,
        "recent_snapshot_min_seq": m.recent_snapshot_min_seq,
        "destroyed_at_s": m.destroyed_at_s,
        "destroyed_at": iso_s(m.destroyed_at_s),
        "l0": [render_view(v) for v in m.l0],
        "compacted": [render_run(r) for r in m.compacted],
        "ssts": [
            {"id": ulid_to_str(h.id), "format_version": h.format_version,
             "info": render_info(h.info)}
            for h in m.ssts
        ],
        "checkpoints": [render_checkpoint(c) for c in m.checkpoints],
        "external_dbs": [render_external(e) for e in m.external_dbs],
        "segments": None if m.segments is None else [
            {"prefix": hexb(s.prefix), "l0": [render_view(v) for v in s.l0],
             "compacted": [render_run(r) for r in s.compacted]}
            for s in m.segments
        ],
        "segment_extractor_name": m.segment_extractor_name,
        "sequence_tracker_bytes": None if m.sequence_tracker is None else len(m.sequence_tracker),
    }


def render_row(row: Row) -> dict[str, Any]:
    key, seq, kind, value, expire_ts, create_ts = row
    return {
        "key": key.hex(),
        "seq": seq,
        "kind": KIND_NAMES.get(kind, str(kind)),
        "value": None if kind == 1 else value.hex(),
        "expire_ts": expire_ts,
        "create_ts": create_ts,
    }


def manifest_summary(m: Manifest, manifest_id: int) -> dict[str, Any]:
    """A short summary: counts and sizes of the tree, for ``make run`` and logs."""
    return {
        "manifest_id": manifest_id,
        "writer_epoch": m.writer_epoch,
        "compactor_epoch": m.compactor_epoch,
        "l0_views": len(m.l0),
        "sorted_runs": [
            {"id": r.id, "ssts": len(r.views)} for r in m.compacted
        ],
        "ssts": len(m.ssts),
        "last_l0_seq": m.last_l0_seq,
        "replay_after_wal_id": m.replay_after_wal_id,
        "wal_id_last_seen": m.wal_id_last_seen,
        "checkpoints": len(m.checkpoints),
        "external_dbs": len(m.external_dbs),
    }
