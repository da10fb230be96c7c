"""Reading a task's inputs: every source starts fetching when it is made, not when the merge
first reads it (so a task's sources fetch their first groups side by side)."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from slatelib.config import CompactionSettings, Settings
from slatelib.core.row import VALUE
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.compaction import run_compaction
from slatelib.ops.engine import CompactionTask, ReadTimer, open_inputs, source_blocks
from slatelib.ops.engine._execute import input_buffers
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db

ROOT = "db"


class _Captured(Exception):
    def __init__(self, tasks: list[CompactionTask]) -> None:
        super().__init__("captured")
        self.tasks = tasks


class _RangeReads:
    """Counts ranged reads per object; everything else goes to the wrapped store."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.paths: list[str] = []
        self.lock = threading.Lock()

    def get_range(self, path: str, start: int, end: int) -> bytes:
        with self.lock:
            self.paths.append(path)
        return self.inner.get_range(path, start, end)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _one_task(store: ObjectStore) -> CompactionTask:
    def runner(tasks: Any) -> Any:
        raise _Captured(list(tasks))

    settings = Settings(compaction=CompactionSettings(policy="l0", min_range_bytes=1))
    try:
        run_compaction(ROOT, store, settings=settings, parallelism=1, runner=runner)
    except _Captured as got:
        return got.tasks[0]
    raise AssertionError("no task ran")


def test_each_source_fetches_its_first_group_when_made() -> None:
    store = open_store(f"memory://{uuid.uuid4().hex}/")
    new_db(store, ROOT)
    for i in range(3):
        flush_l0(store, ROOT, [(b"k%04d" % k, i + 1, VALUE, b"v" * 50, None, NOW_MS)
                               for k in range(i, 600, 3)])
    task = _one_task(store)
    assert len(task.sources) == 3
    counting = _RangeReads(store)
    prefetch, fetch = input_buffers(len(task.sources), task.max_fetch_tasks,
                                    task.bytes_to_fetch)
    with ThreadPoolExecutor(4) as pool:
        sources = open_inputs(task, counting, pool)  # type: ignore[arg-type]
        counting.paths.clear()  # the indexes' reads
        streams = [source_blocks(counting, views, pool, prefetch=prefetch,  # type: ignore[arg-type]
                                 fetch_bytes=fetch, timer=ReadTimer())
                   for views in sources]
        pool.shutdown(wait=True)  # the submitted fetches are done; nothing was read yet
        assert sorted(set(counting.paths)) == sorted(
            {views[0].reader.path for views in sources})
        assert sum(len(b) for s in streams for b in s) == 600  # every entry, read after all
