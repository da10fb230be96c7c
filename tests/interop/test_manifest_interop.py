"""Manifests and compactions files written by slatelib, read by the official 0.17.0 package.

Each test works on a copy of the golden fixtures (``fixture_copy``): it writes our bytes as
the next version (latest + 1) and checks that the official ``Admin`` (and ``DbReader``)
sees exactly the state it saw in the original file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import uuid
from pathlib import Path
from typing import Any

import pytest
from slatedb.uniffi import (
    AdminBuilder,
    DbReaderBuilder,
    ObjectStore,
    ObjectStoreBuilder,
    ObjectStoreType,
)

from slatelib.core.compactions import Compactions
from slatelib.core.manifest import Checkpoint, Manifest, SsTableInfo, SstView
from slatelib.core.ranges import Bound, BoundKind, BytesRange
from slatelib.format.compactions_codec import decode_compactions, encode_compactions
from slatelib.format.manifest_codec import decode_manifest, encode_manifest, encode_manifest_v1
from slatelib.ids import ulid_to_str
from tests.conftest import GOLDEN_DIR, load_expected

pytestmark = pytest.mark.interop

MANIFEST_FIXTURES = ["basic", "ckpt_src", "ckpt_clone", "ckpt_clone_proj", "segmented",
                     "gc_collected", "seq_tracker", "ttl_merge", "codec_zstd", "default_settings"]
V1_FIXTURES = [f for f in MANIFEST_FIXTURES if f != "segmented"]
COMPACTIONS_FIXTURES = [f for f in MANIFEST_FIXTURES if (GOLDEN_DIR / f / "compactions").is_dir()]


# ----------------------------------------------------------------------------- helpers
def _store(root: Path) -> ObjectStore:
    builder = ObjectStoreBuilder.from_env(ObjectStoreType.LOCAL)
    builder.with_config("local_path", str(root))
    return builder.build()


def _read_manifest(root: Path, db: str, manifest_id: int | None = None) -> Any:
    async def run() -> Any:
        return await AdminBuilder(db, _store(root)).build().read_manifest(manifest_id)
    return asyncio.run(run())


def _read_compactions(root: Path, db: str) -> Any:
    async def run() -> Any:
        return await AdminBuilder(db, _store(root)).build().read_compactions(None)
    return asyncio.run(run())


def _plain(x: Any) -> Any:
    """Official records as nested dicts/lists, for equality with readable diffs."""
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, enum.Enum):
        return x.name
    if x is None or isinstance(x, bytes | str | int | float | bool):
        return x
    return {"__type__": type(x).__qualname__, **{k: _plain(v) for k, v in sorted(vars(x).items())}}


def _without(d: Any, *keys: str) -> Any:
    """Drop keys everywhere in a plain structure."""
    if isinstance(d, list):
        return [_without(v, *keys) for v in d]
    if isinstance(d, dict):
        return {k: _without(v, *keys) for k, v in d.items() if k not in keys}
    return d


def _latest(root: Path, db: str, kind: str) -> tuple[int, bytes]:
    f = sorted((root / db / kind).glob(f"*.{kind.rstrip('/')}"))[-1]
    return int(f.name.split(".")[0]), f.read_bytes()


def _write_next(root: Path, db: str, kind: str, data: bytes) -> int:
    latest, _ = _latest(root, db, kind)
    (root / db / kind / f"{latest + 1:020d}.{kind}").write_bytes(data)
    return latest + 1


# --------------------------------------------------- our decoder vs the official reader
def _official_info(i: SsTableInfo) -> dict[str, Any]:
    return {"__type__": "SsTableInfo", "compression_codec": None if i.compression == 0 else
            i.compression.name, "filter_format": i.filter_format.name,
            "filter_len": i.filter_len, "filter_offset": i.filter_offset,
            "first_entry": i.first_entry, "index_len": i.index_len,
            "index_offset": i.index_offset, "last_entry": i.last_entry,
            "sst_type": i.sst_type.name, "stats_len": i.stats_len, "stats_offset": i.stats_offset}


def _official_range(r: BytesRange | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"__type__": "KeyRange", "start": r.start.key, "end": r.end.key,
            "start_inclusive": r.start.kind == BoundKind.INCLUDED,
            "end_inclusive": r.end.kind == BoundKind.INCLUDED}


def _as_official(m: Manifest, manifest_id: int) -> dict[str, Any]:
    """Our decoded manifest in the shape of the official ``VersionedManifest`` (sizes aside)."""
    def view(v: SstView) -> dict[str, Any]:
        h = m.sst(v.sst_id)
        return {"__type__": "SsTableView", "id": ulid_to_str(v.id),
                "sst": {"__type__": "SsTableHandle", "id": {"__type__": "SsTableId",
                        "value": ulid_to_str(h.id)}, "info": _official_info(h.info)},
                "visible_range": _official_range(v.visible_range)}

    def runs(rs: Any) -> list[dict[str, Any]]:
        return [{"__type__": "SortedRun", "id": r.id, "sst_views": [view(v) for v in r.views]}
                for r in rs]

    def opt_ulid(u: int | None) -> str | None:
        return None if u is None else ulid_to_str(u)

    return {
        "__type__": "VersionedManifest", "id": manifest_id,
        "checkpoints": [{"__type__": "Checkpoint", "create_time_secs": c.create_time_s,
                         "expire_time_secs": c.expire_time_s, "id": str(c.id),
                         "manifest_id": c.manifest_id, "name": c.name} for c in m.checkpoints],
        "compacted": runs(m.compacted), "compactor_epoch": m.compactor_epoch,
        "external_dbs": [{"__type__": "ExternalDb", "path": e.path,
                          "source_checkpoint_id": str(e.source_checkpoint_id),
                          "final_checkpoint_id": None if e.final_checkpoint_id is None else
                          str(e.final_checkpoint_id),
                          "sst_ids": [{"__type__": "SsTableId", "value": ulid_to_str(i)}
                                      for i in e.sst_ids]} for e in m.external_dbs],
        "initialized": m.initialized, "l0": [view(v) for v in m.l0],
        "last_compacted_l0_sst_id": None,
        "last_compacted_l0_sst_view_id": opt_ulid(m.last_compacted_l0_sst_view_id),
        "last_l0_clock_tick": m.last_l0_clock_tick, "last_l0_seq": m.last_l0_seq,
        "next_wal_sst_id": m.wal_id_last_seen + 1,
        "recent_snapshot_min_seq": m.recent_snapshot_min_seq,
        "replay_after_wal_id": m.replay_after_wal_id,
        "segments": [{"__type__": "Segment", "prefix": s.prefix,
                      "last_compacted_l0_sst_view_id": opt_ulid(s.last_compacted_l0_sst_view_id),
                      "l0": [view(v) for v in s.l0], "compacted": runs(s.compacted)}
                     for s in sorted(m.segments or (), key=lambda s: s.prefix)],
        "wal_object_store_uri": None, "writer_epoch": m.writer_epoch,
    }


@pytest.mark.parametrize("fixture", MANIFEST_FIXTURES)
def test_slatelib_decoding_agrees_with_the_official_reader(fixture_copy: Path, fixture: str) -> None:
    manifest_id, data = _latest(fixture_copy, fixture, "manifest")
    official = _without(_plain(_read_manifest(fixture_copy, fixture)), "estimated_size_bytes")
    assert official == _as_official(decode_manifest(data), manifest_id)


# ------------------------------------------------------------------- manifests written
@pytest.mark.parametrize("fixture", MANIFEST_FIXTURES)
def test_reencoded_manifest_written_as_next_version_reads_the_same(
        fixture_copy: Path, fixture: str) -> None:
    before = _plain(_read_manifest(fixture_copy, fixture))
    _, data = _latest(fixture_copy, fixture, "manifest")
    encoded = encode_manifest(decode_manifest(data))
    assert encoded == data
    new_id = _write_next(fixture_copy, fixture, "manifest", encoded)
    after = _plain(_read_manifest(fixture_copy, fixture))
    assert after["id"] == new_id
    assert {**after, "id": 0} == {**before, "id": 0}
    assert _plain(_read_manifest(fixture_copy, fixture, new_id)) == after


@pytest.mark.parametrize("fixture", V1_FIXTURES)
def test_v1_manifest_is_read_by_official_as_the_same_state(fixture_copy: Path, fixture: str) -> None:
    before = _plain(_read_manifest(fixture_copy, fixture))
    _, data = _latest(fixture_copy, fixture, "manifest")
    v1 = encode_manifest_v1(dataclasses.replace(decode_manifest(data), segments=()))
    assert v1[:2] == b"\x00\x01"
    new_id = _write_next(fixture_copy, fixture, "manifest", v1)
    after = _plain(_read_manifest(fixture_copy, fixture))
    # 0.17.0 reads V1's l0_last_compacted into both the view id and the V1-only SST id field
    expected = {**before, "id": new_id,
                "last_compacted_l0_sst_id": before["last_compacted_l0_sst_view_id"]}
    assert after == expected


def test_visible_ranges_of_every_allowed_bound_kind_are_read_by_official(
        fixture_copy: Path) -> None:
    db = "ckpt_clone_proj"
    _, data = _latest(fixture_copy, db, "manifest")
    m = decode_manifest(data)
    ranges = [
        BytesRange(Bound.unbounded(), Bound.excluded(b"key:0040")),
        BytesRange(Bound.included(b"key:0010"), Bound.unbounded()),
        BytesRange(Bound.included(b"key:0010"), Bound.included(b"key:0040")),
    ]
    m = dataclasses.replace(m, l0=tuple(dataclasses.replace(v, visible_range=r)
                                        for v, r in zip(m.l0, ranges, strict=True)))
    new_id = _write_next(fixture_copy, db, "manifest", encode_manifest(m))
    official = _without(_plain(_read_manifest(fixture_copy, db)), "estimated_size_bytes")
    assert official == _as_official(m, new_id)


# ---------------------------------------------------- extensions 0.17.0 must ignore
def _with_extensions(m: Manifest, next_id: int) -> Manifest:
    writer = Checkpoint(uuid.UUID(int=0x1234), next_id, None, 1_700_000_000, writer_epoch=9,
                        name="writer")
    return dataclasses.replace(m, destroyed_at_s=1_800_000_000,
                               checkpoints=m.checkpoints + (writer,))


def test_destroyed_at_slot_and_writer_metadata_are_ignored_by_official_admin(
        fixture_copy: Path) -> None:
    db = "ckpt_clone"
    latest, data = _latest(fixture_copy, db, "manifest")
    m = _with_extensions(decode_manifest(data), latest + 1)
    new_id = _write_next(fixture_copy, db, "manifest", encode_manifest(m))
    official = _without(_plain(_read_manifest(fixture_copy, db)), "estimated_size_bytes")
    assert official == _as_official(m, new_id)
    assert official["checkpoints"][-1]["name"] == "writer"


def test_destroyed_at_slot_is_ignored_by_official_db_reader(fixture_copy: Path) -> None:
    db = "basic"
    latest, data = _latest(fixture_copy, db, "manifest")
    _write_next(fixture_copy, db, "manifest",
                encode_manifest(_with_extensions(decode_manifest(data), latest + 1)))
    expected = load_expected(db)

    async def read_all() -> dict[str, bytes | None]:
        reader = await DbReaderBuilder(db, _store(fixture_copy)).build()
        try:
            keys = [*expected["live"], *expected["deleted"]]
            return {k: await reader.get(k.encode()) for k in keys}
        finally:
            await reader.shutdown()

    values = asyncio.run(read_all())
    assert {k: v.decode() for k, v in values.items() if v is not None} == expected["live"]
    assert all(values[k] is None for k in expected["deleted"])


# --------------------------------------------------------------- compactions written
@pytest.mark.parametrize("fixture", COMPACTIONS_FIXTURES)
def test_reencoded_compactions_file_written_as_next_version_reads_the_same(
        fixture_copy: Path, fixture: str) -> None:
    before = _plain(_read_compactions(fixture_copy, fixture))
    _, data = _latest(fixture_copy, fixture, "compactions")
    encoded = encode_compactions(decode_compactions(data))
    assert encoded == data
    new_id = _write_next(fixture_copy, fixture, "compactions", encoded)
    after = _plain(_read_compactions(fixture_copy, fixture))
    assert after["id"] == new_id
    assert {**after, "id": 0} == {**before, "id": 0}


@pytest.mark.parametrize("fixture", ["basic", "codec_snappy", "ttl_merge"])
def test_version_1_compactions_file_is_read_by_official_as_the_same_state(
        fixture_copy: Path, fixture: str) -> None:
    before = _plain(_read_compactions(fixture_copy, fixture))
    _, data = _latest(fixture_copy, fixture, "compactions")
    c: Compactions = dataclasses.replace(decode_compactions(data), format_version=1)
    new_id = _write_next(fixture_copy, fixture, "compactions", encode_compactions(c))
    after = _plain(_read_compactions(fixture_copy, fixture))
    assert after == {**before, "id": new_id}
