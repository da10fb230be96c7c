"""ReadView over a large manifest: sorted runs build their SST readers lazily; scan stats
through the native pipeline."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace

import pytest

from slatelib.core.manifest import (
    CompressionCodec,
    Manifest,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstView,
)
from slatelib.core.memtable import MemTable
from slatelib.core.merge import ConcatMergeOperator
from slatelib.core.ranges import Bound, BytesRange
from slatelib.core.rescale_check import RangeStats
from slatelib.core.row import MERGE, TOMBSTONE, VALUE
from slatelib.ids import Ulid
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.read_view import LazyViewSources, ReadView, RunSource, ViewSource
from slatelib.store.table_store import TableStore
from tests.compaction_fixtures import NOW_MS, SMALL, add_run, flush_l0, new_db

ROOT = "db"


def _manifest(n: int) -> Manifest:
    handles, views = [], []
    for i in range(n):
        sid = Ulid((1 << 100) + i)
        info = SsTableInfo(b"k%05d" % (10 * i), b"k%05d" % (10 * i + 9), 100, 10, 50, 10)
        handles.append(SstHandle(sid, info))
        # every third view starts after its SST's first key
        rng = BytesRange(Bound.included(b"k%05d5" % (10 * i)), Bound.unbounded()) if i % 3 == 0 \
            else None
        views.append(SstView(sid, sid, rng))
    return Manifest(ssts=tuple(handles), compacted=(SortedRun(0, tuple(views)),))


def test_runs_start_lazy_and_build_each_source_once() -> None:
    m = _manifest(500)
    view = ReadView(TableStore(open_store("memory:///"), "db"), m)
    (run,) = view.all_sources()
    assert isinstance(run, RunSource) and isinstance(run.views, LazyViewSources)
    assert run.views._built.count(None) == 500  # nothing built by opening
    eager = [ViewSource(view.tables.reader(m.sst(v.sst_id)), v.visible_range)
             for v in m.compacted[0].views]
    assert run._starts == [v.start_key() for v in eager]
    # A point read resolves one view: SST 7 holds k00070..k00079 (its object is missing).
    assert run._view_for(b"k00075") is run.views[7]
    assert run.views._built.count(None) == 499
    assert run.views[7] is run.views[7]
    assert run.views[7].reader.path == eager[7].reader.path
    assert [s.reader.path for s in run.views[497:]] == [s.reader.path for s in eager[497:]]
    assert len(run.views) == 500


@pytest.mark.parametrize("codec", [CompressionCodec.NONE, CompressionCodec.LZ4])
def test_scan_stats_equal_the_stats_of_the_scan(codec: int) -> None:
    """Over L0 views clipped to ranges with excluded starts and included ends, a sorted run,
    and a memtable, with tombstones and merge operands: natively checked, merged and hashed
    (or read as rows for a compressed SST), the stats equal ``RangeStats.of(scan)``."""
    store = open_store(f"memory://{uuid.uuid4().hex}/")
    new_db(store, ROOT)
    opts = replace(SMALL, codec=codec)
    rng = random.Random(3)
    add_run(store, ROOT, 0, [[(b"k%04d" % k, 1, VALUE, b"run%d" % k, None, NOW_MS)
                              for k in range(c, c + 400, 2)] for c in range(0, 2000, 400)],
            options=opts)
    views = []
    for seq in range(2, 6):
        rows = []
        for k in sorted({*rng.sample(range(2000), 500), 100, 700, 1500}):  # the bounds too
            kind = rng.choice([VALUE, VALUE, TOMBSTONE, MERGE])
            rows.append((b"k%04d" % k, seq, kind, b"" if kind == TOMBSTONE else b"s%d" % seq,
                         None, NOW_MS))
        views.append(flush_l0(store, ROOT, rows, options=opts))
    clipped = [SstView(views[0].id, views[0].sst_id, BytesRange(
                   Bound.excluded(b"k0100"), Bound.included(b"k1500"))),
               SstView(views[1].id, views[1].sst_id, BytesRange(
                   Bound.excluded(b"k0700"), Bound.unbounded())), *views[2:]]
    m = ManifestStore(store, ROOT).read_latest().value
    m = m.with_trees(l0=list(reversed(clipped)), compacted=list(m.compacted))
    mem = MemTable()
    for k in range(0, 2000, 97):
        mem.put((b"k%04d" % k, 10, MERGE if k % 2 else TOMBSTONE,
                 b"" if k % 2 == 0 else b"mem", None, None))
    view = ReadView(TableStore(store, ROOT), m, [mem], ConcatMergeOperator())
    for start, end in [(None, None), (b"k0100", b"k1500"), (b"k0101", None),
                       (None, b"k0700"), (b"k0500", b"k0500")]:
        want = RangeStats.of(view.scan(start, end))
        assert view.scan_stats(start, end) == want
    assert RangeStats.of(view.scan()).keys > 800
