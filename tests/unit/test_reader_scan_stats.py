"""``DbReader.scan_stats``: equal to ``RangeStats.of(reader.scan(...))`` over L0s, sorted
runs and replayed WAL rows, with tombstones and merge operands; ``DbReader.scan_buffers``:
the same pairs as Arrow buffers."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from slatelib import Db, DbReader
from slatelib.core.rescale_check import RangeStats
from slatelib.errors import InvalidArgumentError, MergeOperatorMissingError
from slatelib.format import seam
from slatelib.format.native_pipe import ArrowBuffers
from slatelib.objstore import ObjectStore
from slatelib.testing.clock import FakeClock
from tests.unit.native_only import require_native
from tests.unit.writer.support import compact_l0, memory_store, writer_settings

PATH = "db"


@pytest.fixture
def store() -> Iterator[ObjectStore]:
    store = memory_store()
    clock = FakeClock(1_750_000_000_000)
    rnd = random.Random(7)
    with Db.open(PATH, store, writer_settings(), clock=clock, merge_operator="concat") as db:
        for flush in range(4):
            for _ in range(300):
                k = b"k%04d" % rnd.randrange(500)
                op = rnd.random()
                if op < 0.6:
                    db.put(k, b"v" * rnd.randrange(40))
                elif op < 0.8:
                    db.delete(k)
                else:
                    db.merge(k, b"+%d" % flush)
            if flush == 1:
                db.flush()
                compact_l0(store, PATH, now_ms=clock.now_ms())
            elif flush == 2:
                db.flush()
        db.put(b"wal-only", b"x")
        db.close(flush=None)
    yield store


@pytest.mark.parametrize(("start", "end"), [(None, None), (b"k01", b"k03"), (b"k0200", None),
                                            (None, b"k0100"), (b"k02", b"k02")])
def test_scan_stats_equal_the_scan(store: ObjectStore, start: bytes | None,
                                   end: bytes | None) -> None:
    with DbReader.open(PATH, store, mode="latest", merge_operator="concat") as reader:
        expected = RangeStats.of(reader.scan(start, end))
        assert reader.scan_stats(start, end) == expected
    if start is None and end is None:
        assert expected.keys > 100


def test_scan_stats_refuse_what_the_scan_refuses(store: ObjectStore) -> None:
    with DbReader.open(PATH, store, mode="latest") as reader:
        with pytest.raises(MergeOperatorMissingError):
            reader.scan_stats()
        with pytest.raises(InvalidArgumentError, match="after end"):
            reader.scan_stats(b"b", b"a")


def _unpacked(batches: list[ArrowBuffers]) -> list[tuple[bytes, bytes]]:
    out = []
    for b in batches:
        koff = memoryview(b.key_offsets).cast("i")
        voff = memoryview(b.value_offsets).cast("i")
        assert len(koff) == len(voff) == b.num_rows + 1 and b.num_rows > 0
        assert koff[-1] == len(b.key_data) and voff[-1] == len(b.value_data)
        out += [(b.key_data[koff[i]:koff[i + 1]], b.value_data[voff[i]:voff[i + 1]])
                for i in range(b.num_rows)]
    return out


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
@pytest.mark.parametrize(("start", "end"), [(None, None), (b"k01", b"k03"), (b"k02", b"k02")])
def test_scan_buffers_hold_the_scan_in_batches(store: ObjectStore, monkeypatch: pytest.MonkeyPatch,
                                               native: bool, start: bytes | None,
                                               end: bytes | None) -> None:
    """``scan_buffers``: the scan's pairs, in order, in batches of at most ``max_rows`` rows
    that end once ``max_bytes`` is reached; natively and packed from the pairs alike."""
    if native:  # the native case must not pass empty
        require_native(seam._PIPE is not None, "the native pipeline")
    else:
        monkeypatch.setattr(seam, "_PIPE", None)
    with DbReader.open(PATH, store, mode="latest", merge_operator="concat") as reader:
        want = list(reader.scan(start, end))
        for rows, size in [(7, 1 << 20), (1 << 20, 100), (1, 1)]:
            got = list(reader.scan_buffers(start, end, max_rows=rows, max_bytes=size))
            assert _unpacked(got) == want
            assert all(b.num_rows <= rows for b in got)
            assert all(len(b.key_data) + len(b.value_data) < size + 50 for b in got)
            assert all(b.seq is None and b.create_ts is None for b in got)
    if start is None:
        assert len(want) > 100


def test_scan_buffers_refuse_what_they_cannot_do(store: ObjectStore) -> None:
    with DbReader.open(PATH, store, mode="latest", merge_operator="concat") as reader:
        with pytest.raises(InvalidArgumentError, match="after end"):
            reader.scan_buffers(b"b", b"a")
        with pytest.raises(InvalidArgumentError, match="at least 1"):
            reader.scan_buffers(max_rows=0)
    with DbReader.open(PATH, store, mode="latest") as reader:
        with pytest.raises(MergeOperatorMissingError):
            list(reader.scan_buffers())
