"""Databases written by official 0.17.0 (compactor off), compacted by slatelib's job.

After our compaction the official ``DbReader`` returns exactly what it returned before, an
official writer reopens the database and keeps writing on top of our sorted run, official
``Admin.read_compactions`` lists our compaction, and a compacted clone can be detached from
its parent so that the parent's official GC releases the SSTs they shared.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.compaction_source import SourceId
from slatelib.objstore import open_store
from slatelib.ops.compaction import CompactionReport, ThreadTaskRunner, run_compaction
from slatelib.store.manifest_store import ManifestStore
from tests.interop.official import (
    CloneSource,
    CompactionStatus,
    Concat,
    DbSettings,
    Delete,
    FixedPrefix,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    clone,
    read_all,
    run,
)
from tests.interop.workload import absent_keys, key_pool, random_ops, write_layered

pytestmark = pytest.mark.interop

BLOCK = 1024
CODEC_NAMES = {None: "none", "Snappy": "snappy", "Zlib": "zlib", "Lz4": "lz4", "Zstd": "zstd"}


def compact(root: Path, path: str, *, codec: str | None = None, merge_operator: str | None = None,
            checkpoint_lifetime: float = 900.0, min_compaction_sources: int = 4,
            **kwargs: Any) -> CompactionReport:
    settings = Settings(
        sst=SstSettings(block_size=BLOCK, compression_codec=CODEC_NAMES[codec],
                        min_filter_keys=10),
        compaction=CompactionSettings(min_range_bytes=1, max_sst_size=16 * 1024,
                                      merge_operator=merge_operator,
                                      checkpoint_lifetime=checkpoint_lifetime,
                                      min_compaction_sources=min_compaction_sources),
    )
    kwargs.setdefault("parallelism", 3)
    # Most databases here were written by official writers with their embedded compactor on
    # (closed by now) or by the official standalone compactor: adopting them is a takeover.
    kwargs.setdefault("takeover", True)
    report = run_compaction(path, open_store(f"file://{root}"), settings=settings,
                            runner=ThreadTaskRunner(kwargs["parallelism"]), **kwargs)
    assert report.status == "committed", report
    return report


def official_reads(root: Path, path: str, keys: list[bytes],
                   merge_operator: Any = None) -> tuple[list[tuple[bytes, bytes]], dict]:
    with OfficialReader.open(root, path, merge_operator=merge_operator) as r:
        return r.scan(), r.get_many(keys)


def write_l0s(root: Path, path: str, rng: random.Random, keys: list[bytes], model: Model, *,
              codec: str | None, l0s: int) -> None:
    with OfficialDb.open(root, path, DbSettings(codec=codec, block_size=BLOCK, compactor=False),
                         model=model) as db:
        for _ in range(l0s):
            db.write(random_ops(rng, keys, 80, block_size=BLOCK))
            db.flush_memtable()
        db.write(random_ops(rng, keys, 30, block_size=BLOCK, deletes=0.4))
        db.flush_wal()  # rows only in the WAL stay out of the compaction


def _read_compactions(root: Path, path: str) -> Any:
    return run(OfficialAdmin(root, path).admin.read_compactions(None))


@pytest.mark.parametrize(("policy", "codec", "seed"), [
    ("l0", None, 11), ("full", "Zstd", 12), ("size-tiered", "Snappy", 13),
    ("sources", "Lz4", 14), ("l0", "Zlib", 15),
])
def test_official_db_compacted_by_us_reads_the_same_and_keeps_writing(
    tmp_path: Path, policy: str, codec: str | None, seed: int
) -> None:
    rng = random.Random(seed)
    keys = key_pool(rng, 160)
    model = Model()
    write_l0s(tmp_path, "db", rng, keys, model, codec=codec, l0s=5)
    probe = keys + absent_keys(rng, keys, 20)
    before = official_reads(tmp_path, "db", probe)
    assert before[0] == model.items()
    sources = None
    if policy == "sources":
        m = ManifestStore(open_store(f"file://{tmp_path}"), "db").read_latest().value
        sources = [str(SourceId.l0(v.id)) for v in m.l0[-3:]]  # the three oldest L0s
    report = compact(tmp_path, "db", codec=codec,
                     policy=None if sources else policy, sources=sources)
    assert report.tasks >= 2 and report.rows_out < report.rows_in
    assert official_reads(tmp_path, "db", probe) == before

    state = _read_compactions(tmp_path, "db")
    [ours] = [c for c in state.recent_compactions if c.id == report.compaction_id]
    assert ours.status == CompactionStatus.COMPLETED and not ours.active
    manifest = OfficialAdmin(tmp_path, "db").manifest()
    [run_] = [sr for sr in manifest.compacted if sr.id == report.destination]
    assert [v.sst.id.value for v in run_.sst_views] == [h.id.value for h in ours.output_ssts]
    assert len(ours.output_ssts) == len(report.outputs["ssts"]) >= 2
    assert state.compactor_epoch == manifest.compactor_epoch == report.compactor_epoch

    with OfficialDb.open(tmp_path, "db", DbSettings(codec=codec, block_size=BLOCK,
                                                    compactor=False), model=model) as db:
        db.write(random_ops(rng, keys, 60, block_size=BLOCK, deletes=0.3))
        db.flush_memtable()
        db.write([Put(keys[0], b"after"), Delete(keys[1])])
        assert db.get(keys[0]) == b"after"
    scan, gets = official_reads(tmp_path, "db", probe)
    assert scan == model.items()
    assert gets == {k: model.get(k) for k in probe}


@pytest.mark.parametrize(("policy", "seed"), [("full", 21), ("l0", 22), ("size-tiered", 23),
                                            ("sources", 24)])
def test_layered_db_with_runs_ttl_and_merges_compacts_with_each_policy(
    tmp_path: Path, policy: str, seed: int
) -> None:
    rng = random.Random(seed)
    keys = key_pool(rng, 140)
    model = Model()
    settings = DbSettings(codec="Zstd", block_size=BLOCK, compactor=True)
    with OfficialDb.open(tmp_path, "db", settings, model=model,
                         merge_operator=Concat()) as db:
        shape = write_layered(db, OfficialAdmin(tmp_path, "db"), rng, keys[:120],
                              block_size=BLOCK, merges=True, ttl_keys=keys[120:])
    assert shape.sorted_runs == (6, 2) and shape.l0_views == 2
    before = official_reads(tmp_path, "db", keys, merge_operator=Concat())
    sources = None
    if policy == "sources":  # the oldest L0 and the newest run
        m = ManifestStore(open_store(f"file://{tmp_path}"), "db").read_latest().value
        sources = [str(SourceId.l0(m.l0[-1].id)), "sr:6"]
    report = compact(tmp_path, "db", codec="Zstd", merge_operator="concat",
                     policy=None if sources else policy, sources=sources,
                     min_compaction_sources=2)
    expected_dst = {"full": 2, "l0": 7, "size-tiered": 7, "sources": 6}[policy]
    assert report.destination == expected_dst and report.bottom == (policy == "full")
    if policy == "full":
        assert report.retention["merge_operands_folded"] > 0
    assert official_reads(tmp_path, "db", keys, merge_operator=Concat()) == before
    with OfficialDb.open(tmp_path, "db", DbSettings(codec="Zstd", block_size=BLOCK,
                                                    compactor=False), model=model,
                         merge_operator=Concat()) as db:
        db.write(random_ops(rng, keys[:120], 50, block_size=BLOCK, merges=0.2))
        db.flush_memtable()
    assert read_all(tmp_path, "db", merge_operator=Concat()) == model.items()


def test_merge_operands_are_kept_unfolded_without_an_operator(tmp_path: Path) -> None:
    from tests.interop.official import Merge

    model = Model()
    with OfficialDb.open(tmp_path, "db", DbSettings(compactor=False), model=model,
                         merge_operator=Concat()) as db:
        for i in range(3):
            db.write([Merge(b"m", b"%d" % i), Put(b"p%d" % i, b"v")])
            db.flush_memtable()
    compact(tmp_path, "db", policy="l0")
    assert read_all(tmp_path, "db", merge_operator=Concat()) == model.items()


def test_official_writer_open_during_our_compaction_merges_it(tmp_path: Path) -> None:
    rng = random.Random(31)
    keys = key_pool(rng, 100)
    model = Model()
    with OfficialDb.open(tmp_path, "db", DbSettings(block_size=BLOCK, compactor=False),
                         model=model) as db:
        for _ in range(3):
            db.write(random_ops(rng, keys, 60, block_size=BLOCK))
            db.flush_memtable()
        report = compact(tmp_path, "db", policy="l0")  # while the writer is running
        db.write(random_ops(rng, keys, 60, block_size=BLOCK, deletes=0.3))
        db.flush_memtable()  # the writer's manifest update must keep our run
        assert db.scan() == model.items()
    m = OfficialAdmin(tmp_path, "db").manifest()
    assert [sr.id for sr in m.compacted] == [report.destination] and len(m.l0) == 1
    assert read_all(tmp_path, "db") == model.items()


def _gc(root: Path, path: str) -> None:
    from slatedb.uniffi import (
        GarbageCollectorDirectoryOptions,
        GarbageCollectorOptions,
        GarbageCollectorScheduleOptions,
    )

    now = GarbageCollectorDirectoryOptions(min_age_ms=0, dry_run=False)
    run(OfficialAdmin(root, path).admin.run_gc_once(GarbageCollectorOptions(
        manifest_options=now, compacted_options=now,
        detach_options=GarbageCollectorScheduleOptions())))


def test_compacted_clone_releases_its_parents_ssts_to_the_parents_gc(tmp_path: Path) -> None:
    rng = random.Random(41)
    keys = key_pool(rng, 100)
    model = Model()
    write_l0s(tmp_path, "src", rng, keys, model, codec=None, l0s=3)
    with OfficialDb.open(tmp_path, "src", DbSettings(block_size=BLOCK, compactor=False)) as db:
        db.flush_all()
    clone(tmp_path, "clone", [CloneSource("src")])
    shared = set((tmp_path / "src" / "compacted").iterdir())
    clone_before = read_all(tmp_path, "clone")

    store = open_store(f"file://{tmp_path}")
    [ext] = ManifestStore(store, "clone").read_latest().value.external_dbs
    assert len(ext.sst_ids) == len(shared) == 4
    compact(tmp_path, "clone", policy="full", checkpoint_lifetime=0)
    [ext] = ManifestStore(store, "clone").read_latest().value.external_dbs
    assert ext.sst_ids == () and ext.path == "src"  # dereferenced ids dropped, entry kept
    assert read_all(tmp_path, "clone") == clone_before

    compact(tmp_path, "src", policy="full", checkpoint_lifetime=0)
    with OfficialDb.open(tmp_path, "src", DbSettings(block_size=BLOCK, compactor=False)) as db:
        db.write([Put(b"zz-later", b"x")])  # a newer L0 moves GC's "newest L0" cutoff on
        db.flush_memtable()
    _gc(tmp_path, "src")
    assert shared <= set((tmp_path / "src" / "compacted").iterdir())  # pinned by the clone
    _gc(tmp_path, "clone")  # detaches: the clone no longer needs src
    assert ManifestStore(store, "clone").read_latest().value.external_dbs == ()
    # the clone was made from an ephemeral (5 min) checkpoint of src; it pins the old
    # manifest until it expires, so drop it rather than wait
    run(OfficialAdmin(tmp_path, "src").admin.delete_checkpoint(str(ext.source_checkpoint_id)))
    _gc(tmp_path, "src")
    left = set((tmp_path / "src" / "compacted").iterdir())
    assert not shared & left  # released by the parent's GC
    assert read_all(tmp_path, "clone") == clone_before
    assert dict(read_all(tmp_path, "src"))[b"zz-later"] == b"x"


GOLDEN = ["basic", "codec_snappy", "codec_zlib", "codec_lz4", "codec_zstd", "ckpt_src",
          "ckpt_clone", "ckpt_clone_proj", "ttl_merge", "default_settings", "gc_collected",
          "seq_tracker", "segmented"]


@pytest.mark.parametrize("name", GOLDEN)
def test_every_golden_database_compacts_fully_and_reads_as_expected(
    fixture_copy: Path, name: str
) -> None:
    from slatelib import DbReader
    from tests.conftest import load_expected

    expected = load_expected(name)
    live = sorted((k.encode(), v.encode()) for k, v in expected["live"].items())
    op = "concat" if expected["merge_operator"] else None
    store = open_store(f"file://{fixture_copy}")
    before = ManifestStore(store, name).read_latest().value
    report = run_compaction(name, store, settings=Settings(compaction=CompactionSettings(
        min_range_bytes=1, merge_operator=op)), policy="full", parallelism=2,
        takeover=expected_compactor_claimed(before))
    assert report.status == "committed"
    m = ManifestStore(store, name).read_latest().value
    # every tree (the top-level one, or each segment) is one run (0.17 keeps it when empty)
    trees = [(s.l0, s.compacted) for s in m.segments] if m.segments else [(m.l0, m.compacted)]
    assert all(l0 == () and len(runs) == 1 for l0, runs in trees), trees
    assert len(report.compactions) == len(trees)
    assert report.rows_in >= report.rows_out
    assert len(before.ssts) >= 1
    with DbReader.open(name, store, mode="latest", merge_operator=op) as r:
        assert list(r.scan()) == live
    extractor = FixedPrefix(4) if expected.get("segment_extractor") else None
    assert read_all(fixture_copy, name, merge_operator=Concat() if op else None,
                    segment_extractor=extractor) == live


def expected_compactor_claimed(m: Any) -> bool:
    """The golden databases were written with the official embedded compactor on (it
    claimed an epoch): compacting them is a takeover, refused without the flag."""
    return bool(m.compactor_epoch)


def _run_rows(root: Path, path: str) -> list[tuple[Any, ...]]:
    """Every row of every sorted run of the latest manifest, in run and key order."""
    from slatelib.format.sst import parse_sst
    from slatelib.paths import DbPaths

    store = open_store(f"file://{root}")
    m = ManifestStore(store, path).read_latest().value
    out: list[tuple[Any, ...]] = []
    for sr in m.compacted:
        for v in sr.views:
            h = m.sst(v.sst_id)
            out += parse_sst(store.get(DbPaths(path).compacted(h.id)), info=h.info).rows()
    return out


@pytest.mark.parametrize(("seed", "codec"), [(51, None), (52, "Zstd")])
def test_our_output_rows_equal_the_official_compactors_row_for_row(
    tmp_path: Path, seed: int, codec: str | None
) -> None:
    """Same input, official TIERED compaction vs ours: identical rows (keys, seqs, kinds,
    values, expiry, create_ts), with overwrites, deletes, merges folded by the operator,
    TTL rows, and a snapshot that keeps older versions alive."""
    import shutil

    from tests.interop.official import FAR_FUTURE_MS, Merge
    from tests.interop.workload import ttl_ops

    rng = random.Random(seed)
    keys = key_pool(rng, 120)
    (tmp_path / "official").mkdir()
    settings = DbSettings(codec=codec, block_size=BLOCK, compactor=True)
    with OfficialDb.open(tmp_path / "official", "db", settings, merge_operator=Concat()) as db:
        snapshot = None
        for i in range(4):
            ops = random_ops(rng, keys[:100], 70, block_size=BLOCK, merges=0.2)
            ops += [Put(k, b"ttl", expire_at_ms=FAR_FUTURE_MS) for k in keys[100:105]]
            db.write(ops + [Merge(keys[0], b"%d" % i)])
            if i == 1:
                snapshot = run(db.db.snapshot())  # holds back recent_snapshot_min_seq
            db.flush_memtable()
        db.write(ttl_ops(rng, keys[105:]))
        db.flush_memtable()
        shutil.copytree(tmp_path / "official", tmp_path / "ours")
        OfficialAdmin(tmp_path / "official", "db").compact(destination=0)
        del snapshot
    m = ManifestStore(open_store(f"file://{tmp_path / 'ours'}"), "db").read_latest().value
    assert 0 < m.recent_snapshot_min_seq < m.last_l0_seq
    compact(tmp_path / "ours", "db", codec=codec, merge_operator="concat", policy="l0")
    official_rows = _run_rows(tmp_path / "official", "db")
    ours = _run_rows(tmp_path / "ours", "db")
    assert len({r[0] for r in ours}) < len(ours)  # the snapshot kept some older versions
    assert ours == official_rows


def test_our_non_bottom_output_keeps_tombstones_like_the_official_compactor(
    tmp_path: Path,
) -> None:
    import shutil

    rng = random.Random(61)
    keys = key_pool(rng, 100)
    (tmp_path / "official").mkdir()
    with OfficialDb.open(tmp_path / "official", "db",
                         DbSettings(block_size=BLOCK, compactor=True)) as db:
        db.write(random_ops(rng, keys, 80, block_size=BLOCK))
        db.flush_memtable()
        OfficialAdmin(tmp_path / "official", "db").compact(destination=0)
        for _ in range(3):
            db.write(random_ops(rng, keys, 60, block_size=BLOCK, deletes=0.4))
            db.flush_memtable()
        shutil.copytree(tmp_path / "official", tmp_path / "ours")
        OfficialAdmin(tmp_path / "official", "db").compact()  # L0s -> a new run 1
    report = compact(tmp_path / "ours", "db", policy="l0")
    assert (report.destination, report.bottom) == (1, False)
    ours = _run_rows(tmp_path / "ours", "db")
    assert any(r[2] == 1 for r in ours)  # tombstones kept above run 0
    assert ours == _run_rows(tmp_path / "official", "db")
