"""plan_diff + diff_task_rows: the changes between two checkpoints, exact across
overwrites, deletes, merges and a compaction in between."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from slatelib import Db
from slatelib.config import Settings
from slatelib.ops.compaction import run_compaction
from slatelib.ops.export.diff import diff_task_rows, plan_diff
from slatelib.ops.export.pin import create_read_checkpoint
from slatelib.testing.clock import FakeClock
from tests.unit.ops.export.support import NOW_MS, PATH, build_db
from tests.unit.writer.support import writer_settings


def _compaction_settings() -> Settings:
    s = Settings()
    return replace(s, compaction=replace(s.compaction, merge_operator="concat"))


def _apply(table: dict[bytes, bytes], tasks: list[Any], store: Any) -> int:
    n = 0
    for t in tasks:
        for changes, rows in diff_task_rows(t, store=store):
            for change, row in zip(changes, rows, strict=True):
                n += 1
                if change == "delete":
                    del table[row[0]]
                else:
                    table[row[0]] = row[3]
    return n


def test_diff_applied_to_the_old_view_gives_the_new_one() -> None:
    clock = FakeClock(NOW_MS)
    store, old_model = build_db(clock)
    old = create_read_checkpoint(store, PATH, name="old", lifetime_s=3600, clock=clock)
    new_model = dict(old_model)
    db = Db.open(PATH, store, writer_settings(), merge_operator="concat", clock=clock)
    with db:
        for i in range(0, 400, 5):
            db.put(b"key:%04d" % i, b"c-%d" % i)
            new_model[b"key:%04d" % i] = b"c-%d" % i
        for i in range(3, 400, 4):
            db.delete(b"key:%04d" % i)
            new_model.pop(b"key:%04d" % i, None)
        db.merge(b"zz:merge", b"+more")
        new_model[b"zz:merge"] += b"+more"
        db.put(b"new:key", b"n")
        new_model[b"new:key"] = b"n"
    # a compaction between the two checkpoints: every L0 and the sorted run into one run
    report = run_compaction(PATH, store, settings=_compaction_settings(), policy="full",
                            parallelism=2, clock=clock)
    assert report.to_dict()["status"] == "committed"
    with Db.open(PATH, store, writer_settings(), merge_operator="concat", clock=clock) as db:
        db.put(b"key:0010", b"after-compaction")
        new_model[b"key:0010"] = b"after-compaction"
    new = create_read_checkpoint(store, PATH, name="new", lifetime_s=3600, clock=clock)
    tasks = plan_diff(store, PATH, old, new, columns=("key", "value"), partitions=3,
                      min_partition_bytes=1, merge_operator="concat")
    assert len(tasks) > 1
    table = dict(old_model)
    n = _apply(table, tasks, store)
    assert table == new_model
    changed = {k for k in old_model.keys() | new_model.keys()
               if old_model.get(k) != new_model.get(k)}
    assert n == len(changed)


def test_no_change_gives_no_row() -> None:
    store, _ = build_db()
    a = create_read_checkpoint(store, PATH, name="a", lifetime_s=3600)
    b = create_read_checkpoint(store, PATH, name="b", lifetime_s=3600)
    tasks = plan_diff(store, PATH, a, b, columns=("key", "value"), merge_operator="concat")
    assert _apply({}, tasks, store) == 0
