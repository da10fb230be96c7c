"""Manifest codec (format §5): golden bytes, V1, round trips, destroyed_at_s, corruption."""

from __future__ import annotations

import dataclasses
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelib.core.manifest import Checkpoint, Manifest, Segment, SstView
from slatelib.core.ranges import Bound, BytesRange
from slatelib.errors import (
    CorruptObjectError,
    DataError,
    InvalidArgumentError,
    UnsupportedFormatVersionError,
)
from slatelib.format import manifest_codec, shared_tables
from slatelib.format.flatbuf import Buffer, Table
from slatelib.format.manifest_codec import (
    MANIFEST_FORMAT_VERSION,
    decode_manifest,
    encode_manifest,
    encode_manifest_v1,
)
from tests.conftest import FIXTURE_NAMES

from ._strategies import manifests

SPEC_5_8_FIRST_MANIFEST = bytes.fromhex(  # verbatim from format §5.8
    "0002 3000 0000 0000 0000 0000 2600 2800 0000 0000 0700 0000 0000 0000 0000 0000"
    "0800 0c00 1000 2000 1400 0000 0000 1800 1c00 2600 0000 0000 0001 4400 0000 3c00"
    "0000 3400 0000 2800 0000 1000 0000 2400 0000 0000 0000 0000 0080 0d00 0000 0100"
    "0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000"
    "0000"
)


def _latest(fixtures_dir: Path, fixture: str) -> bytes:
    return sorted((fixtures_dir / fixture / "manifest").iterdir())[-1].read_bytes()


def _root(data: bytes) -> Table:
    return Buffer(data, start=2).root()


# ------------------------------------------------------------------------------ golden
@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_every_official_manifest_reencodes_byte_identically(fixtures_dir: Path, fixture: str) -> None:
    files = sorted((fixtures_dir / fixture / "manifest").iterdir())
    assert files
    for f in files:
        data = f.read_bytes()
        assert encode_manifest(decode_manifest(data, path=str(f))) == data, f


def test_spec_5_8_first_manifest_is_the_initial_manifest(fixtures_dir: Path) -> None:
    assert len(SPEC_5_8_FIRST_MANIFEST) == 130
    assert encode_manifest(Manifest.initial()) == SPEC_5_8_FIRST_MANIFEST
    assert decode_manifest(SPEC_5_8_FIRST_MANIFEST) == Manifest.initial()
    assert (fixtures_dir / "basic" / "manifest" / "00000000000000000001.manifest").read_bytes() \
        == SPEC_5_8_FIRST_MANIFEST


def test_official_manifests_decode_to_the_documented_shapes(fixtures_dir: Path) -> None:
    clone = decode_manifest(_latest(fixtures_dir, "ckpt_clone"))
    assert clone.external_dbs and clone.external_dbs[0].path == "ckpt_src"
    assert clone.external_dbs[0].final_checkpoint_id is not None
    proj = decode_manifest(_latest(fixtures_dir, "ckpt_clone_proj"))
    assert {v.visible_range for v in proj.l0} == {BytesRange.half_open(b"key:0010", b"key:0040")}
    seg = decode_manifest(_latest(fixtures_dir, "segmented"))
    assert seg.segment_extractor_name == "fixed4" and not seg.l0 and not seg.compacted
    assert [s.prefix for s in seg.segments or ()] == [b"inv:", b"ord:", b"usr:"]
    src = decode_manifest(_latest(fixtures_dir, "ckpt_src"))
    assert {"fixture-ckpt", "fixture-ckpt-flushed"} <= {c.name for c in src.checkpoints}
    for m in (clone, proj, seg, src):
        assert all(h.format_version == 2 for h in m.ssts)
        assert [h.id for h in m.ssts] == sorted(h.id for h in m.ssts)


# ----------------------------------------------------------------------- round trips
@settings(max_examples=150, deadline=None)
@given(manifests())
def test_random_manifest_round_trips_through_v2(m: Manifest) -> None:
    data = encode_manifest(m)
    assert data[:2] == b"\x00\x02"
    assert decode_manifest(data) == m


@settings(max_examples=100, deadline=None)
@given(manifests(v1=True))
def test_random_v1_expressible_manifest_round_trips_through_v1(m: Manifest) -> None:
    data = encode_manifest_v1(m)
    assert data[:2] == b"\x00\x01"
    assert decode_manifest(data) == m


@pytest.mark.parametrize("fixture", ["basic", "ckpt_clone", "ckpt_clone_proj", "ttl_merge"])
def test_v1_conversion_keeps_views_ranges_and_last_compacted(fixtures_dir: Path, fixture: str) -> None:
    m = dataclasses.replace(decode_manifest(_latest(fixtures_dir, fixture)),
                            wal_object_store_uri="s3://wal-bucket/db", segments=())
    v1 = decode_manifest(encode_manifest_v1(m))
    assert v1 == m
    assert all(v.id == v.sst_id for v in v1.all_views())
    # V2 has no slot for the WAL store URI: encoding V2 drops it, as 0.17.0 does
    assert decode_manifest(encode_manifest(v1)).wal_object_store_uri is None


def test_v1_l0_last_compacted_becomes_the_view_id(fixtures_dir: Path) -> None:
    m = dataclasses.replace(decode_manifest(_latest(fixtures_dir, "basic")), segments=())
    assert m.last_compacted_l0_sst_view_id is not None
    root = _root(encode_manifest_v1(m))
    last = root.table(7)
    assert last is not None and (last.u64(0) << 64 | last.u64(1)) == m.last_compacted_l0_sst_view_id


def _with_segments(m: Manifest) -> Manifest:
    return dataclasses.replace(m, segments=(Segment(b"p", None, (), ()),))


@pytest.mark.parametrize("change", [
    _with_segments,
    lambda m: dataclasses.replace(m, segment_extractor_name="fixed4"),
    lambda m: dataclasses.replace(m, destroyed_at_s=1),
    lambda m: dataclasses.replace(m, l0=(SstView(7, m.ssts[0].id),) + m.l0),
    lambda m: dataclasses.replace(m, ssts=m.ssts + m.ssts[:1]),
])
def test_v1_encoder_rejects_what_v1_cannot_express(fixtures_dir: Path, change: object) -> None:
    m = dataclasses.replace(decode_manifest(_latest(fixtures_dir, "basic")), segments=())
    encode_manifest_v1(m)
    with pytest.raises(InvalidArgumentError):
        encode_manifest_v1(change(m))  # type: ignore[operator]


# -------------------------------------------------------------------- destroyed_at_s
def test_destroyed_at_s_is_stored_in_slot_18_only_when_set(fixtures_dir: Path) -> None:
    original = _latest(fixtures_dir, "basic")
    m = decode_manifest(original)
    assert m.destroyed_at_s is None and not _root(original).has(18)
    for value in (0, 1_800_000_000, 2**64 - 1):
        data = encode_manifest(dataclasses.replace(m, destroyed_at_s=value))
        assert _root(data).opt_u64(18) == value
        assert decode_manifest(data).destroyed_at_s == value
    assert encode_manifest(dataclasses.replace(m, destroyed_at_s=None)) == original


# --------------------------------------------------------------------- checkpoints
def test_writer_checkpoint_metadata_round_trips() -> None:
    cps = (
        Checkpoint(uuid.UUID(int=1), 3, None, 10, writer_epoch=0),
        Checkpoint(uuid.UUID(int=2), 4, 99, 10, writer_epoch=2**64 - 1, name="w"),
        Checkpoint(uuid.UUID(int=3), 5, None, 0),
    )
    m = Manifest(checkpoints=cps)
    assert decode_manifest(encode_manifest(m)).checkpoints == cps


def _checkpoint_table(data: bytes) -> Table:
    return _root(data).req_tables(12, "checkpoints")[0]


def test_unknown_checkpoint_metadata_type_raises_corrupt() -> None:
    data = bytearray(encode_manifest(Manifest(checkpoints=(
        Checkpoint(uuid.UUID(int=1), 3, None, 10, writer_epoch=5),))))
    data[_checkpoint_table(bytes(data)).field_pos(4, 1)] = 2
    with pytest.raises(CorruptObjectError, match="metadata type"):
        decode_manifest(bytes(data))


def test_writer_checkpoint_type_without_value_raises_corrupt() -> None:
    data = bytearray(encode_manifest(Manifest(checkpoints=(
        Checkpoint(uuid.UUID(int=1), 3, None, 10, writer_epoch=5),))))
    t = _checkpoint_table(bytes(data))
    struct.pack_into("<H", data, t._vt + 4 + 2 * 5, 0)
    with pytest.raises(CorruptObjectError, match="without a value"):
        decode_manifest(bytes(data))


# ---------------------------------------------------------------------- validation
def _proj_manifest() -> Manifest:
    from tests.conftest import GOLDEN_DIR

    return decode_manifest(_latest(GOLDEN_DIR, "ckpt_clone_proj"))


def _first_view(m: Manifest, **changes: object) -> Manifest:
    return dataclasses.replace(m, l0=(dataclasses.replace(m.l0[0], **changes),) + m.l0[1:])


def _first_sst_info(m: Manifest, **changes: object) -> Manifest:
    h = m.sst(m.l0[0].sst_id)
    new = dataclasses.replace(h, info=dataclasses.replace(h.info, **changes))
    return dataclasses.replace(m, ssts=tuple(new if x.id == h.id else x for x in m.ssts))


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: _first_view(m, sst_id=12345), "unknown SST"),  # (V1 cannot express this)
    (lambda m: _first_view(m, visible_range=BytesRange(
        Bound.excluded(b"key:0010"), Bound.unbounded())), "excluded start"),
    (lambda m: _first_view(m, visible_range=BytesRange.half_open(b"zzz", None)),
     "does not overlap"),
    (lambda m: _first_sst_info(m, first_entry=None), "no first_entry"),
    (lambda m: _first_sst_info(m, first_entry=b"z", last_entry=b"a"), "after last_entry"),
])
def test_view_that_0_17_refuses_is_rejected_by_encode_and_decode(
        monkeypatch: pytest.MonkeyPatch, change: object, message: str) -> None:
    """0.17.0 panics on these views (db_state.rs SsTableView::new_projected)."""
    broken = change(_proj_manifest())  # type: ignore[operator]
    with pytest.raises(InvalidArgumentError, match=message):
        encode_manifest(broken)
    monkeypatch.setattr(manifest_codec, "_check_views", lambda m: None)
    data = encode_manifest(broken)
    with pytest.raises(CorruptObjectError, match=message) as info:
        decode_manifest(data, path="db/manifest/00000000000000000003.manifest")
    assert info.value.path == "db/manifest/00000000000000000003.manifest"
    if message != "unknown SST":
        with pytest.raises(CorruptObjectError, match=message):
            decode_manifest(encode_manifest_v1(broken))


@pytest.mark.parametrize("r", [
    BytesRange(Bound.included(b"b"), Bound.included(b"a")),
    BytesRange(Bound.included(b"a"), Bound.excluded(b"a")),
    BytesRange(Bound.excluded(b"a"), Bound.excluded(b"a")),
])
def test_empty_visible_range_is_rejected_by_encode_and_decode(
        monkeypatch: pytest.MonkeyPatch, r: BytesRange) -> None:
    broken = _first_view(_proj_manifest(), visible_range=r)
    with pytest.raises(InvalidArgumentError, match="empty"):
        encode_manifest(broken)
    with monkeypatch.context() as mp:
        mp.setattr(manifest_codec, "_check_views", lambda m: None)
        mp.setattr(shared_tables, "range_non_empty", lambda r: True)
        data = encode_manifest(broken)
    with pytest.raises(CorruptObjectError, match="empty"):
        decode_manifest(data)


@pytest.mark.parametrize(("which", "new_type"), [
    ("start", 1),  # Unbounded, but the key is present
    ("start", 0),  # Unknown
    ("end", 7),  # not an enum value
    ("unbounded", 2),  # Included without a key
])
def test_bound_contradicting_its_type_raises_corrupt(fixtures_dir: Path, which: str,
                                                     new_type: int) -> None:
    m = decode_manifest(_latest(fixtures_dir, "ckpt_clone_proj"))
    if which == "unbounded":
        r = BytesRange.half_open(None, b"z")
        m = dataclasses.replace(m, l0=(dataclasses.replace(m.l0[0], visible_range=r),) + m.l0[1:])
    data = bytearray(encode_manifest(m))
    rng = _root(bytes(data)).req_tables(9, "l0")[0].req_table(2, "visible_range")
    bound = rng.req_table(1 if which == "end" else 0, which)
    data[bound.field_pos(1, 1)] = new_type
    with pytest.raises(CorruptObjectError, match="bound"):
        decode_manifest(bytes(data))


@pytest.mark.parametrize(("slot", "name"), [(8, "ssts"), (9, "l0"), (10, "compacted"),
                                            (12, "checkpoints")])
def test_missing_required_vector_raises_corrupt(slot: int, name: str) -> None:
    data = bytearray(SPEC_5_8_FIRST_MANIFEST)
    struct.pack_into("<H", data, _root(SPEC_5_8_FIRST_MANIFEST)._vt + 4 + 2 * slot, 0)
    with pytest.raises(CorruptObjectError, match=name):
        decode_manifest(bytes(data))


@pytest.mark.parametrize("change", [
    {"writer_epoch": -1},
    {"compactor_epoch": 2**64},
    {"last_l0_clock_tick": 2**63},
    {"destroyed_at_s": -1},
    {"checkpoints": (Checkpoint(uuid.UUID(int=1), 1, 0, 0),)},  # expiry 0 means "never"
    {"checkpoints": (Checkpoint(uuid.UUID(int=1), 1, None, 2**32),)},
])
def test_encode_rejects_out_of_range_values(change: dict[str, object]) -> None:
    with pytest.raises(InvalidArgumentError):
        encode_manifest(dataclasses.replace(Manifest.initial(), **change))  # type: ignore[arg-type]


# ---------------------------------------------------------------------- corruption
@pytest.mark.parametrize("version", [0, 3, 0x0200, 0xFFFF])
def test_unknown_version_raises_unsupported_format_version(version: int) -> None:
    data = struct.pack(">H", version) + SPEC_5_8_FIRST_MANIFEST[2:]
    with pytest.raises(UnsupportedFormatVersionError, match=str(version)):
        decode_manifest(data)


@pytest.mark.parametrize("data", [b"", b"\x00"])
def test_buffer_shorter_than_two_bytes_raises_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptObjectError):
        decode_manifest(data, path="m")


@pytest.mark.parametrize("fixture", ["basic", "ckpt_clone", "ckpt_clone_proj", "segmented",
                                     "ckpt_src", "seq_tracker"])
def test_every_truncation_of_a_real_manifest_raises_corrupt(fixtures_dir: Path, fixture: str) -> None:
    data = _latest(fixtures_dir, fixture)
    variants = [data]
    if fixture != "segmented":
        variants.append(encode_manifest_v1(dataclasses.replace(decode_manifest(data), segments=())))
    for full in variants:
        for n in range(len(full)):
            with pytest.raises(CorruptObjectError):
                decode_manifest(full[:n], path="m")


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["basic", "ckpt_clone", "ckpt_clone_proj", "segmented", "ckpt_src"]),
       st.data())
def test_flipped_byte_decodes_or_raises_data_error(fixture: str, data: st.DataObject) -> None:
    from tests.conftest import GOLDEN_DIR

    raw = bytearray(_latest(GOLDEN_DIR, fixture))
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] ^= data.draw(st.integers(1, 255))
    try:
        m = decode_manifest(bytes(raw))
    except DataError:
        return
    assert isinstance(m, Manifest)
    encode_manifest(m) if m.sequence_tracker is not None else None


def test_format_version_constant_is_2() -> None:
    assert MANIFEST_FORMAT_VERSION == 2
