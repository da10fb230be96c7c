"""The Spark runner's driver-side helpers (no Spark needed)."""

from __future__ import annotations

import dataclasses
import random

from slatelib.core.compaction_source import estimate_view_size
from slatelib.core.ranges import BytesRange
from slatelib.format.sst import SstWriterOptions
from slatelib.ids import Ulid
from slatelib.objstore import open_store
from slatelib.ops.engine import CompactionTask, TaskOptions, build_tasks, input_views
from slatelib.spark.compaction import task_bytes
from slatelib.store.table_store import TableStore
from tests.unit.ops.engine.test_split import _random_spec, _range


def _task_bytes_definition(task: CompactionTask) -> int:
    total = 0
    for source in task.sources:
        for tv in source.views:
            vis = tv.view.visible_range
            clipped = task.range if vis is None else vis.intersect(task.range)
            try:
                total += estimate_view_size(
                    dataclasses.replace(tv.view, visible_range=clipped), tv.handle.info)
            except Exception:
                continue
    return total


def test_task_bytes_equals_the_estimate_of_every_clipped_view() -> None:
    r = random.Random(31)
    tables = TableStore(open_store("memory:///"), "db")
    opts = TaskOptions(open_store("memory:///").spec, "db", Ulid(1), SstWriterOptions(),
                       1 << 20, None, 4, 1 << 20, 0)
    checked = 0
    for _ in range(200):
        spec, m = _random_spec(r)
        views = input_views(spec, m, tables)
        ranges = [_range(r) for _ in range(r.randint(1, 5))] + [BytesRange.all()]
        for task in build_tasks(spec, views, ranges, opts):
            assert task_bytes(task) == _task_bytes_definition(task)
            checked += bool(task.sources)
    assert checked > 300


