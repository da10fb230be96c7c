"""Sources for rescale tests: slatelib-written databases with L0s, a sorted run and a WAL
tail, and what every range of them must read."""

from __future__ import annotations

import time

from slatelib import Db, DbReader
from slatelib.objstore import ObjectStore
from slatelib.testing.clock import FakeClock
from tests.unit.writer.support import compact_l0, writer_settings

HOUR_S = 3600.0


def real_clock() -> FakeClock:
    """A fake clock at the real time: object ages (the store's modification times are real)
    and checkpoint expiries agree."""
    return FakeClock(int(time.time() * 1000))


def make_source(store: ObjectStore, clock: FakeClock, path: str = "src", *, keys: int = 300,
                wal_tail: int = 20, prefix: bytes = b"k") -> dict[bytes, bytes]:
    """A database with a sorted run, two L0s (an overwrite and a delete among them) and,
    unless ``wal_tail`` is 0, rows only in the WAL (the writer closed with a WAL flush, as
    after ``close(flush="wal")``). Returns what a reader must see. The clock then moves an
    hour on, so nothing looks live."""
    model: dict[bytes, bytes] = {}
    db = Db.open(path, store, writer_settings(), clock=clock)
    third = keys // 3
    for i in range(keys):
        key, value = prefix + b"%05d" % i, b"v%d-" % i * 8
        db.put(key, value)
        model[key] = value
        if i % third == third - 1:
            db.flush()
            if i < third:
                compact_l0(store, path, now_ms=clock.now_ms())
                db.refresh()
    gone = prefix + b"%05d" % 1
    db.delete(gone)
    model.pop(gone)
    for i in range(wal_tail):
        key, value = prefix + b"w%04d" % i, b"tail"
        db.put(key, value)
        model[key] = value
    db.close(flush="wal" if wal_tail else "memtable")
    clock.advance(HOUR_S)
    return dict(sorted(model.items()))


def read(store: ObjectStore, path: str, start: bytes | None = None,
         end: bytes | None = None) -> dict[bytes, bytes]:
    with DbReader.open(path, store, mode="latest") as r:
        return dict(r.scan(start, end))


def in_range(model: dict[bytes, bytes], start: bytes | None, end: bytes | None,
             ) -> dict[bytes, bytes]:
    return {k: v for k, v in model.items()
            if (start is None or k >= start) and (end is None or k < end)}
