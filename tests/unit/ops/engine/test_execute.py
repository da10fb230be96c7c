"""Executing compaction ranges: what the output SSTs hold, and what is read to make them."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from functools import partial

import pytest

from slatelib import DbReader
from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.compaction_plan import PlanOptions, Policy, plan_compaction
from slatelib.core.manifest import CompressionCodec, Manifest, SortedRun, SstView
from slatelib.core.ranges import BytesRange
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.errors import ChecksumMismatchError, CorruptObjectError
from slatelib.format.sst import SstWriterOptions, parse_sst
from slatelib.ids import ulid_time_ms
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction, run_compaction_task
from slatelib.ops.engine import (
    TaskOptions,
    build_tasks,
    execute_compaction_task,
    input_views,
    load_merge_operator,
)
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.table_store import TableStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore
from slatelib.txn import update_versioned
from tests.compaction_fixtures import NOW_MS, SMALL, add_run, flush_l0, new_db, visible

ROOT = "db"


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}/")


def settings(**compaction: object) -> Settings:
    # these runs are about l0 compactions (the settings default is size-tiered)
    base = {"policy": "l0", "min_range_bytes": 1, "max_sst_size": 1 << 30}
    base.update(compaction)
    return Settings(sst=SstSettings(block_size=256, min_filter_keys=4),
                    compaction=CompactionSettings(**base))  # type: ignore[arg-type]


def random_l0s(store: ObjectStore, rng: random.Random, *, l0s: int = 4, keys: int = 300,
               per: int = 120, seq: int = 0, kinds: tuple[int, ...] = (VALUE, VALUE, TOMBSTONE),
               ) -> list[list[Row]]:
    written = []
    for _ in range(l0s):
        rows = []
        seq += 1
        for k in rng.sample(range(keys), per):
            kind = rng.choice(kinds)
            value = b"" if kind == TOMBSTONE else rng.randbytes(rng.randint(0, 40))
            rows.append((b"key%05d" % k, seq, kind, value, None, NOW_MS))
        flush_l0(store, ROOT, rows)
        written.append(rows)
    return written


def scan(store: ObjectStore, merge_operator: str | None = None) -> dict[bytes, bytes]:
    with DbReader.open(ROOT, store, mode="latest", merge_operator=merge_operator) as r:
        return dict(r.scan())


def output_ssts(store: ObjectStore) -> list[tuple[object, list[Row]]]:
    m = ManifestStore(store, ROOT).read_latest().value
    out = []
    for run in m.compacted:
        for view in run.views:
            h = m.sst(view.sst_id)
            data = store.get(DbPaths(ROOT).compacted(h.id))
            out.append((h, parse_sst(data, info=h.info).rows()))
    return out


def test_compaction_keeps_exactly_what_a_reader_saw(store: ObjectStore) -> None:
    new_db(store, ROOT)
    written = random_l0s(store, random.Random(1))
    before = scan(store)
    assert before == visible(written)
    report = run_compaction(ROOT, store, settings=settings(), parallelism=3)
    assert report.status == "committed" and report.tasks == 3
    assert scan(store) == before
    rows = [r for _, rs in output_ssts(store) for r in rs]
    assert {r[0]: r[3] for r in rows} == before  # bottom run: one value per live key
    assert all(r[2] == VALUE for r in rows)
    assert report.rows_out == len(rows) and report.rows_in == sum(map(len, written))


def test_ranges_write_disjoint_ascending_ssts_and_never_split_a_key(store: ObjectStore) -> None:
    new_db(store, ROOT)
    rng = random.Random(2)
    seq = 0
    for _ in range(3):  # every L0 holds many versions of a few hot keys
        seq += 1
        rows = [(b"hot%d" % (i % 5), seq * 1000 + i, VALUE, b"x" * 30, None, NOW_MS)
                for i in range(200)]
        rows += [(b"key%04d" % k, seq * 1000 + 999, VALUE, b"y", None, NOW_MS)
                 for k in rng.sample(range(2000), 300)]
        flush_l0(store, ROOT, rows, snapshot_min_seq=0)  # keep every version
    before = scan(store)
    run_compaction(ROOT, store, settings=settings(max_sst_size=2000), parallelism=4)
    ssts = output_ssts(store)
    assert len(ssts) > 4
    for (_, r1), (_, r2) in zip(ssts, ssts[1:], strict=False):
        assert r1[-1][0] < r2[0][0], "a key's versions straddle two output SSTs"
    all_rows = [r for _, rs in ssts for r in rs]
    assert len(all_rows) == 3 * 500  # snapshot seq 0 keeps every version
    assert scan(store) == before


def test_visible_ranges_of_projected_views_are_honoured(store: ObjectStore) -> None:
    new_db(store, ROOT)
    rows = [(b"k%03d" % i, 5, VALUE, b"v%d" % i, None, NOW_MS) for i in range(100)]
    view = flush_l0(store, ROOT, rows)
    projected = SstView(view.id, view.sst_id, BytesRange.half_open(b"k020", b"k030"))

    def project(cur: object) -> Manifest:
        return cur.value.with_trees(l0=[projected])  # type: ignore[attr-defined, no-any-return]

    update_versioned(ManifestStore(store, ROOT), project)
    run_compaction(ROOT, store, settings=settings(), parallelism=2)
    keys = [r[0] for _, rs in output_ssts(store) for r in rs]
    assert keys == [b"k%03d" % i for i in range(20, 30)]


def test_a_task_reads_only_the_blocks_of_its_range(store: ObjectStore) -> None:
    new_db(store, ROOT)
    rows = [(b"k%05d" % i, 3, VALUE, b"v" * 50, None, NOW_MS) for i in range(2000)]
    flush_l0(store, ROOT, rows)
    m = ManifestStore(store, ROOT).read_latest().value
    spec = plan_compaction(m, None, PlanOptions(Policy.L0))
    views = input_views(spec, m, TableStore(store, ROOT))
    rng = BytesRange.half_open(b"k01000", b"k01010")
    flaky = FlakyObjectStore(store)
    [task] = build_tasks(spec, views, [rng], TaskOptions(
        store.spec, ROOT, spec.l0_views[0].id, SMALL, 1 << 30, None, 4, 1 << 20, NOW_MS))
    result = execute_compaction_task(replace(task, bytes_to_fetch=1), store=flaky)
    reads = [p for op, p in flaky.log if op == "get_range"]
    # the index, then one ranged get per block (bytes_to_fetch=1) of the ~4 blocks that can
    # hold the 10 keys of the range, out of 600 blocks
    assert result.metrics.ssts_in == 1 and result.metrics.bytes_in < 8 * 256
    assert 2 <= len(reads) <= 6
    assert result.metrics.rows_out == 10
    out = parse_sst(store.get(DbPaths(ROOT).compacted(result.outputs[0].id))).rows()
    assert [r[0] for r in out] == [b"k%05d" % i for i in range(1000, 1010)]


def test_outputs_use_the_configured_codec_filter_and_stats(store: ObjectStore) -> None:
    new_db(store, ROOT)
    random_l0s(store, random.Random(3), l0s=2)
    s = replace(settings(), sst=SstSettings(block_size=512, compression_codec="zstd",
                                            min_filter_keys=50))
    run_compaction(ROOT, store, settings=s, parallelism=1)
    [(h, rows)] = output_ssts(store)
    assert h.info.compression == CompressionCodec.ZSTD  # type: ignore[attr-defined]
    assert h.info.filter_len > 0 and h.info.stats_len > 0  # type: ignore[attr-defined]
    assert h.format_version == 2  # type: ignore[attr-defined]
    parsed = parse_sst(store.get(DbPaths(ROOT).compacted(h.id)))  # type: ignore[attr-defined]
    assert parsed.stats.num_puts == len(rows)  # type: ignore[union-attr]
    bf = parsed.bloom_filter()
    assert bf is not None and all(bf.might_contain(r[0]) for r in rows)


def test_small_outputs_get_no_bloom_filter_below_min_filter_keys(store: ObjectStore) -> None:
    new_db(store, ROOT)
    flush_l0(store, ROOT, [(b"a", 1, VALUE, b"1", None, NOW_MS)])
    run_compaction(ROOT, store, settings=settings(), parallelism=1)
    [(h, _)] = output_ssts(store)
    assert h.info.filter_len == 0  # type: ignore[attr-defined]


def test_v1_input_ssts_are_compacted(store: ObjectStore) -> None:
    new_db(store, ROOT)
    v1 = SstWriterOptions(block_size=256, format_version=1, min_filter_keys=4)
    flush_l0(store, ROOT, [(b"a", 1, VALUE, b"old", None, NOW_MS)], options=v1)
    flush_l0(store, ROOT, [(b"a", 2, VALUE, b"new", None, NOW_MS),
                           (b"b", 2, VALUE, b"b", None, NOW_MS)], options=v1)
    run_compaction(ROOT, store, settings=settings(), parallelism=1)
    assert [(r[0], r[3]) for _, rs in output_ssts(store) for r in rs] == \
        [(b"a", b"new"), (b"b", b"b")]


def test_merge_operator_from_settings_folds_operands(store: ObjectStore) -> None:
    new_db(store, ROOT)
    flush_l0(store, ROOT, [(b"m", 1, VALUE, b"a", None, NOW_MS)])
    flush_l0(store, ROOT, [(b"m", 2, MERGE, b"b", None, NOW_MS)])
    flush_l0(store, ROOT, [(b"m", 3, MERGE, b"c", None, NOW_MS)])
    run_compaction(ROOT, store, settings=settings(merge_operator="concat"), parallelism=1)
    assert [r[:4] for _, rs in output_ssts(store) for r in rs] == [(b"m", 3, VALUE, b"abc")]
    assert scan(store, "concat") == {b"m": b"abc"}


def test_without_merge_operator_operands_stay_unfolded(store: ObjectStore) -> None:
    new_db(store, ROOT)
    flush_l0(store, ROOT, [(b"m", 2, MERGE, b"b", None, NOW_MS)])
    flush_l0(store, ROOT, [(b"m", 3, MERGE, b"c", None, NOW_MS)])
    run_compaction(ROOT, store, settings=settings(), parallelism=1)
    assert [r[1:4] for _, rs in output_ssts(store) for r in rs] == \
        [(3, MERGE, b"c"), (2, MERGE, b"b")]
    assert scan(store, "concat") == {b"m": b"bc"}


class Upper:
    """A merge operator loadable as ``tests.unit.ops.engine.test_execute:Upper``."""

    def merge(self, key: bytes, existing: bytes | None, operand: bytes) -> bytes:
        return (existing or b"") + operand.upper()


def test_merge_operator_can_be_loaded_by_import_path() -> None:
    op = load_merge_operator("tests.unit.ops.engine.test_execute:Upper")
    assert op is not None and op.merge(b"k", b"a", b"b") == b"aB"
    with pytest.raises(Exception, match="cannot load merge operator"):
        load_merge_operator("tests.nothing_here:Nope")


def test_ttl_rows_expire_by_the_last_flush_clock(store: ObjectStore) -> None:
    new_db(store, ROOT)
    flush_l0(store, ROOT, [(b"gone", 1, VALUE, b"x", NOW_MS - 1, NOW_MS),
                           (b"kept", 1, VALUE, b"y", NOW_MS + 1, NOW_MS)])
    run_compaction(ROOT, store, settings=settings(), parallelism=1)
    assert [r[0] for _, rs in output_ssts(store) for r in rs] == [b"kept"]


def test_output_ulids_are_never_older_than_the_compaction(store: ObjectStore) -> None:
    new_db(store, ROOT)
    random_l0s(store, random.Random(4), l0s=2)
    lagging = FakeClock(NOW_MS - 3_600_000)  # an executor whose clock is an hour behind
    report = run_compaction(
        ROOT, store, settings=settings(), parallelism=2, clock=FakeClock(NOW_MS),
        runner=ThreadTaskRunner(2, partial(run_compaction_task, clock=lagging)))
    m = ManifestStore(store, ROOT).read_latest().value
    outputs = [v.sst_id for run in m.compacted for v in run.views]
    assert outputs and all(ulid_time_ms(i) >= NOW_MS for i in outputs)
    assert report.status == "committed"


def test_a_corrupted_block_fails_the_task_naming_object_and_block(store: ObjectStore) -> None:
    new_db(store, ROOT)
    view = flush_l0(store, ROOT, [(b"k%04d" % i, 1, VALUE, b"v" * 20, None, NOW_MS)
                                  for i in range(100)])
    path = DbPaths(ROOT).compacted(view.sst_id)
    data = bytearray(store.get(path))
    data[300] ^= 0xFF  # inside block 1 (256-byte blocks)
    store.delete(path)
    store.put(path, bytes(data))
    m = ManifestStore(store, ROOT).read_latest().value
    spec = plan_compaction(m, None, PlanOptions(Policy.L0))
    views = input_views(spec, m, TableStore(store, ROOT))
    [task] = build_tasks(spec, views, [BytesRange.all()], TaskOptions(
        store.spec, ROOT, spec.l0_views[0].id, SMALL, 1 << 30, None, 4, 1 << 20, NOW_MS))
    with pytest.raises(ChecksumMismatchError) as err:
        execute_compaction_task(task, store=store)
    assert err.value.path == path and err.value.block == 1
    failure = run_compaction_task(task, store=store)
    raised = failure.to_error()  # type: ignore[union-attr]
    assert isinstance(raised, CorruptObjectError) and not failure.retryable  # type: ignore[union-attr]
    assert raised.path == path and raised.block == 1  # type: ignore[attr-defined]


def test_sorted_run_sources_are_merged_with_l0(store: ObjectStore) -> None:
    new_db(store, ROOT)
    add_run(store, ROOT, 0, [[(b"a", 1, VALUE, b"run", None, NOW_MS),
                              (b"b", 1, VALUE, b"run", None, NOW_MS)],
                             [(b"c", 1, VALUE, b"run", None, NOW_MS)]])
    flush_l0(store, ROOT, [(b"b", 2, TOMBSTONE, b"", None, NOW_MS),
                           (b"c", 2, VALUE, b"l0", None, NOW_MS)])
    report = run_compaction(ROOT, store, settings=settings(), policy="full", parallelism=2)
    assert report.destination == 0 and report.bottom
    assert [(r[0], r[3]) for _, rs in output_ssts(store) for r in rs] == \
        [(b"a", b"run"), (b"c", b"l0")]
    m = ManifestStore(store, ROOT).read_latest().value
    assert m.l0 == () and [r.id for r in m.compacted] == [0]
    assert isinstance(m.compacted[0], SortedRun)


def test_input_buffers_stay_bounded_however_many_sources() -> None:
    from slatelib.ops.engine import input_buffers
    from slatelib.ops.engine._execute import INPUT_BUFFER_BYTES

    assert input_buffers(10, 4, 2 << 20) == (4, 2 << 20)  # 0.17's defaults fit
    for sources in (1, 10, 50, 200, 5000):
        prefetch, fetch = input_buffers(sources, 4, 2 << 20)
        assert prefetch >= 1 and fetch >= 64 * 1024
        assert sources * prefetch * fetch <= max(INPUT_BUFFER_BYTES, sources * 64 * 1024)


def test_rows_outside_a_visible_range_neither_survive_nor_shadow(store: ObjectStore) -> None:
    new_db(store, ROOT)
    add_run(store, ROOT, 0, [[(b"k%03d" % i, 1, VALUE, b"run", None, NOW_MS)
                              for i in range(0, 60, 10)]])
    deletes = [(b"k%03d" % i, 2, TOMBSTONE, b"", None, NOW_MS) for i in range(0, 60, 10)]
    view = flush_l0(store, ROOT, deletes)
    projected = SstView(view.id, view.sst_id, BytesRange.half_open(b"k020", b"k040"))

    def project(cur: object) -> Manifest:
        return cur.value.with_trees(l0=[projected])  # type: ignore[attr-defined, no-any-return]

    update_versioned(ManifestStore(store, ROOT), project)
    before = scan(store)
    assert before == {b"k000": b"run", b"k010": b"run", b"k040": b"run", b"k050": b"run"}
    run_compaction(ROOT, store, settings=settings(), policy="full", parallelism=2)
    assert scan(store) == before


def test_task_failures_keep_their_kind_across_the_wire() -> None:
    import pickle

    from slatelib.errors import InternalError, SstMissingError, UnavailableError
    from slatelib.ops.engine import TaskFailure

    cases = [
        (UnavailableError("s3 timeout"), UnavailableError, True),
        (ChecksumMismatchError("bad", path="db/compacted/X.sst", block=7), ChecksumMismatchError,
         False),
        (SstMissingError("gone", path="db/compacted/Y.sst"), SstMissingError, False),
        (ZeroDivisionError("bug"), InternalError, False),
    ]
    for exc, kind, retryable in cases:
        failure = pickle.loads(pickle.dumps(TaskFailure.of(3, exc)))
        err = failure.to_error()
        assert type(err) is kind and failure.retryable == retryable
        assert "compaction task 3 failed" in str(err)
    err = TaskFailure.of(1, cases[1][0]).to_error()
    assert (err.path, err.block) == ("db/compacted/X.sst", 7)  # type: ignore[attr-defined]


@pytest.mark.parametrize("codec", [CompressionCodec.NONE, CompressionCodec.ZSTD])
@pytest.mark.parametrize("op", [None, "concat"])
def test_the_native_pipeline_writes_the_ssts_the_row_path_writes(
        store: ObjectStore, codec: int, op: str | None) -> None:
    """One task over L0s and a sorted run with TTLs, tombstones and merge operands, cut into
    several output SSTs and clipped to a range: the native pipeline (checked blocks, one
    native merge into the block writer) and the row path (decoded rows,
    ``retained_batches``, ``SstWriter.add_rows``) write the same rows with the same
    retention counters, in SSTs of at most ``max_sst_size`` plus one key that never split a
    key. (Where an SST is cut may differ: the row path cuts between chunks sized from the
    average row, the pipeline after fill steps.)"""
    new_db(store, ROOT)
    rng = random.Random(5)
    opts = replace(SMALL, codec=codec)
    add_run(store, ROOT, 0, [[(b"key%05d" % k, 1, VALUE, b"run%d" % k, None, NOW_MS)
                              for k in range(c, c + 500, 3)] for c in range(0, 3000, 500)],
            options=opts)
    for seq in range(2, 6):
        rows = []
        for k in sorted(rng.sample(range(3000), 700)):
            kind = rng.choice([VALUE, VALUE, TOMBSTONE, MERGE])
            exp = rng.choice([None, None, NOW_MS - 1, NOW_MS + 10**6])
            rows.append((b"key%05d" % k, seq, kind, b"" if kind == TOMBSTONE else
                         rng.randbytes(rng.randint(0, 60)), None if kind == TOMBSTONE else exp,
                         NOW_MS))
        flush_l0(store, ROOT, rows, options=opts, snapshot_min_seq=3)
    m = ManifestStore(store, ROOT).read_latest().value
    spec = plan_compaction(m, None, PlanOptions(Policy.FULL))
    views = input_views(spec, m, TableStore(store, ROOT))
    [task] = build_tasks(spec, views, [BytesRange.half_open(b"key00100", b"key02900")],
                         TaskOptions(store.spec, ROOT, spec.l0_views[0].id, opts, 9000, op, 4,
                                     1 << 12, NOW_MS))

    def run(native_pipe: bool) -> tuple[list[list[Row]], dict[str, int]]:
        result = execute_compaction_task(task, store=store, clock=FakeClock(NOW_MS),
                                         use_native_pipe=native_pipe)
        ssts = [parse_sst(store.get(DbPaths(ROOT).compacted(h.id)), info=h.info)
                for h in result.outputs]
        for sst in ssts:
            assert sst.info.compression == codec
            assert sst.info.index_offset - sst.info.filter_len <= 9000 + 4 * 256
        return [sst.rows() for sst in ssts], result.metrics.retention

    native_ssts, native_stats = run(True)
    rows_ssts, rows_stats = run(False)
    assert len(native_ssts) > 3
    assert [r for rows in native_ssts for r in rows] == [r for rows in rows_ssts for r in rows]
    for a, b in zip(native_ssts, native_ssts[1:], strict=False):
        assert a[-1][0] < b[0][0], "a key's versions straddle two output SSTs"
    assert native_stats == rows_stats and native_stats["rows_in"] > 2000


def test_the_cyclic_collector_is_held_off_while_tasks_run_and_restored_after() -> None:
    import gc
    import threading

    from slatelib.ops.engine._execute import cyclic_gc_paused

    assert gc.isenabled()
    first_in, second_done = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other_task() -> None:
        with cyclic_gc_paused():
            first_in.wait(5)
            seen.append(gc.isenabled())
        second_done.set()

    t = threading.Thread(target=other_task)
    with cyclic_gc_paused():
        t.start()
        first_in.set()
        second_done.wait(5)
        seen.append(gc.isenabled())  # the other task ended first: still off for this one
    t.join()
    assert seen == [False, False]
    assert gc.isenabled()
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()  # off before: stays off
    finally:
        gc.enable()


def test_a_real_task_runs_with_the_collector_off(store: ObjectStore,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from slatelib.ops.engine import _execute

    new_db(store, ROOT)
    random_l0s(store, random.Random(3), l0s=2, keys=200, per=50)
    states: list[bool] = []
    real = _execute.native_pipeline_for

    def spy(*args: object, **kwargs: object) -> object:
        states.append(gc.isenabled())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_execute, "native_pipeline_for", spy)
    report = run_compaction(ROOT, store, settings=settings(), runner=ThreadTaskRunner(1))
    assert report.status == "committed" and states and not any(states)
    assert gc.isenabled()
