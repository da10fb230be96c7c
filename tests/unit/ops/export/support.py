"""A small database for the export unit tests: L0 SSTs, a sorted run, overwrites,
deletes, merge operands and WAL-only rows, in a private memory store."""

from __future__ import annotations

from dataclasses import replace

from slatelib import Db
from slatelib.objstore import ObjectStore
from slatelib.testing.clock import FakeClock
from tests.unit.writer.support import compact_l0, memory_store, writer_settings

PATH = "db"
NOW_MS = 1_750_000_000_000


def build_db(clock: FakeClock | None = None) -> tuple[ObjectStore, dict[bytes, bytes]]:
    """The database and what a full scan must return."""
    clock = clock or FakeClock(NOW_MS)
    store = memory_store()
    model: dict[bytes, bytes] = {}
    settings = writer_settings()
    settings = replace(settings, sst=replace(settings.sst, block_size=512))  # many blocks
    db = Db.open(PATH, store, settings, merge_operator="concat", clock=clock)
    try:
        for i in range(400):
            k, v = b"key:%04d" % i, (b"a-%d-" % i) * 20
            db.put(k, v)
            model[k] = v
        db.flush()
        compact_l0(store, PATH, now_ms=clock.now_ms())
        db.refresh()
        for i in range(0, 400, 3):
            db.put(b"key:%04d" % i, b"b-%d" % i)
            model[b"key:%04d" % i] = b"b-%d" % i
        for i in range(1, 400, 7):
            db.delete(b"key:%04d" % i)
            model.pop(b"key:%04d" % i, None)
        for i in range(2, 400, 11):
            db.merge(b"key:%04d" % i, b"+m")
            model[b"key:%04d" % i] = model.get(b"key:%04d" % i, b"") + b"+m"
        db.flush()
        for i in range(5, 400, 13):  # WAL only
            db.put(b"key:%04d" % i, b"w-%d" % i)
            model[b"key:%04d" % i] = b"w-%d" % i
        db.delete(b"key:0398")
        model.pop(b"key:0398", None)
        db.merge(b"zz:merge", b"only")
        model[b"zz:merge"] = b"only"
        db.flush("wal")
    finally:
        db.close(flush=None)
    return store, model
