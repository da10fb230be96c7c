#!/usr/bin/env python3
"""Generate small SlateDB databases with the official `slatedb` 0.17.0 package.

Run with a Python that has `slatedb==0.17.0` installed:

    python make_fixtures.py            # (re)build every fixture next to this file
    python make_fixtures.py basic ttl_merge   # only some

Every database lives in a folder next to this script and is created through an
object store rooted at THIS folder (a prefixed local file system), so the
database "paths" are bare names such as `basic` and the clone's reference to
its source is the relative path `ckpt_src`.  To open a fixture, build a local
store rooted at the fixtures folder (see `fixture_store()`), or copy the whole
folder somewhere and root the store there.  Opening a fixture with the official
DbReader or Db WRITES to it (new manifest, a checkpoint, a WAL fence):
always work on a copy.

What is deterministic: keys, values, write batches, flush points, compaction
inputs, sequence numbers, TTL expire timestamps (EXPIRE_AT), the SST/WAL
layout.  What is not: ULIDs, UUIDs, create timestamps (wall clock), and the
number of manifest/compactions versions written by background tasks.

For every fixture NAME the script writes NAME.expected.json (ground truth:
live keys with their values, deleted keys, expired keys) and README.md.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys

from slatedb.uniffi import (
    AdminBuilder,
    CheckpointOptions,
    CloneSourceSpec,
    CloseOptions,
    CompactionSpec,
    DbBuilder,
    FlushOptions,
    FlushType,
    GarbageCollectorDirectoryOptions,
    GarbageCollectorOptions,
    GarbageCollectorScheduleOptions,
    KeyRange,
    MergeOperator,
    MergeOptions,
    ObjectStoreBuilder,
    ObjectStoreType,
    PrefixExtractor,
    PutOptions,
    Settings,
    SourceId,
    SstBlockSize,
    Ttl,
    WriteBatch,
    WriteOptions,
)

HERE = os.path.dirname(os.path.abspath(__file__))
FAR_FUTURE_MS = 4102444800000     # 2100-01-01T00:00:00Z
LONG_AGO_MS = 946684800000        # 2000-01-01T00:00:00Z


def fixture_store(root=HERE):
    b = ObjectStoreBuilder.from_env(ObjectStoreType.LOCAL)
    b.with_config("local_path", root)
    return b.build()


class Concat(MergeOperator):
    """Merge operator used by the ttl_merge fixture: existing ++ operand."""

    def merge(self, key, existing_value, operand):
        return (existing_value or b"") + operand


class Fixed4(PrefixExtractor):
    """Segment extractor used by the `segmented` fixture: first 4 bytes."""

    def name(self):
        return "fixed4"

    def prefix_len(self, target):
        data = target.key if target.is_point() else target.prefix
        return 4 if len(data) >= 4 else None


def settings(codec=None, min_filter_keys=1, compactor=True):
    st = Settings.default()
    st.set("flush_interval", "null")          # WAL flushes only when asked
    st.set("min_filter_keys", json.dumps(min_filter_keys))
    if codec:
        st.set("compression_codec", json.dumps(codec))
    co = json.loads(Settings.default().to_json_string())["compactor_options"]
    if compactor:
        co["poll_interval"] = "100ms"
        # never compact on its own: compactions are submitted explicitly
        co["scheduler_options"] = {"min_compaction_sources": "1000",
                                   "max_compaction_sources": "1000"}
        co["worker"]["compactions_poll_interval"] = "100ms"
        co["worker"]["min_filter_keys"] = min_filter_keys
        co["worker"]["compression_codec"] = codec
        st.set("compactor_options", json.dumps(co))
    else:
        st.set("compactor_options", "null")
    return st


class Model:
    """What a reader must see: key -> value bytes, or None when deleted."""

    def __init__(self):
        self.kv = {}
        self.expired = set()

    def put(self, k, v):
        self.kv[k] = v
        self.expired.discard(k)

    def delete(self, k):
        self.kv[k] = None
        self.expired.discard(k)

    def merge(self, k, op):
        cur = self.kv.get(k)
        self.kv[k] = (cur or b"") + op
        self.expired.discard(k)

    def expire(self, k):
        self.kv[k] = None
        self.expired.add(k)


async def open_db(name, st, block=SstBlockSize.BLOCK1_KIB, merge=None, extractor=None):
    b = DbBuilder(name, fixture_store())
    b.with_settings(st)
    b.with_seed(20260517)
    if block is not None:
        b.with_sst_block_size(block)
    if merge is not None:
        b.with_merge_operator(merge)
    if extractor is not None:
        b.with_segment_extractor(extractor)
    return await b.build()


async def write(db, model, ops):
    """ops: list of ('put'|'del'|'merge', key, value) applied as ONE batch (one seq)."""
    wb = WriteBatch()
    for op, k, v in ops:
        if op == "put":
            wb.put(k, v)
            model.put(k, v)
        elif op == "del":
            wb.delete(k)
            model.delete(k)
        elif op == "merge":
            wb.merge(k, v)
            model.merge(k, v)
    await db.write(wb)


async def flush(db, kind):
    await db.flush_with_options(FlushOptions(
        flush_type=FlushType.MEM_TABLE if kind == "memtable" else FlushType.WAL))


async def compact_all_l0(name, destination=0, include_srs=()):
    """Submit a tiered compaction of every current L0 view (+ given SRs) and wait."""
    admin = AdminBuilder(name, fixture_store()).build()
    m = await admin.read_manifest(None)
    sources = [SourceId.SST_VIEW(v.id) for v in m.l0] + [SourceId.SORTED_RUN(i) for i in include_srs]
    spec = CompactionSpec.TIERED(segment=b"", sources=sources, destination=destination)
    await admin.submit_compaction(spec)
    for _ in range(300):
        m = await admin.read_manifest(None)
        if not m.l0 and any(sr.id == destination for sr in m.compacted):
            return m
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{name}: compaction did not finish")


def k(prefix, i, width=4):
    return f"{prefix}{i:0{width}d}".encode()


def reset(name):
    shutil.rmtree(os.path.join(HERE, name), ignore_errors=True)


# ---------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------

async def make_basic(name="basic", codec=None, big_value=True):
    """WAL SSTs, five L0 SSTs (two after the compaction), one sorted run,
    deletes, overwrites, a tombstone shadowing sorted-run data, WAL-only rows."""
    reset(name)
    m = Model()
    db = await open_db(name, settings(codec=codec))
    # L0 #1 (seq 1)
    await write(db, m, [("put", k("key:", i), f"a-{i}".encode()) for i in range(120)])
    await flush(db, "memtable")
    # L0 #2 (seq 2): overwrite 0..29, delete 100..109
    await write(db, m, [("put", k("key:", i), f"b-{i}".encode()) for i in range(30)]
                + [("del", k("key:", i), None) for i in range(100, 110)])
    await flush(db, "memtable")
    # L0 #3 (seq 3)
    await write(db, m, [("put", k("key:", i), f"c-{i}".encode()) for i in range(120, 200)])
    await flush(db, "memtable")
    await db.shutdown_with_options(CloseOptions(flush_type=None))
    # sorted run 0 <- the three L0s (compactor of a reopened writer)
    db = await open_db(name, settings(codec=codec))
    await compact_all_l0(name, destination=0)
    # L0 #4 (seq 4..): individual writes, then a batch
    await db.put(k("key:", 300), b"single-300")
    await db.delete(k("key:", 0))
    m.put(k("key:", 300), b"single-300")
    m.delete(k("key:", 0))
    await write(db, m, [("put", k("key:", i), f"d-{i}".encode()) for i in range(1, 10)]
                + [("del", k("key:", i), None) for i in range(30, 40)]
                + [("put", k("key:", i), f"d-{i}".encode()) for i in range(200, 250)])
    await flush(db, "memtable")
    # L0 #5
    await write(db, m, [("del", k("key:", i), None) for i in range(200, 205)]
                + [("put", k("key:", i), f"e-{i}".encode()) for i in range(10, 15)])
    await flush(db, "memtable")
    # WAL only (two WAL SSTs), never flushed to L0
    ops = [("put", k("key:", i), f"f-{i}".encode()) for i in range(250, 260)]
    ops += [("put", k("key:", 15), b"f-15"), ("del", k("key:", 16), None)]
    if big_value:
        ops.append(("put", b"big:0001", b"0123456789" * 7000))   # 70000 bytes: own WAL block
    await write(db, m, ops)
    await flush(db, "wal")
    await write(db, m, [("put", k("key:", 15), b"g-15"), ("del", k("key:", 250), None)])
    await flush(db, "wal")
    await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))
    return m, {"merge_operator": None, "segment_extractor": None,
               "layout": "sorted run 0 (from 3 L0s), 2 L0 SSTs, 2 WAL-only WAL SSTs, "
                         "1 KiB blocks, bloom filters on every compacted SST" +
                         (f", codec {codec}" if codec else "")}


async def make_codec(codec):
    name = f"codec_{codec.lower()}"
    reset(name)
    m = Model()
    db = await open_db(name, settings(codec=codec))
    await write(db, m, [("put", k("c:", i), (f"value-{i}-" * 4).encode()) for i in range(80)])
    await flush(db, "memtable")
    await write(db, m, [("put", k("c:", i), f"over-{i}".encode()) for i in range(0, 80, 3)]
                + [("del", k("c:", i), None) for i in range(70, 75)])
    await flush(db, "memtable")
    await db.shutdown_with_options(CloseOptions(flush_type=None))
    db = await open_db(name, settings(codec=codec))
    await compact_all_l0(name, destination=0)
    await write(db, m, [("put", k("c:", i), f"l0-{i}".encode()) for i in range(40, 50)]
                + [("del", k("c:", i), None) for i in range(50, 55)])
    await flush(db, "memtable")
    await write(db, m, [("put", k("c:", i), f"wal-{i}".encode()) for i in range(100, 110)]
                + [("del", k("c:", 1), None)])
    await flush(db, "wal")
    await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))
    return m, {"merge_operator": None, "segment_extractor": None,
               "layout": f"codec {codec}: sorted run 0, 1 L0, 1 WAL-only WAL SST"}


async def make_checkpoint_and_clones():
    for n in ("ckpt_src", "ckpt_clone", "ckpt_clone_proj"):
        reset(n)
    src = Model()
    db = await open_db("ckpt_src", settings())
    await write(db, src, [("put", k("key:", i), f"a-{i}".encode()) for i in range(60)])
    await flush(db, "memtable")
    await write(db, src, [("put", k("key:", i), f"b-{i}".encode()) for i in range(10)]
                + [("del", k("key:", i), None) for i in range(50, 55)])
    await flush(db, "memtable")
    # WAL-only rows that the checkpoint must still cover
    await write(db, src, [("put", k("key:", i), f"w-{i}".encode()) for i in range(55, 58)])
    await flush(db, "wal")
    await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))
    at_checkpoint = Model()
    at_checkpoint.kv = dict(src.kv)
    admin = AdminBuilder("ckpt_src", fixture_store()).build()
    cp = await admin.create_detached_checkpoint(
        CheckpointOptions(lifetime_ms=None, source=None, name="fixture-ckpt"))
    # writes after the checkpoint: visible in ckpt_src, invisible in ckpt_clone
    db = await open_db("ckpt_src", settings())
    await write(db, src, [("put", k("key:", i), f"c-{i}".encode()) for i in range(5)]
                + [("put", k("key:", i), f"c-{i}".encode()) for i in range(60, 70)])
    # WAL first, then memtable: the L0 flush then covers every WAL written so far
    # (replay_after_wal_id == wal_id_last_seen), which a projected clone requires
    await flush(db, "wal")
    await flush(db, "memtable")
    await db.shutdown_with_options(CloseOptions(flush_type=None))
    # second checkpoint with everything flushed to L0 (projection needs a WAL-free source)
    at_flushed = Model()
    at_flushed.kv = dict(src.kv)
    cp2 = await admin.create_detached_checkpoint(
        CheckpointOptions(lifetime_ms=None, source=None, name="fixture-ckpt-flushed"))
    # one more WAL-only write in the source (after both checkpoints)
    db = await open_db("ckpt_src", settings())
    await write(db, src, [("put", k("key:", 70), b"after-both")])
    await flush(db, "wal")
    await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))

    # full clone of the checkpoint, then the clone writes on its own
    cadmin = AdminBuilder("ckpt_clone", fixture_store()).build()
    cb = cadmin.create_clone_builder_from_source(
        CloneSourceSpec(path="ckpt_src", checkpoint=cp.id, projection_range=None))
    await cb.build()
    clone = Model()
    clone.kv = dict(at_checkpoint.kv)
    db = await open_db("ckpt_clone", settings())
    await write(db, clone, [("put", k("clone:", i, 3), f"own-{i}".encode()) for i in range(10)]
                + [("put", k("key:", 1), b"clone-1"), ("del", k("key:", 2), None)])
    await flush(db, "memtable")
    await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))

    # projected clone: only keys in [key:0010, key:0040)
    padmin = AdminBuilder("ckpt_clone_proj", fixture_store()).build()
    rng = KeyRange(start=b"key:0010", start_inclusive=True, end=b"key:0040", end_inclusive=False)
    pb = padmin.create_clone_builder_from_source(
        CloneSourceSpec(path="ckpt_src", checkpoint=cp2.id, projection_range=rng))
    await pb.build()
    proj = Model()
    proj.kv = {kk: vv for kk, vv in at_flushed.kv.items() if b"key:0010" <= kk < b"key:0040"}

    meta_src = {"merge_operator": None, "segment_extractor": None,
                "checkpoints": [{"name": "fixture-ckpt", "id": cp.id, "manifest_id": cp.manifest_id},
                                {"name": "fixture-ckpt-flushed", "id": cp2.id,
                                 "manifest_id": cp2.manifest_id}],
                "layout": "2 L0s + WAL rows before checkpoint fixture-ckpt, 1 more L0, then "
                          "checkpoint fixture-ckpt-flushed, then 1 WAL-only row"}
    meta_clone = {"merge_operator": None, "segment_extractor": None,
                  "layout": "clone of ckpt_src@fixture-ckpt (external_dbs -> 'ckpt_src'), "
                            "plus one L0 of its own"}
    meta_proj = {"merge_operator": None, "segment_extractor": None,
                 "projection_range": "[key:0010, key:0040)",
                 "layout": "clone of ckpt_src@fixture-ckpt-flushed restricted by visible_range"}
    return [("ckpt_src", src, meta_src), ("ckpt_clone", clone, meta_clone),
            ("ckpt_clone_proj", proj, meta_proj)]


async def make_ttl_merge(name="ttl_merge"):
    reset(name)
    m = Model()
    db = await open_db(name, settings(), merge=Concat())
    wo = WriteOptions()
    # TTL rows (expire_ts is deterministic with EXPIRE_AT)
    for i in range(5):
        await db.put_with_options(k("ttl:live:", i, 2), f"L{i}".encode(),
                                  PutOptions(ttl=Ttl.EXPIRE_AT_MILLIS(FAR_FUTURE_MS)), wo)
        m.put(k("ttl:live:", i, 2), f"L{i}".encode())
        await db.put_with_options(k("ttl:dead:", i, 2), f"D{i}".encode(),
                                  PutOptions(ttl=Ttl.EXPIRE_AT_MILLIS(LONG_AGO_MS)), wo)
        m.expire(k("ttl:dead:", i, 2))
    # merge chains: base value then operands spread over L0, L0, sorted run, WAL
    await write(db, m, [("put", k("m:", i, 2), b"base") for i in range(5)]
                + [("merge", b"m:nobase", b"x")])
    await write(db, m, [("merge", k("m:", i, 2), b"+1") for i in range(5)])
    await flush(db, "memtable")
    await write(db, m, [("merge", k("m:", i, 2), b"+2") for i in range(5)]
                + [("merge", b"m:nobase", b"y"), ("put", b"m:del", b"base")])
    await flush(db, "memtable")
    await db.shutdown_with_options(CloseOptions(flush_type=None))
    db = await open_db(name, settings(), merge=Concat())
    await compact_all_l0(name, destination=0)
    await write(db, m, [("merge", k("m:", i, 2), b"+3") for i in range(5)]
                + [("del", b"m:del", None)])
    await flush(db, "memtable")
    await write(db, m, [("merge", b"m:del", b"z"), ("merge", k("m:", 0, 2), b"+4")])
    await db.merge_with_options(b"m:ttl", b"t", MergeOptions(ttl=Ttl.EXPIRE_AT_MILLIS(FAR_FUTURE_MS)), wo)
    m.merge(b"m:ttl", b"t")
    # TTL rows that live only in the WAL
    await db.put_with_options(b"ttl:wal:live", b"WL", PutOptions(ttl=Ttl.EXPIRE_AT_MILLIS(FAR_FUTURE_MS)), wo)
    m.put(b"ttl:wal:live", b"WL")
    await db.put_with_options(b"ttl:wal:dead", b"WD", PutOptions(ttl=Ttl.EXPIRE_AT_MILLIS(LONG_AGO_MS)), wo)
    # 0.17.0 applies TTL only when a flush/compaction rewrites a row: this row is
    # already expired but lives only in the WAL, so Db.get / DbReader.get return it.
    m.put(b"ttl:wal:dead", b"WD")
    await flush(db, "wal")
    await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))
    return m, {"merge_operator": "concat: existing (or empty) ++ operand",
               "segment_extractor": None,
               "expired_but_readable": ["ttl:wal:dead"],
               "ttl_note": "0.17.0 never hides expired rows at read time; ttl:dead:* were "
                           "rewritten as tombstones by the L0 flush (expire_ts < flush time), "
                           "ttl:wal:dead is still a WAL row with expire_ts=2000-01-01 and is "
                           "returned by the official Db/DbReader",
               "layout": "TTL rows (EXPIRE_AT 2100-01-01 live / 2000-01-01 expired), merge chains "
                         "across sorted run, L0 and WAL"}


async def make_segmented(name="segmented"):
    reset(name)
    m = Model()
    ex = Fixed4()
    db = await open_db(name, settings(), extractor=ex)
    await write(db, m, [("put", f"usr:{i:03d}".encode(), f"u{i}".encode()) for i in range(30)]
                + [("put", f"ord:{i:03d}".encode(), f"o{i}".encode()) for i in range(20)])
    await flush(db, "memtable")
    await write(db, m, [("put", f"usr:{i:03d}".encode(), f"u2-{i}".encode()) for i in range(5)]
                + [("del", f"ord:{i:03d}".encode(), None) for i in range(5)]
                + [("put", f"inv:{i:03d}".encode(), f"i{i}".encode()) for i in range(10)])
    await flush(db, "memtable")
    await write(db, m, [("put", b"usr:999", b"wal-only")])
    await flush(db, "wal")
    await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))
    return m, {"merge_operator": None, "segment_extractor": "fixed4 (first 4 bytes of the key)",
               "layout": "segments usr:, ord:, inv: (SlateDB RFC-0024), 2 flushes, 1 WAL-only row"}


async def make_default_settings(name="default_settings"):
    """Default Settings (4 KiB blocks, min_filter_keys 1000 -> no bloom filter)."""
    reset(name)
    m = Model()
    st = Settings.default()
    st.set("flush_interval", "null")
    st.set("compactor_options", "null")
    b = DbBuilder(name, fixture_store())
    b.with_settings(st)
    db = await b.build()
    await write(db, m, [("put", k("d:", i), (f"default-{i}-" * 3).encode()) for i in range(300)])
    await flush(db, "memtable")
    await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))
    return m, {"merge_operator": None, "segment_extractor": None,
               "layout": "one L0 SST, 4 KiB blocks, NO filter block (300 rows < min_filter_keys 1000), "
                         "no compactor (no compactions/ folder)"}


async def make_gc(name="gc_collected"):
    reset(name)
    m = Model()
    db = await open_db(name, settings())
    for r in range(3):
        await write(db, m, [("put", k("g:", i), f"r{r}-{i}".encode()) for i in range(r * 10, r * 10 + 20)])
        await flush(db, "memtable")
    await db.shutdown_with_options(CloseOptions(flush_type=None))
    db = await open_db(name, settings())
    await compact_all_l0(name, destination=0)
    await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))
    admin = AdminBuilder(name, fixture_store()).build()
    d = GarbageCollectorDirectoryOptions(interval_ms=None, min_age_ms=0, dry_run=False)
    await admin.run_gc_once(GarbageCollectorOptions(
        manifest_options=d, wal_options=d, wal_fence_options=d, compacted_options=d,
        compactions_options=d, detach_options=GarbageCollectorScheduleOptions(interval_ms=None),
        disable_boundary_files=False))
    return m, {"merge_operator": None, "segment_extractor": None,
               "layout": "after run_gc_once(min_age 0): old manifests/WALs/SSTs/compactions deleted, "
                         "gc/*.boundary files present, manifest ids do not start at 1"}


async def make_seq_tracker(name="seq_tracker"):
    """Four memtable flushes about 61 s apart, so the manifest's sequence tracker
    (one sample per 60 s at most) holds several pairs. Takes ~3 minutes."""
    reset(name)
    m = Model()
    st = Settings.default()
    st.set("flush_interval", "null")
    st.set("compactor_options", "null")
    b = DbBuilder(name, fixture_store())
    b.with_settings(st)
    db = await b.build()
    for r in range(4):
        await write(db, m, [("put", f"k{r}-{i:03d}".encode(), b"v") for i in range(10 + r * 50)])
        for j in range(r * 37):
            await db.put(f"x{r}-{j:03d}".encode(), b"y")
            m.put(f"x{r}-{j:03d}".encode(), b"y")
        await flush(db, "memtable")
        if r < 3:
            await asyncio.sleep(61)
    await db.shutdown_with_options(CloseOptions(flush_type=FlushType.WAL))
    return m, {"merge_operator": None, "segment_extractor": None,
               "layout": "4 L0 SSTs flushed ~61 s apart; manifest sequence_tracker has 4 pairs "
                         "(exercises the Gorilla delta-of-delta encoding)"}


# ---------------------------------------------------------------------------

def tree_summary(name):
    """File counts for the README (computed from the directory itself)."""
    root = os.path.join(HERE, name)
    out = {}
    for sub in ("manifest", "wal", "compacted", "compactions", "gc"):
        p = os.path.join(root, sub)
        out[sub] = sorted(os.listdir(p)) if os.path.isdir(p) else []
    return out


def dump_expected(name, model, meta):
    live = {kk.decode(): vv.decode() for kk, vv in sorted(model.kv.items()) if vv is not None}
    deleted = sorted(kk.decode() for kk, vv in model.kv.items() if vv is None and kk not in model.expired)
    expired = sorted(kk.decode() for kk in model.expired)
    doc = {"fixture": name, "store_root": "<the fixtures folder>", "db_path": name,
           **meta, "live": live, "deleted": deleted, "expired": expired,
           "files": tree_summary(name)}
    with open(os.path.join(HERE, f"{name}.expected.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
    return doc


DESCRIPTIONS = {
    "basic": """Settings: flush_interval=null (WAL written only on explicit flush), min_filter_keys=1
(every compacted SST has a bloom filter), 1 KiB blocks, embedded compactor that never
compacts on its own. Operations, in order (one write batch = one sequence number):
1. batch: put key:0000..key:0119 = "a-<i>"; memtable flush -> L0
2. batch: put key:0000..key:0029 = "b-<i>", delete key:0100..key:0109; memtable flush -> L0
3. batch: put key:0120..key:0199 = "c-<i>"; memtable flush -> L0; close (no flush)
4. reopen (writer_epoch 2, new WAL fence); compaction of the 3 L0 views -> sorted run 0
   (the bottom run drops the key:0100..0109 tombstones and all shadowed versions)
5. single put key:0300 = "single-300"; single delete key:0000; batch: put key:0001..key:0009 =
   "d-<i>", delete key:0030..key:0039 (tombstones over sorted-run values), put
   key:0200..key:0249 = "d-<i>"; memtable flush -> L0
6. batch: delete key:0200..key:0204, put key:0010..key:0014 = "e-<i>"; memtable flush -> L0
7. batch (WAL only): put key:0250..key:0259 = "f-<i>", key:0015 = "f-15", delete key:0016,
   put big:0001 = "0123456789" x 7000 (70000 bytes; this WAL SST has 2 blocks); WAL flush
8. batch (WAL only): put key:0015 = "g-15", delete key:0250; WAL flush; close with WAL flush
Result: sorted run 0 (1 SST, 5 blocks), 2 L0 SSTs, WAL SSTs of which the last two hold
rows newer than the last L0 (replay_after_wal_id < their ids).""",
    "codec_snappy": "Same shape for every codec fixture (codec_snappy, codec_zlib, codec_lz4, codec_zstd): "
                    "compression_codec set for the writer and the compactor, so WAL SSTs, L0 SSTs and the "
                    "sorted-run SST are all compressed (data blocks, filter, index and stats blocks). "
                    "1 KiB blocks, bloom filters on.\n"
                    "1. batch: put c:0000..c:0079 = \"value-<i>-\" x 4; memtable flush -> L0\n"
                    "2. batch: put c:0000,c:0003,...,c:0078 (every 3rd) = \"over-<i>\", delete c:0070..c:0074; "
                    "memtable flush -> L0; close\n"
                    "3. reopen; compaction of both L0s -> sorted run 0\n"
                    "4. batch: put c:0040..c:0049 = \"l0-<i>\", delete c:0050..c:0054; memtable flush -> L0\n"
                    "5. batch (WAL only): put c:0100..c:0109 = \"wal-<i>\", delete c:0001; WAL flush; close",
    "ckpt_src": """Source of the checkpoint/clone fixtures.
1. batch: put key:0000..key:0059 = "a-<i>"; memtable flush
2. batch: put key:0000..key:0009 = "b-<i>", delete key:0050..key:0054; memtable flush
3. batch (WAL only): put key:0055..key:0057 = "w-<i>"; WAL flush; close
4. admin.create_detached_checkpoint(name="fixture-ckpt", no expiry)  -> state S1
5. reopen; batch: put key:0000..key:0004 = "c-<i>", put key:0060..key:0069 = "c-<i>";
   WAL flush then memtable flush (so replay_after_wal_id == wal_id_last_seen); close
6. create_detached_checkpoint(name="fixture-ckpt-flushed")  -> state S2
7. reopen; batch (WAL only): put key:0070 = "after-both"; close with WAL flush
The cloning below also added two unnamed "final" checkpoints (one per clone) to this
manifest. Expected values here are the latest state (everything above).""",
    "ckpt_clone": """Clone of ckpt_src at checkpoint "fixture-ckpt" (state S1), made with
Admin.create_clone_builder_from_source(CloneSourceSpec(path="ckpt_src", checkpoint=<id>)).
Its manifest has external_dbs = [{path: "ckpt_src", source_checkpoint_id, final_checkpoint_id,
sst_ids}], and the source's WAL SSTs in (replay_after_wal_id, wal_id_last_seen] were copied
into ckpt_clone/wal/. Then the clone itself wrote: batch put clone:000..clone:009 = "own-<i>",
put key:0001 = "clone-1", delete key:0002; memtable flush; close with WAL flush.
It does NOT see ckpt_src's later writes (c-*, key:0060.., after-both).""",
    "ckpt_clone_proj": """Projected clone of ckpt_src at "fixture-ckpt-flushed" (state S2) with
projection_range [key:0010, key:0040): every L0 view carries visible_range
{start: Included "key:0010", end: Excluded "key:0040"} and references ckpt_src's SSTs
(external_dbs). It has no compacted/ or wal/ data of its own. Only keys key:0010..key:0039
are visible.""",
    "ttl_merge": """Needs the merge operator "concat": result = (existing value or b"") + operand.
TTL rows use EXPIRE_AT so expire_ts is deterministic: 4102444800000 (2100-01-01, live) or
946684800000 (2000-01-01, already expired when written).
1. single puts: ttl:live:00..04 = "L<i>" (expire 2100), ttl:dead:00..04 = "D<i>" (expire 2000)
2. batch: put m:00..m:04 = "base", merge m:nobase "x"; batch: merge m:00..m:04 "+1";
   memtable flush (the flush rewrote ttl:dead:* as tombstones because they had expired)
3. batch: merge m:00..m:04 "+2", merge m:nobase "y", put m:del = "base"; memtable flush; close
4. reopen; compaction of both L0s -> sorted run 0 (operands folded: m:0i = "base+1+2" value,
   m:nobase stays a MERGE row "xy"; the dead tombstones were dropped)
5. batch: merge m:00..m:04 "+3", delete m:del; memtable flush -> L0
6. WAL only: batch merge m:del "z", merge m:00 "+4"; merge m:ttl "t" (expire 2100);
   put ttl:wal:live = "WL" (expire 2100); put ttl:wal:dead = "WD" (expire 2000); close with WAL flush
IMPORTANT: 0.17.0 does not hide expired rows at read time. ttl:wal:dead is expired but still
only a WAL row, and the official Db.get / DbReader.get / scan return "WD" for it. The
ttl:dead:* keys are gone because the L0 flush turned them into tombstones.""",
    "segmented": """Opened with a segment extractor named "fixed4" (prefix = first 4 bytes of the key;
every key must have >= 4 bytes). Manifest V2 has segment_extractor_name="fixed4", the
top-level l0/compacted are empty and `segments` holds one entry per prefix (inv:, ord:,
usr:), each with its own L0 list; every memtable flush writes one L0 SST per segment.
1. batch: put usr:000..usr:029 = "u<i>", ord:000..ord:019 = "o<i>"; memtable flush
2. batch: put usr:000..usr:004 = "u2-<i>", delete ord:000..ord:004, put inv:000..inv:009 = "i<i>";
   memtable flush
3. WAL only: put usr:999 = "wal-only"; close with WAL flush
Readers must be opened with a segment extractor of the same name and behaviour (fixed4: the
first 4 bytes of the key).""",
    "default_settings": """Default Settings except flush_interval=null and no compactor: 4 KiB blocks,
min_filter_keys = 1000, so the single L0 SST (300 rows) has NO filter block
(filter_len = 0, filter_offset = index_offset). One batch: put d:0000..d:0299 =
"default-<i>-" x 3; memtable flush; close. No compactions/ folder.""",
    "gc_collected": """Three batches (put g:0000..0019 "r0-<i>", g:0010..0029 "r1-<i>", g:0020..0039 "r2-<i>"),
each flushed to L0, compacted into sorted run 0, then Admin.run_gc_once with min_age 0 on every
directory. GC deleted old manifests, WAL SSTs and compactions files, and wrote
gc/manifest.boundary and gc/compactions.boundary (ASCII decimal ids, no newline). Manifest ids
present do not start at 1; the remaining older manifest is kept because a checkpoint
(created by the compactor, 900 s lifetime) points at it. Some L0 SSTs are still on disk
because that checkpoint's manifest references them.""",
}
DESCRIPTIONS["seq_tracker"] = """Default settings without compactor, flush_interval=null. Four rounds,
about 61 seconds apart (the tracker samples at most once per 60 s): batch put
k<r>-000..k<r>-<9+50r> = "v", then 37*r single puts x<r>-000.. = "y", memtable flush.
The latest manifest's sequence_tracker holds 4 (seq, unix-seconds) pairs, exercising the
Gorilla delta-of-delta encoding; sequence numbers are the first seq of each flushed memtable."""
DESCRIPTIONS["codec_zlib"] = DESCRIPTIONS["codec_lz4"] = DESCRIPTIONS["codec_zstd"] = \
    "Same as codec_snappy with this codec."


def ranges(keys):
    """Compress sorted keys like key:0100..key:0109 into ranges."""
    out = []
    import re
    run = []

    def flush():
        if not run:
            return
        out.append(run[0] if len(run) == 1 else f"{run[0]}..{run[-1]}")
    prev = None
    for kk in keys:
        m = re.match(r"^(.*?)(\d+)$", kk)
        if prev and m and prev[0] == m.group(1) and int(m.group(2)) == prev[1] + 1 \
                and len(m.group(2)) == prev[2]:
            run.append(kk)
        else:
            flush()
            run = [kk]
        prev = (m.group(1), int(m.group(2)), len(m.group(2))) if m else None
    flush()
    return out


def write_readme():
    names = sorted(f[:-len(".expected.json")] for f in os.listdir(HERE) if f.endswith(".expected.json"))
    lines = [README_HEAD]
    for n in names:
        d = json.load(open(os.path.join(HERE, f"{n}.expected.json")))
        lines.append(f"\n## {n}\n")
        lines.append(DESCRIPTIONS.get(n, d.get("layout", "")))
        lines.append("")
        lines.append(f"- layout: {d.get('layout')}")
        if d.get("merge_operator"):
            lines.append(f"- merge operator: {d['merge_operator']}")
        if d.get("segment_extractor"):
            lines.append(f"- segment extractor: {d['segment_extractor']}")
        if d.get("checkpoints"):
            for c in d["checkpoints"]:
                lines.append(f"- checkpoint {c['name']!r}: id {c['id']}, manifest {c['manifest_id']}")
        files = d["files"]
        lines.append("- files: " + ", ".join(f"{k}/ {len(v)}" for k, v in files.items() if v)
                     + f"; latest manifest {files['manifest'][-1] if files['manifest'] else None}")
        live = d["live"]
        lines.append(f"- live keys ({len(live)}): " + ", ".join(ranges(sorted(live))))
        samples = []
        for kk in sorted(live)[:3] + sorted(live)[-3:]:
            vv = live[kk]
            samples.append(f"{kk}={vv if len(vv) < 40 else vv[:20] + '...(' + str(len(vv)) + ' bytes)'}")
        lines.append("- sample values: " + ", ".join(dict.fromkeys(samples)))
        lines.append(f"- deleted keys ({len(d['deleted'])}): " + (", ".join(ranges(d["deleted"])) or "none"))
        lines.append(f"- expired keys ({len(d['expired'])}): " + (", ".join(ranges(d["expired"])) or "none"))
        if d.get("expired_but_readable"):
            lines.append(f"- expired but still returned by 0.17.0: {', '.join(d['expired_but_readable'])}")
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


README_HEAD = """# SlateDB 0.17.0 fixtures

| Fixture | What it exercises |
|---|---|
| basic | WAL SSTs, fences, 2 L0 SSTs, a sorted run, deletes, overwrites, tombstones over a sorted run, WAL-only rows, a 70000-byte value, 1 KiB blocks, bloom filters, a completed compaction in `compactions/` |
| codec_snappy, codec_zlib, codec_lz4, codec_zstd | the same small shape with each compression codec (WAL, L0 and sorted-run SSTs compressed) |
| ckpt_src | named checkpoints `fixture-ckpt` and `fixture-ckpt-flushed` (+ two unnamed final checkpoints of the clones) |
| ckpt_clone | clone of ckpt_src at `fixture-ckpt`: `external_dbs`, copied WAL objects, own writes |
| ckpt_clone_proj | projected clone: views with `visible_range` [key:0010, key:0040) |
| ttl_merge | TTL (expire_ts) rows, merge operands in WAL, L0 and sorted run (needs a concat merge operator) |
| segmented | segments (SlateDB RFC-0024) with a 4-byte prefix extractor named `fixed4` |
| default_settings | default settings: 4 KiB blocks, no filter block (< 1000 rows), no compactor |
| gc_collected | after garbage collection: `gc/*.boundary`, manifest ids not starting at 1 |
| seq_tracker | a manifest sequence tracker with 4 pairs |

Small databases written by the official `slatedb` 0.17.0 Python package (Rust core) with
`make_fixtures.py` (run it again to rebuild; it uses only the official package). They are
the ground truth for a byte-compatible re-implementation; the format itself is described in
`../spec/slatedb-format.md`.

How to open one:
- Every fixture was written through an object store rooted at THIS folder (a prefixed local
  file system, `ObjectStoreBuilder.from_env(ObjectStoreType.LOCAL)` +
  `with_config("local_path", <this folder>)`), and the database path is the bare folder name
  (`basic`, `ckpt_clone`, ...). Clones reference their source by that relative path
  (`external_dbs[].path == "ckpt_src"`), so keep the folders side by side and root the store
  at their parent.
- Opening a fixture with the official Db or DbReader writes to it (new manifest, checkpoint,
  WAL fence): copy the whole folder to a temp dir first.
- Not deterministic between runs: ULIDs (SST/view/compaction ids), checkpoint UUIDs, create
  timestamps, the exact number of manifest/compactions versions. Deterministic: keys, values,
  batch boundaries, sequence numbers, TTL expire timestamps, which rows sit in the WAL, L0 or
  the sorted run.
- `compacted/` may hold SSTs that the latest manifest no longer references (compaction
  inputs not yet garbage-collected); what is live is decided by the latest manifest only.
- Rebuilding takes about 4 minutes because `seq_tracker` sleeps between flushes; build single
  fixtures with `python make_fixtures.py basic ckpt ttl_merge ...`.
- `NAME.expected.json` holds the full ground truth: `live` (key -> value, as the official
  reader returns it), `deleted` (deleted by a tombstone; some tombstones were physically
  dropped by compaction), `expired` (TTL-expired and rewritten to tombstones by a flush), and
  the file listing at generation time. Keys and values are ASCII.
- What is NOT covered because 0.17.0 never writes it: V1 manifests, block format v1
  (SST format version 1), legacy (non-composite) filter blocks, WriterCheckpoint metadata.
  Write tests with an independent encoder showed that 0.17.0 still READS all of these
  (see format §13).

Checked with an independent decoder against the
official DbReader: every fixture decodes, every bloom filter is rebuilt bit-for-bit, every
manifest/compactions file/SST re-encodes byte-identically, and the decoder's latest values
equal both the official scan and NAME.expected.json.
"""


async def main(which):
    made = []
    if not which or "basic" in which:
        made.append(("basic", *await make_basic()))
    for codec in ("Snappy", "Zlib", "Lz4", "Zstd"):
        n = f"codec_{codec.lower()}"
        if not which or n in which or "codecs" in which:
            made.append((n, *await make_codec(codec)))
    if not which or "ckpt" in which:
        for n, mdl, meta in await make_checkpoint_and_clones():
            made.append((n, mdl, meta))
    if not which or "ttl_merge" in which:
        made.append(("ttl_merge", *await make_ttl_merge()))
    if not which or "segmented" in which:
        made.append(("segmented", *await make_segmented()))
    if not which or "default_settings" in which:
        made.append(("default_settings", *await make_default_settings()))
    if not which or "gc_collected" in which:
        made.append(("gc_collected", *await make_gc()))
    if not which or "seq_tracker" in which:
        made.append(("seq_tracker", *await make_seq_tracker()))
    for n, mdl, meta in made:
        doc = dump_expected(n, mdl, meta)
        print(f"{n}: {len(doc['live'])} live, {len(doc['deleted'])} deleted, "
              f"{len(doc['expired'])} expired; files: " +
              ", ".join(f"{s}={len(v)}" for s, v in doc["files"].items()))
    write_readme()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
