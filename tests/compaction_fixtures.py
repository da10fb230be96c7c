"""Test helpers for compaction suites: small databases built directly with slatelib's
codecs (a writer-style L0 flush), so unit tests need neither the official package nor the
slatelib writer.

``flush_l0`` does what a 0.17 memtable flush does to the manifest (format §11): one new L0 SST
of the given rows, prepended to ``l0`` as an identity view, with ``last_l0_seq``,
``last_l0_clock_tick`` and ``recent_snapshot_min_seq`` advanced.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from slatelib.core.manifest import Manifest, Segment, SortedRun, SstHandle, SstView
from slatelib.core.merge import MergeOperator, merge_sources, resolve_rows
from slatelib.core.row import Row, compacted_order_key
from slatelib.format.sst import SstWriter, SstWriterOptions
from slatelib.ids import UlidGenerator
from slatelib.objstore import ObjectStore
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sequenced import Versioned
from slatelib.store.table_store import TableStore
from slatelib.txn import update_versioned

NOW_MS = 1_750_000_000_000
_ids = UlidGenerator()
SMALL = SstWriterOptions(block_size=256, min_filter_keys=4)


def new_db(store: ObjectStore, root: str) -> None:
    ManifestStore(store, root).write(1, Manifest.initial())


def write_sst(store: ObjectStore, root: str, rows: Iterable[Row],
              options: SstWriterOptions = SMALL, now_ms: int = NOW_MS) -> SstHandle:
    ordered = sorted(rows, key=compacted_order_key)
    w = SstWriter(options)
    w.add_rows(ordered)
    enc = w.finish()
    sst_id = _ids.new(now_ms)
    TableStore(store, root).write_sst(sst_id, enc)
    return SstHandle(sst_id, enc.info, enc.format_version)


def flush_l0(store: ObjectStore, root: str, rows: Sequence[Row], *,
             options: SstWriterOptions = SMALL, now_ms: int = NOW_MS,
             snapshot_min_seq: int | None = None) -> SstView:
    """Write ``rows`` as a new L0 SST and add it to the manifest as a flush would."""
    handle = write_sst(store, root, rows, options, now_ms)
    view = SstView.identity(handle.id)
    top = max(r[1] for r in rows)

    def add(cur: Versioned[Manifest]) -> Manifest:
        m = cur.value.with_trees(l0=(view, *cur.value.l0), new_ssts=[handle])
        seq = max(m.last_l0_seq, top)
        return replace(m, last_l0_seq=seq, last_l0_clock_tick=max(m.last_l0_clock_tick, now_ms),
                       recent_snapshot_min_seq=seq if snapshot_min_seq is None
                       else snapshot_min_seq)

    update_versioned(ManifestStore(store, root), add)
    return view


def flush_segmented(store: ObjectStore, root: str, rows: Sequence[Row], *, prefix_len: int = 4,
                    options: SstWriterOptions = SMALL, now_ms: int = NOW_MS) -> list[SstView]:
    """A 0.17 memtable flush with a ``fixed<prefix_len>`` segment extractor (format
    §5.5.8): one L0 SST per segment the rows touch, each prepended to its segment's ``l0``
    (a new segment is added in prefix order), all in one manifest version."""
    groups: dict[bytes, list[Row]] = {}
    for r in rows:
        groups.setdefault(r[0][:prefix_len], []).append(r)
    written = {p: write_sst(store, root, rs, options, now_ms) for p, rs in sorted(groups.items())}
    top = max(r[1] for r in rows)

    def add(cur: Versioned[Manifest]) -> Manifest:
        m = cur.value
        segs = {s.prefix: s for s in m.segments or ()}
        for prefix, h in written.items():
            old = segs.get(prefix, Segment(prefix, None, (), ()))
            segs[prefix] = replace(old, l0=(SstView.identity(h.id), *old.l0))
        ssts = sorted((*m.ssts, *written.values()), key=lambda h: h.id)
        seq = max(m.last_l0_seq, top)
        return replace(m, segments=tuple(segs[p] for p in sorted(segs)), ssts=tuple(ssts),
                       segment_extractor_name=f"fixed{prefix_len}", last_l0_seq=seq,
                       last_l0_clock_tick=max(m.last_l0_clock_tick, now_ms),
                       recent_snapshot_min_seq=seq)

    update_versioned(ManifestStore(store, root), add)
    return [SstView.identity(h.id) for h in written.values()]


def add_run(store: ObjectStore, root: str, run_id: int, chunks: Sequence[Sequence[Row]], *,
            options: SstWriterOptions = SMALL, now_ms: int = NOW_MS) -> SortedRun:
    """Add a sorted run made of one SST per chunk (chunks in key order, disjoint)."""
    handles = [write_sst(store, root, c, options, now_ms) for c in chunks]
    run = SortedRun(run_id, tuple(SstView.identity(h.id) for h in handles))

    def add(cur: Versioned[Manifest]) -> Manifest:
        runs = sorted((*cur.value.compacted, run), key=lambda r: -r.id)
        m = cur.value.with_trees(compacted=runs, new_ssts=handles)
        top = max(r[1] for c in chunks for r in c)
        return replace(m, last_l0_seq=max(m.last_l0_seq, top))

    update_versioned(ManifestStore(store, root), add)
    return run


def visible(rows_by_source: Iterable[Iterable[Row]],
            merge_operator: MergeOperator | None = None) -> dict[bytes, bytes]:
    """What a reader sees given all versions (any order): the model of a database."""
    srcs = [sorted(rs, key=compacted_order_key) for rs in rows_by_source]
    return dict(resolve_rows(merge_sources(srcs), merge_operator))


# --------------------------------------------- a stand-in for a 0.17 coordinator (worker mode)
def schedule_compaction(store: ObjectStore, root: str, spec: Any = None) -> int:
    """What a 0.17 coordinator does before a worker can act: plan (every L0 view of the
    first tree that has some) and list the compaction Scheduled in ``compactions/``; or
    list ``spec`` (a compactions-file spec, e.g. a ``DrainSegmentSpec``). Returns its id."""
    from slatelib.clock import SYSTEM_CLOCK
    from slatelib.core.compaction_plan import PlanOptions, Policy, plan_compaction
    from slatelib.core.compactions import Compaction, Compactions, CompactionStatus
    from slatelib.store.compactions_store import CompactionsStore

    m = ManifestStore(store, root).read_latest().value
    cs = CompactionsStore(store, root)
    cur = cs.try_read_latest()
    if spec is None:
        planned = plan_compaction(m, None if cur is None else cur.value, PlanOptions(Policy.L0))
        assert planned is not None
        spec = planned.to_tiered()
    cid = _ids.new(SYSTEM_CLOCK.now_ms())
    entry = Compaction(id=cid, spec=spec, status=CompactionStatus.SCHEDULED)
    if cur is None:
        cs.write(1, Compactions(compactor_epoch=1, recent_compactions=(entry,)))
    else:
        update_versioned(cs, lambda c: replace(c.value, recent_compactions=(
            *c.value.recent_compactions, entry)))
    return int(cid)


def compaction_entry(store: ObjectStore, root: str, cid: int) -> Any:
    """The latest compactions file's entry ``cid``."""
    from slatelib.store.compactions_store import CompactionsStore

    c = CompactionsStore(store, root).read_latest().value.compaction(cid)
    assert c is not None
    return c


def commit_reported(store: ObjectStore, root: str, cid: int) -> None:
    """The coordinator's commit of a Compacted entry (the manifest CAS)."""
    from slatelib.clock import SYSTEM_CLOCK
    from slatelib.core.compaction_worker import spec_of
    from slatelib.core.compactions import CompactionStatus
    from slatelib.db_manifest import DbManifest
    from slatelib.ops.compaction.commit import commit_manifest

    c = compaction_entry(store, root, cid)
    assert c.status == CompactionStatus.COMPACTED
    ms = DbManifest(store, root)
    spec = spec_of(c, ms.read_latest().value)
    outs = [SstHandle(o.id, o.info, o.format_version) for o in c.output_ssts]
    commit_manifest(ms, [spec], [outs], epoch=ms.read_latest().value.compactor_epoch,
                    checkpoint_lifetime_s=60, clock=SYSTEM_CLOCK, timeout_s=30)
