"""``DbReader.scan_stats``: equal to ``RangeStats.of(reader.scan(...))`` over L0s, sorted
runs and replayed WAL rows, with tombstones and merge operands."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from slatelib import Db, DbReader
from slatelib.core.rescale_check import RangeStats
from slatelib.errors import InvalidArgumentError, MergeOperatorMissingError
from slatelib.objstore import ObjectStore
from slatelib.testing.clock import FakeClock
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
