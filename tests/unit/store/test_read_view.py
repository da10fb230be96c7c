"""ReadView over a large manifest: sorted runs build their SST readers lazily."""

from __future__ import annotations

from slatelib.core.manifest import Manifest, SortedRun, SsTableInfo, SstHandle, SstView
from slatelib.core.ranges import Bound, BytesRange
from slatelib.ids import Ulid
from slatelib.objstore import open_store
from slatelib.store.read_view import LazyViewSources, ReadView, RunSource, ViewSource
from slatelib.store.table_store import TableStore


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
