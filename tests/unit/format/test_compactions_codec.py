"""Compactions file codec (format §6): golden files, version 1, round trips, corruption."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelib.core.compactions import (
    COMPACTIONS_FORMAT_VERSION,
    CompactedSsTable,
    Compaction,
    Compactions,
    CompactionStatus,
    DrainSegmentSpec,
    Subcompaction,
    TieredCompactionContext,
    TieredCompactionSpec,
)
from slatelib.core.manifest import SsTableInfo
from slatelib.core.ranges import BytesRange
from slatelib.errors import (
    CorruptObjectError,
    DataError,
    InvalidArgumentError,
    UnsupportedFormatVersionError,
)
from slatelib.format.compactions_codec import decode_compactions, encode_compactions
from slatelib.format.flatbuf import Buffer, Table
from slatelib.ids import Ulid
from tests.conftest import FIXTURE_NAMES, GOLDEN_DIR

from ._strategies import compactions_files

WITH_COMPACTIONS = [n for n in FIXTURE_NAMES if (GOLDEN_DIR / n / "compactions").is_dir()]


def _files(fixtures_dir: Path, fixture: str) -> list[Path]:
    return sorted((fixtures_dir / fixture / "compactions").iterdir())


def _first_compaction(data: bytes) -> Table:
    return Buffer(data, start=2).root().req_tables(1, "recent_compactions")[0]


def _sample() -> Compactions:
    spec = TieredCompactionSpec(l0_view_ids=(Ulid(5), Ulid(4)), sorted_runs=(3, 1, 7),
                                destination=1)
    ctx = TieredCompactionContext(retention_min_seq=9)
    return Compactions(3, (Compaction(Ulid(77), spec, CompactionStatus.RUNNING, ctx=ctx),))


# ------------------------------------------------------------------------------ golden
@pytest.mark.parametrize("fixture", WITH_COMPACTIONS)
def test_every_official_compactions_file_reencodes_byte_identically(
        fixtures_dir: Path, fixture: str) -> None:
    for f in _files(fixtures_dir, fixture):
        data = f.read_bytes()
        c = decode_compactions(data, path=str(f))
        assert c.format_version == COMPACTIONS_FORMAT_VERSION == 2
        assert encode_compactions(c) == data, f


def test_golden_files_cover_the_observed_lifecycle(fixtures_dir: Path) -> None:
    statuses = set()
    for fixture in WITH_COMPACTIONS:
        for f in _files(fixtures_dir, fixture):
            for c in decode_compactions(f.read_bytes()).recent_compactions:
                statuses.add(c.status)
                if c.status in (CompactionStatus.COMPACTED, CompactionStatus.COMPLETED):
                    assert c.output_ssts and all(o.format_version == 2 for o in c.output_ssts)
                    assert all(o.visible_range is None for o in c.output_ssts)
                assert (c.worker is not None) == (c.status in (
                    CompactionStatus.RUNNING, CompactionStatus.COMPACTED,
                    CompactionStatus.COMPLETED))
    assert statuses == {CompactionStatus.SUBMITTED, CompactionStatus.SCHEDULED,
                        CompactionStatus.RUNNING, CompactionStatus.COMPACTED,
                        CompactionStatus.COMPLETED}


# ----------------------------------------------------------------------- round trips
@settings(max_examples=200, deadline=None)
@given(compactions_files)
def test_random_compactions_round_trip(c: Compactions) -> None:
    assert decode_compactions(encode_compactions(c)) == c


def test_version_1_file_infers_destination_and_re_encodes_identically() -> None:
    v1 = dataclasses.replace(_sample(), format_version=1)
    data = encode_compactions(v1)
    assert data[:2] == b"\x00\x01"
    spec_table = _first_compaction(data).req_table(2, "spec")
    assert not spec_table.has(4)  # destination is not stored in version 1
    decoded = decode_compactions(data)
    assert decoded == v1
    assert isinstance(decoded.recent_compactions[0].spec, TieredCompactionSpec)
    assert decoded.recent_compactions[0].spec.destination == 1  # smallest input run
    assert encode_compactions(decoded) == data


def test_version_1_destination_is_zero_without_input_runs() -> None:
    c = Compactions(1, (Compaction(Ulid(1), TieredCompactionSpec(l0_view_ids=(Ulid(2),))),),
                    format_version=1)
    spec = decode_compactions(encode_compactions(c)).recent_compactions[0].spec
    assert isinstance(spec, TieredCompactionSpec) and spec.destination == 0


def test_version_1_ignores_a_stored_destination_like_0_17() -> None:
    data = bytearray(encode_compactions(_sample()))  # version 2, destination 1 stored
    data[:2] = b"\x00\x01"
    struct.pack_into("<I", data, _first_compaction(bytes(data)).req_table(2, "spec")
                     .field_pos(4, 4), 6)
    spec = decode_compactions(bytes(data)).recent_compactions[0].spec
    assert isinstance(spec, TieredCompactionSpec) and spec.destination == 1


def test_version_1_cannot_express_a_destination_other_than_the_inferred_one() -> None:
    c = Compaction(Ulid(1), TieredCompactionSpec(sorted_runs=(4,), destination=9))
    with pytest.raises(InvalidArgumentError, match="destination"):
        encode_compactions(Compactions(1, (c,), format_version=1))


def test_upgrading_a_version_1_value_writes_version_2_with_explicit_destination() -> None:
    v1 = decode_compactions(encode_compactions(dataclasses.replace(_sample(), format_version=1)))
    data = encode_compactions(dataclasses.replace(v1, format_version=2))
    assert data[:2] == b"\x00\x02"
    assert _first_compaction(data).req_table(2, "spec").u32(4) == 1


def test_active_compactions_keep_their_output_ssts_in_the_model(fixtures_dir: Path) -> None:
    data = _files(fixtures_dir, "basic")[-1].read_bytes()
    done = decode_compactions(data).recent_compactions[0]
    running = dataclasses.replace(done, status=CompactionStatus.RUNNING)
    again = decode_compactions(encode_compactions(Compactions(2, (running,))))
    assert again.recent_compactions[0].output_ssts == done.output_ssts


def test_subcompaction_context_round_trips_with_outputs_and_ranges() -> None:
    out = CompactedSsTable(Ulid(3), SsTableInfo(b"a", b"z", 10, 20, 10, 0))
    subs = (Subcompaction(BytesRange.half_open(b"a", None), (out,)),
            Subcompaction(BytesRange.half_open(None, b"a")))
    c = Compactions(1, (Compaction(Ulid(9), TieredCompactionSpec(), CompactionStatus.RUNNING,
                                   ctx=TieredCompactionContext(subs, 4)),))
    assert decode_compactions(encode_compactions(c)) == c


def test_ranges_follow_0_17_emptiness_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.core.ranges import Bound
    from slatelib.format import shared_tables

    def with_range(r: BytesRange) -> Compactions:
        ctx = TieredCompactionContext((Subcompaction(r),), 0)
        return Compactions(0, (Compaction(Ulid(1), TieredCompactionSpec(), ctx=ctx),))

    # (a, a\x00) holds no key, but 0.17.0 only compares the keys: it accepts the range
    odd = with_range(BytesRange(Bound.excluded(b"a"), Bound.excluded(b"a\x00")))
    assert decode_compactions(encode_compactions(odd)) == odd
    empty = with_range(BytesRange(Bound.excluded(b"a"), Bound.included(b"a")))
    with pytest.raises(InvalidArgumentError, match="empty"):
        encode_compactions(empty)
    with monkeypatch.context() as mp:
        mp.setattr(shared_tables, "range_non_empty", lambda r: True)
        data = encode_compactions(empty)
    with pytest.raises(CorruptObjectError, match="empty key range"):
        decode_compactions(data)


# ---------------------------------------------------------------------- corruption
@pytest.mark.parametrize(("slot", "value", "match"), [
    (3, 9, "status"),
    (1, 0, "spec type"),
    (1, 3, "spec type"),
    (6, 2, "context type"),
])
def test_unknown_union_or_enum_value_raises_corrupt(slot: int, value: int, match: str) -> None:
    data = bytearray(encode_compactions(_sample()))
    data[_first_compaction(bytes(data)).field_pos(slot, 1)] = value
    with pytest.raises(CorruptObjectError, match=match):
        decode_compactions(bytes(data), path="c")


def test_drain_segment_spec_is_read_in_version_1_files_like_0_17() -> None:
    c = Compactions(0, (Compaction(Ulid(1), DrainSegmentSpec(b"p", (Ulid(2),), (3,))),))
    data = bytearray(encode_compactions(c))
    data[:2] = b"\x00\x01"
    v1 = decode_compactions(bytes(data))
    assert v1 == dataclasses.replace(c, format_version=1)
    assert encode_compactions(v1) == bytes(data)


@pytest.mark.parametrize("version", [0, 3, 0xFFFF])
def test_unknown_version_raises_unsupported_format_version(version: int) -> None:
    data = struct.pack(">H", version) + encode_compactions(_sample())[2:]
    with pytest.raises(UnsupportedFormatVersionError):
        decode_compactions(data)


@pytest.mark.parametrize("data", [b"", b"\x00"])
def test_buffer_shorter_than_two_bytes_raises_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptObjectError):
        decode_compactions(data)


def test_every_truncation_of_a_real_compactions_file_raises_corrupt(fixtures_dir: Path) -> None:
    data = _files(fixtures_dir, "basic")[-1].read_bytes()
    for n in range(len(data)):
        with pytest.raises(CorruptObjectError):
            decode_compactions(data[:n])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(WITH_COMPACTIONS), st.data())
def test_flipped_byte_decodes_or_raises_data_error(fixture: str, data: st.DataObject) -> None:
    raw = bytearray(_files(GOLDEN_DIR, fixture)[-1].read_bytes())
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] ^= data.draw(st.integers(1, 255))
    try:
        decode_compactions(bytes(raw))
    except DataError:
        pass


def test_encode_rejects_out_of_range_values() -> None:
    with pytest.raises(InvalidArgumentError):
        encode_compactions(Compactions(compactor_epoch=-1))
    with pytest.raises(InvalidArgumentError):
        encode_compactions(Compactions(format_version=3))
    bad = Compaction(Ulid(1), TieredCompactionSpec(sorted_runs=(2**32,)))
    with pytest.raises(InvalidArgumentError):
        encode_compactions(Compactions(0, (bad,)))
    no_segment = Compaction(Ulid(1), DrainSegmentSpec(None))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="needs a segment"):
        encode_compactions(Compactions(0, (no_segment,)))
