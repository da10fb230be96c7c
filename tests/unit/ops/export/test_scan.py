"""plan_scan + scan_task_rows: a checkpoint read in byte-balanced key ranges equals DbReader
on the same checkpoint, and a key range reads only the blocks that may hold it."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from slatelib import DbReader
from slatelib.core.ranges import BytesRange
from slatelib.errors import InvalidArgumentError, MergeOperatorMissingError
from slatelib.objstore import ObjectStore
from slatelib.ops.export.pin import PinnedCheckpoint, create_read_checkpoint
from slatelib.ops.export.scan import ScanTask, plan_scan, scan_task_rows
from tests.unit.ops.export.support import PATH, build_db


class CountingStore:
    """Counts the bytes of ranged reads; everything else goes to the wrapped store."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.range_bytes = 0

    def get_range(self, path: str, start: int, end: int) -> bytes:
        self.range_bytes += end - start
        return self.inner.get_range(path, start, end)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def db() -> tuple[ObjectStore, dict[bytes, bytes], PinnedCheckpoint]:
    store, model = build_db()
    pinned = create_read_checkpoint(store, PATH, name="t", lifetime_s=3600)
    return store, model, pinned


def _read(store: Any, tasks: list[ScanTask]) -> list[tuple[bytes, bytes]]:
    return [(r[0], r[3]) for t in tasks for rows in scan_task_rows(t, store=store) for r in rows]


def _plan(store: ObjectStore, pinned: PinnedCheckpoint, **kw: Any) -> list[ScanTask]:
    return plan_scan(store, PATH, pinned.manifest, manifest_id=pinned.manifest_id,
                     checkpoint_id=pinned.checkpoint.id, merge_operator="concat", **kw)


def test_partitioned_read_equals_dbreader_on_the_checkpoint(db: Any) -> None:
    store, model, pinned = db
    tasks = _plan(store, pinned, partitions=4, min_partition_bytes=1)
    assert len(tasks) > 1
    got = _read(store, tasks)
    with DbReader.open(PATH, store, checkpoint=pinned.checkpoint.id,
                       merge_operator="concat") as r:
        expected = list(r.scan())
    assert got == expected
    assert dict(got) == model  # WAL-only rows, merges, deletes over the sorted run included
    # the ranges cover the key space without overlap, in order
    assert tasks[0].range.start.key is None and tasks[-1].range.end.key is None
    for a, b in zip(tasks, tasks[1:], strict=False):
        assert a.range.end.key == b.range.start.key


def test_tasks_are_picklable_and_carry_their_checkpoint(db: Any) -> None:
    store, _, pinned = db
    for t in _plan(store, pinned, partitions=3, min_partition_bytes=1):
        again = pickle.loads(pickle.dumps(t))
        assert again == t and again.checkpoint_id == pinned.checkpoint.id


def test_key_range_reads_only_the_blocks_that_may_hold_it(db: Any) -> None:
    store, model, pinned = db
    full = CountingStore(store)
    _read(full, _plan(store, pinned))
    narrow = CountingStore(store)
    rng = BytesRange.half_open(b"key:0100", b"key:0120")
    got = _read(narrow, _plan(store, pinned, key_range=rng))
    assert got == sorted((k, v) for k, v in model.items() if b"key:0100" <= k < b"key:0120")
    assert 0 < narrow.range_bytes < full.range_bytes / 4


def test_empty_key_range_plans_no_task(db: Any) -> None:
    store, _, pinned = db
    assert _plan(store, pinned, key_range=BytesRange.half_open(b"b", b"a")) == []


def test_bad_partition_counts_are_refused(db: Any) -> None:
    store, _, pinned = db
    with pytest.raises(InvalidArgumentError, match="partitions"):
        _plan(store, pinned, partitions=0)


def test_merge_rows_without_an_operator_fail_naming_the_key(db: Any) -> None:
    store, _, pinned = db
    tasks = plan_scan(store, PATH, pinned.manifest, manifest_id=pinned.manifest_id,
                      checkpoint_id=pinned.checkpoint.id)
    with pytest.raises(MergeOperatorMissingError):
        _read(store, tasks)
