"""Sequence tracker blob (format §5.6): golden trackers, Gorilla codes, sampling rule."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slatelib.core.manifest import EMPTY_SEQUENCE_TRACKER
from slatelib.errors import CorruptObjectError, DataError, InvalidArgumentError
from slatelib.format.manifest_codec import decode_manifest
from slatelib.format.seq_tracker import (
    EMPTY_SEQ_TRACKER,
    SEQ_TRACKER_CAPACITY,
    decode_seq_tracker,
    encode_seq_tracker,
    track,
    track_all,
)
from tests.conftest import FIXTURE_NAMES

# format §5.6: the seq_tracker fixture's 4 pairs
SPEC_EXAMPLE = bytes.fromhex(
    "01" "04000000"
    "00000004" "00000000" "00000001" "80c964a0"
    "00000004" "00000000" "6b024fcd" "9e80"
)
SPEC_PAIRS = [(1, 1795313613), (2, 1795313674), (40, 1795313735), (115, 1795313796)]


def test_every_official_tracker_reencodes_byte_identically(fixtures_dir: Path) -> None:
    seen = 0
    non_empty = 0
    for name in FIXTURE_NAMES:
        for f in sorted((fixtures_dir / name / "manifest").iterdir()):
            blob = decode_manifest(f.read_bytes()).sequence_tracker
            assert blob is not None
            pairs = decode_seq_tracker(blob, path=str(f))
            assert encode_seq_tracker(pairs) == blob, f
            seen += 1
            non_empty += bool(pairs)
    assert seen == 118 and non_empty > 0


def test_spec_example_decodes_to_four_pairs_61_seconds_apart() -> None:
    assert decode_seq_tracker(SPEC_EXAMPLE) == SPEC_PAIRS
    assert encode_seq_tracker(SPEC_PAIRS) == SPEC_EXAMPLE


def test_empty_tracker_is_the_13_bytes_of_a_new_database() -> None:
    assert encode_seq_tracker([]) == EMPTY_SEQ_TRACKER == EMPTY_SEQUENCE_TRACKER
    assert len(EMPTY_SEQ_TRACKER) == 13
    assert decode_seq_tracker(EMPTY_SEQ_TRACKER) == []


@pytest.mark.parametrize(("dod", "code_bits"), [
    (0, 1), (63, 9), (-63, 9), (64, 12), (-255, 12), (256, 16), (-2047, 16),
    (2048, 36), (-(2**31), 36), (2**31 - 1, 36),
])
def test_each_delta_of_delta_code_width_round_trips(dod: int, code_bits: int) -> None:
    # values 0, 0, dod: the third value's dod is `dod` (deltas 0 then dod)
    ts = [1000, 1000, 1000 + dod]
    pairs = list(zip([5, 6, 7], ts, strict=True))
    blob = encode_seq_tracker(pairs)
    assert decode_seq_tracker(blob) == pairs
    # seq stream (5, 6, 7): count, first value, dod 1 ("10" + 7 bits), dod 0 ("0")
    seq_stream_bytes = (32 + 64 + 9 + 1 + 7) // 8
    # ts stream: count, first value, "0" for the first dod, then the code under test
    ts_stream_bytes = (32 + 64 + 1 + code_bits + 7) // 8
    assert len(blob) == 5 + seq_stream_bytes + ts_stream_bytes


pair_lists = st.lists(
    st.tuples(st.integers(0, 2**40), st.integers(-(2**40), 2**40)), max_size=40
).map(sorted)


@given(pair_lists)
def test_pairs_round_trip_when_every_delta_of_delta_fits_in_32_bits(
        pairs: list[tuple[int, int]]) -> None:
    def fits(values: list[int]) -> bool:
        prev_delta = 0
        for a, b in itertools.pairwise(values):
            if not -(2**31) <= (b - a) - prev_delta < 2**31:
                return False
            prev_delta = b - a
        return True

    blob = encode_seq_tracker(pairs)
    if fits([p[0] for p in pairs]) and fits([p[1] for p in pairs]):
        assert decode_seq_tracker(blob) == pairs
    else:  # 0.17.0 keeps only the low 32 bits of such a dod; decoding must not fail
        assert len(decode_seq_tracker(blob)) == len(pairs)


def test_seqs_above_i64_max_round_trip_as_u64() -> None:
    pairs = [(2**64 - 3, 10), (2**64 - 2, 70)]
    assert decode_seq_tracker(encode_seq_tracker(pairs)) == pairs


@pytest.mark.parametrize("blob", [
    b"",
    b"\x02" + bytes(12),  # unknown version
    b"\x01\x00\x00",  # too short for n
    SPEC_EXAMPLE[:-2],  # truncated ts stream
    SPEC_EXAMPLE[:10],  # truncated seq stream
    b"\x01\x05\x00\x00\x00" + SPEC_EXAMPLE[5:],  # n disagrees with the streams
])
def test_malformed_tracker_raises_corrupt(blob: bytes) -> None:
    with pytest.raises(CorruptObjectError):
        decode_seq_tracker(blob, path="m")


@given(st.data())
def test_flipped_byte_decodes_or_raises_data_error(data: st.DataObject) -> None:
    blob = bytearray(SPEC_EXAMPLE)
    pos = data.draw(st.integers(0, len(blob) - 1))
    blob[pos] ^= data.draw(st.integers(1, 255))
    try:
        decode_seq_tracker(bytes(blob))
    except DataError:
        pass


@pytest.mark.parametrize("bad", [[(-1, 0)], [(2**64, 0)], [(1, 2**63)]])
def test_encode_rejects_values_outside_u64_seq_or_i64_time(bad: list[tuple[int, int]]) -> None:
    with pytest.raises(InvalidArgumentError):
        encode_seq_tracker(bad)


def test_track_samples_at_most_every_60_seconds() -> None:
    pairs = track([], 10, 1000)
    pairs = track(pairs, 20, 1059)  # too soon: dropped
    pairs = track(pairs, 30, 1060)
    assert pairs == [(10, 1000), (30, 1060)]


def test_track_halves_by_keeping_every_other_pair_beyond_capacity() -> None:
    pairs = [(i, 60 * i) for i in range(SEQ_TRACKER_CAPACITY)]
    out = track(pairs, SEQ_TRACKER_CAPACITY, 60 * SEQ_TRACKER_CAPACITY)
    assert len(out) == SEQ_TRACKER_CAPACITY // 2 + 1
    assert out[:3] == [(0, 0), (2, 120), (4, 240)]
    assert out[-1] == (SEQ_TRACKER_CAPACITY, 60 * SEQ_TRACKER_CAPACITY)
    assert pairs[-1] == (SEQ_TRACKER_CAPACITY - 1, 60 * (SEQ_TRACKER_CAPACITY - 1))  # not mutated


def test_track_rejects_a_decreasing_sequence_number() -> None:
    with pytest.raises(InvalidArgumentError):
        track([(10, 0)], 9, 100)


def test_track_all_merges_samples_in_order_like_extend_from() -> None:
    assert track_all(SPEC_PAIRS[:2], [(3, SPEC_PAIRS[1][1] + 30), (40, SPEC_PAIRS[2][1])]) == (
        SPEC_PAIRS[:3])
