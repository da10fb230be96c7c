"""Planning I/O: the fast paths of ``input_views`` and ``build_tasks`` equal the plain
per-view definitions on random manifests and ranges."""

from __future__ import annotations

import gc
import random
from dataclasses import replace

import pytest

from slatelib.core.compaction_plan import CompactionSpec, Policy
from slatelib.core.compaction_source import SourceId, effective_range, estimate_view_size
from slatelib.core.manifest import Manifest, SortedRun, SsTableInfo, SstHandle, SstView
from slatelib.core.range_split import overlaps, view_anchor
from slatelib.core.ranges import UNBOUNDED, Bound, BytesRange
from slatelib.errors import CorruptObjectError
from slatelib.format import manifest_native, seam
from slatelib.format.sst import SstWriterOptions
from slatelib.ids import Ulid
from slatelib.objstore import open_store
from slatelib.ops.engine import (
    CompactionTask,
    InputView,
    TaskOptions,
    TaskSource,
    TaskView,
    build_tasks,
    input_views,
)
from slatelib.ops.engine._split import coarse_anchors, gc_paused
from slatelib.store.table_store import TableStore
from tests.unit.native_only import require_native


def _key(rng: random.Random) -> bytes:
    return bytes(rng.choice(b"abcdefgh") for _ in range(rng.randint(1, 4)))


def _bound(rng: random.Random) -> Bound:
    kind = rng.randrange(3)
    if kind == 0:
        return UNBOUNDED
    return Bound.included(_key(rng)) if kind == 1 else Bound.excluded(_key(rng))


def _range(rng: random.Random) -> BytesRange:
    return BytesRange(_bound(rng), _bound(rng))


def _random_spec(rng: random.Random) -> tuple[CompactionSpec, Manifest]:
    handles: list[SstHandle] = []
    next_id = iter(range(1, 10**6))

    def sst(first: bytes, last: bytes | None) -> SstView:
        sid = next(next_id)
        info = SsTableInfo(first, last, rng.randint(1, 10**6), rng.randint(0, 999), 0, 0)
        handles.append(SstHandle(Ulid(sid), info, 2))
        visible = None if rng.random() < 0.6 else _range(rng)
        return SstView(Ulid(next(next_id)), Ulid(sid), visible)

    l0 = tuple(sst(_key(rng), None if rng.random() < 0.1 else b"zz")
               for _ in range(rng.randint(0, 3)))
    runs = []
    for run_id in range(rng.randint(1, 4), 0, -1):
        keys = sorted({_key(rng) for _ in range(rng.randint(0, 30))})
        views = [sst(a, b) for a, b in zip(keys[::2], keys[1::2], strict=False)]
        if views and rng.random() < 0.2:
            views.append(sst(keys[-1] + b"z", None))  # an unbounded last view
        if rng.random() < 0.15:
            rng.shuffle(views)  # out of key order: build_tasks must scan such a run
        runs.append(SortedRun(run_id, tuple(views)))
    m = Manifest().with_trees(l0=l0, compacted=runs, new_ssts=handles)
    spec = CompactionSpec(Policy.FULL, tuple(SourceId.run(r.id) for r in runs), 0, l0,
                          tuple(runs), True, 0, 0)
    return spec, m


def _reference_views(spec: CompactionSpec, m: Manifest, tables: TableStore) -> list[InputView]:
    l0_ids = set(spec.l0_view_ids)
    out = []
    for view in spec.views():
        h = m.sst(view.sst_id)
        tv = TaskView(view, h, tables.sst_path(h.id))
        out.append(InputView(view, tv, effective_range(view, h.info),
                             estimate_view_size(view, h.info), view.id in l0_ids))
    return out


def _reference_sources(spec: CompactionSpec, views: list[InputView],
                       rng: BytesRange) -> tuple[TaskSource, ...]:
    by_view = {iv.view.id: iv for iv in views}
    sources = [(f"l0:{v.id}", [by_view[v.id]]) for v in spec.l0_views]
    sources += [(f"sr:{r.id}", [by_view[v.id] for v in r.views]) for r in spec.runs]
    out = []
    for name, ivs in sources:
        hit = tuple(iv.task_view for iv in ivs if overlaps(iv.effective, rng))
        if hit:
            out.append(TaskSource(name, hit))
    return tuple(out)


@pytest.mark.parametrize("native", [True, False])
def test_input_views_and_build_tasks_equal_the_per_view_definitions(
    native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if native:
        require_native(manifest_native.ext is not None, "slatelib._manifest")
    else:  # the pure-Python path (extension absent or SLATELIB_NO_NATIVE=1)
        monkeypatch.setattr(seam, "_manifest_ext", None)
    tables = TableStore(open_store("memory:///"), "db")
    opts = TaskOptions(open_store("memory:///").spec, "db", Ulid(1), SstWriterOptions(), 1 << 20,
                       None, 4, 1 << 20, 0)
    r = random.Random(11)
    for _ in range(300):
        spec, m = _random_spec(r)
        views = input_views(spec, m, tables)
        assert views == _reference_views(spec, m, tables)
        assert coarse_anchors(views) == [view_anchor(v.effective, v.size) for v in views]
        ranges = [_range(r) for _ in range(r.randint(1, 6))] + [BytesRange.all()]
        tasks = build_tasks(spec, views, ranges, opts)
        expected = [_reference_task(spec, opts, i, rng, _reference_sources(spec, views, rng))
                    for i, rng in enumerate(ranges)]
        assert tasks == expected
        # Input views in another order (not spec.views()'s) are looked up by view id.
        shuffled = list(views)
        r.shuffle(shuffled)
        assert build_tasks(spec, shuffled, ranges, opts) == expected


def _reference_task(spec: CompactionSpec, opts: TaskOptions, index: int, rng: BytesRange,
                    sources: tuple[TaskSource, ...]) -> CompactionTask:
    return CompactionTask(
        store=opts.store, db_path=opts.db_path, compaction_id=opts.compaction_id, index=index,
        range=rng, sources=sources, retention_min_seq=spec.retention_min_seq,
        bottom=spec.bottom, clock_tick=spec.clock_tick, sst_options=opts.sst_options,
        max_sst_size=opts.max_sst_size, merge_operator=opts.merge_operator,
        max_fetch_tasks=opts.max_fetch_tasks, bytes_to_fetch=opts.bytes_to_fetch,
        min_ulid_ms=opts.min_ulid_ms)


def test_coarse_anchors_skips_the_fine_views_and_clamps_like_view_anchor() -> None:
    spec, m = _random_spec(random.Random(4))
    views = input_views(spec, m, TableStore(open_store("memory:///"), "db"))
    assert len(views) > 3
    views = [*views, InputView(views[0].view, views[0].task_view,
                               BytesRange(UNBOUNDED, UNBOUNDED), -5, False)]
    fine = set(range(0, len(views), 3))
    assert coarse_anchors(views, fine) == [view_anchor(v.effective, v.size)
                                           for i, v in enumerate(views) if i not in fine]
    assert coarse_anchors(views)[-1] == (b"", 0)


def test_input_views_names_a_missing_sst() -> None:
    spec, _ = _random_spec(random.Random(2))
    assert spec.views()
    with pytest.raises(CorruptObjectError, match="unknown SST"):  # a manifest without them
        input_views(spec, Manifest(), TableStore(open_store("memory:///"), "db"))
    assert gc.isenabled()


def test_gc_paused_nests_and_restores_the_callers_setting() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the caller disabled it: it stays disabled
    finally:
        gc.enable()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_the_native_builder_makes_exactly_the_plain_identity_views() -> None:
    ext = manifest_native.ext
    require_native(ext is not None, "slatelib._manifest")
    assert ext is not None
    tables = TableStore(open_store("memory:///"), "db")
    r = random.Random(23)
    native = python = 0
    for _ in range(100):
        spec, m = _random_spec(r)
        views = spec.views()
        paths = [tables.sst_path(v.sst_id) for v in views]
        built = seam.identity_input_views(views, paths, m.sst_map, set(spec.l0_view_ids))
        for view, got, want in zip(views, built, _reference_views(spec, m, tables), strict=True):
            if view.visible_range is not None:
                assert got is None
                python += 1
            else:
                assert got == want and not gc.is_tracked(got)
                assert got.effective.start.key == (m.sst(view.sst_id).info.first_entry or b"")
                native += 1
    assert native > 200 and python > 50
    # An SST missing from the map is left to the Python path (which names it).
    spec, m = _random_spec(r)
    views = spec.views()
    assert ext.identity_input_views(views, ["p"] * len(views), {}, set()) == [None] * len(views)
    with pytest.raises(ValueError, match="one path per view"):
        ext.identity_input_views(views, [], {}, set())


def test_split_ranges_from_cached_indexes_reads_nothing_and_equals_the_read_split() -> None:
    """The job's source check leaves every L0 index in the cache; the split then anchors
    them on the calling thread without a read, with the ranges of a split that reads."""
    from slatelib import Db
    from slatelib.core.compaction_plan import PlanOptions, plan_compaction
    from slatelib.ops.compaction.guard import check_sources
    from slatelib.ops.engine import split_ranges
    from slatelib.store.manifest_store import ManifestStore
    from slatelib.store.sst_reader import BlockCache
    from slatelib.testing.faulty import FlakyObjectStore
    from tests.unit.writer.support import writer_settings

    store = open_store("memory:///")
    r = random.Random(8)
    with Db.open("db", store, writer_settings()) as db:
        for _ in range(4):
            for _ in range(300):
                db.put(b"k%06d" % r.randrange(10**6), b"v" * 50)
            db.flush()
    m = ManifestStore(store, "db").read_latest().value
    spec = plan_compaction(m, None, PlanOptions(policy=Policy.L0))
    assert spec is not None and len(spec.l0_views) == 4
    views = input_views(spec, m, TableStore(store, "db"))
    kw = {"parallelism": 3, "max_sst_size": 1 << 20, "min_range_bytes": 1}
    read = split_ranges(store, views, **kw)  # type: ignore[arg-type]
    assert len(read) == 3
    cache = BlockCache(1 << 26)
    check_sources(store, "db", m, [spec], cache=cache)
    flaky = FlakyObjectStore(store)
    assert split_ranges(flaky, views, cache=cache, **kw) == read  # type: ignore[arg-type]
    assert not [op for op, _ in flaky.log if op.startswith("get")]
    partial = BlockCache(1 << 26)  # one index cached, three read on threads
    check_sources(store, "db", m, [replace(spec, l0_views=spec.l0_views[:1])], cache=partial)
    flaky = FlakyObjectStore(store)
    assert split_ranges(flaky, views, cache=partial, **kw) == read  # type: ignore[arg-type]
    assert len([op for op, _ in flaky.log if op.startswith("get")]) == 3
