"""Our GC and official ``Admin.run_gc_once`` (0.17.0) delete the same objects.

Every state is copied twice: the official GC collects one copy, ``collect_garbage`` the
other, with the same ``min_age``, and the two trees must then be identical, file names and
bytes (the manifests GC writes when it removes expired checkpoints or detaches a clone
included). Afterwards the official ``DbReader`` and ``Db`` read every key from our copy,
from the clones too, and from a checkpoint.

Differences that are expected, and why:

- A soft-destroyed database (``destroyed_at_s``, slatelib's extension in slot 18 of the
  manifest, docs/rfcs/0002-destroyed-at-slot.md): 0.17 does not know the mark and collects it like
  any other database; ours deletes it and releases its final checkpoints in its parents.
- slatelib also requires a compacted SST's *object* to be older than ``min_age`` (0.17 looks
  only at its ULID). In these states every SST object is at least as old as its ULID, so
  the rule does not change a decision here (tests/unit/ops/gc/test_collect_safety.py covers it).
- On the local file system 0.17 creates a missing boundary file but cannot overwrite an
  existing one (object_store's ``LocalFileSystem`` has no ``PutMode::Update``): its manifest
  and compactions tasks then fail and delete nothing of their kind, on every run after the
  first. slatelib overwrites it conditionally (a ``flock`` on ``gc/<kind>.boundary.lock``,
  docs/rfcs/0006-local-conditional-put.md), so wherever a boundary file already exists
  (the ``gc_collected`` fixture, any second run) ours also deletes the manifests or
  compactions files up to the new boundary, ``gc/<kind>.boundary`` holds that higher id,
  and ``gc/<kind>.boundary.lock`` exists in our copy only. :func:`assert_same_trees`
  accepts exactly these differences, computed from our reports (nothing else), and checks
  that each one is such a file. On S3 both advance boundaries and the stores are identical.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from slatedb.uniffi import (
    AdminBuilder,
    GarbageCollectorDirectoryOptions,
    GarbageCollectorOptions,
    GarbageCollectorScheduleOptions,
    ObjectStore,
)

from slatelib.config import GcSettings, Settings
from slatelib.core.manifest import Manifest
from slatelib.objstore import ObjectStore as SlateStore
from slatelib.objstore import open_store
from slatelib.ops.destroy import destroy
from slatelib.ops.gc import collect_garbage
from slatelib.ops.gc.report import GcReport
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sequenced import Versioned
from slatelib.testing.clock import FakeClock
from slatelib.txn import update_versioned
from tests.conftest import FIXTURE_NAMES, load_expected
from tests.interop.official import (
    CloneSource,
    Concat,
    DbSettings,
    FixedPrefix,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    as_store,
    clone,
    run,
    s3_store,
)
from tests.s3_server import create_bucket

pytestmark = pytest.mark.interop

HOUR_S = 3600
NO_EMBEDDED_GC = DbSettings(extra={"garbage_collector_options": "null"})
"""Writers without 0.17's in-process GC, so that only the GCs under test collect."""


def official_gc(root: Path | ObjectStore, db: str, min_age_s: float) -> None:
    d = GarbageCollectorDirectoryOptions(interval_ms=None, min_age_ms=int(min_age_s * 1000),
                                         dry_run=False)
    fence = GarbageCollectorDirectoryOptions(interval_ms=None, min_age_ms=int(min_age_s * 1000),
                                             dry_run=True)
    admin = AdminBuilder(db, as_store(root)).build()
    run(admin.run_gc_once(GarbageCollectorOptions(
        manifest_options=d, wal_options=d, wal_fence_options=fence, compacted_options=d,
        compactions_options=d, detach_options=GarbageCollectorScheduleOptions(interval_ms=None))))


def our_gc(root: Path, db: str, min_age_s: float, **kw: Any) -> GcReport:
    return collect_garbage(db, open_store(f"file://{root}"), min_age=min_age_s, force=True,
                           dry_run=False, **kw)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def overwritten_boundaries(reports: dict[str, GcReport]) -> dict[tuple[str, str], int]:
    """``(db, kind) -> new id`` for each boundary file our GC found and moved (0.17 cannot
    move one on a local disk)."""
    out = {}
    for db, r in reports.items():
        for kind, b in r.boundaries.items():
            if b.get("before", 0) > 0 and b.get("after", 0) > b["before"]:
                out[(db, kind)] = b["after"]
    return out


def assert_same_trees(official: Path, ours: Path,
                      reports: dict[str, GcReport] | None = None) -> None:
    """Identical trees, but for the documented local-disk boundary difference (see the
    module docstring) of the runs in ``reports``."""
    a, b = snapshot(official), snapshot(ours)
    moved = overwritten_boundaries(reports or {})
    only_ours_deleted = {d.path for db, r in (reports or {}).items() for d in r.decisions
                         if d.deletes and (db, d.kind.value) in moved}
    assert all(d.split("/")[-2] in ("manifest", "compactions") for d in only_ours_deleted)
    assert sorted(set(a) - set(b)) == sorted(only_ours_deleted & set(a)), "kept by official only"
    assert sorted(set(b) - set(a)) == sorted(f"{db}/gc/{k}.boundary.lock" for db, k in moved), \
        "kept by ours only"
    changed = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
    assert changed == sorted(f"{db}/gc/{k}.boundary" for db, k in moved)
    for db, kind in moved:
        path = f"{db}/gc/{kind}.boundary"
        assert int(b[path]) == moved[(db, kind)] > int(a[path])


def twins(src: Path, tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "official", tmp_path / "ours"
    shutil.copytree(src, a)
    shutil.copytree(src, b)
    return a, b


def age_all_files(root: Path, seconds: float) -> None:
    when = time.time() - seconds
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (when, when))


def scan(root: Path | ObjectStore, db: str, **kw: Any) -> list[tuple[bytes, bytes]]:
    with OfficialReader.open(root, db, **kw) as r:
        return r.scan()


def test_fixtures_are_collected_alike_and_stay_readable(fixture_copy: Path, tmp_path: Path) -> None:
    official, ours = twins(fixture_copy, tmp_path)
    reports = {}
    for name in FIXTURE_NAMES:  # ckpt_src before its clones, as a scheduler would
        official_gc(official, name, 0)
        reports[name] = our_gc(ours, name, 0)
    assert_same_trees(official, ours, reports)
    assert reports["basic"].kinds["compacted"].deleted == 3
    assert overwritten_boundaries(reports) == {("gc_collected", "manifest"): 12}
    assert reports["gc_collected"].refused == []
    for name in FIXTURE_NAMES:
        expected = load_expected(name)
        kw: dict[str, Any] = {}
        if expected.get("merge_operator"):
            kw["merge_operator"] = Concat()
        if expected.get("segment_extractor"):
            kw["segment_extractor"] = FixedPrefix(4)
        live = sorted((k.encode(), v.encode()) for k, v in expected["live"].items())
        assert scan(ours, name, **kw) == live, name
    with OfficialDb.open(ours, "basic", DbSettings(block_size=1024)) as db:
        got = db.scan()
    assert got == sorted((k.encode(), v.encode()) for k, v in load_expected("basic")["live"].items())


def expire_checkpoints(store: SlateStore, db: str) -> None:
    """Set every checkpoint with an expiry to one that passed an hour ago."""
    past = int(time.time()) - HOUR_S

    def mutate(cur: Versioned[Manifest]) -> Manifest | None:
        cps = tuple(replace(c, expire_time_s=past) if c.expire_time_s is not None else c
                    for c in cur.value.checkpoints)
        return None if cps == cur.value.checkpoints else replace(cur.value, checkpoints=cps)

    update_versioned(ManifestStore(store, db), mutate)


class Family:
    """An official database with flushes, compactions, WAL-only rows, an unexpired and an
    expired checkpoint, a full clone at the checkpoint, a projected clone, and a clone whose
    compaction rewrote every parent SST (so it can detach). ``where`` is a local folder or
    an official object store."""

    def __init__(self, where: Path | ObjectStore, slate_store: SlateStore | None = None) -> None:
        if isinstance(where, Path):
            where.mkdir(parents=True, exist_ok=True)
            slate_store = open_store(f"file://{where}")
        assert slate_store is not None
        self.root = where
        self.model = Model()
        keys = [f"k:{i:03d}".encode() for i in range(60)]
        with OfficialDb.open(where, "src", NO_EMBEDDED_GC, model=self.model) as db:
            admin = OfficialAdmin(where, "src")
            db.write([Put(k, b"a" + k) for k in keys[:40]])
            db.flush_memtable()
            self.expired = admin.checkpoint("brief", lifetime_ms=1)
            db.write([Put(k, b"b" + k) for k in keys[20:60]])
            db.flush_memtable()
            db.write([Put(keys[5], b"c")])
            db.flush_memtable()
            admin.compact(l0=None)
            db.write([Put(keys[7], b"d")])
            db.flush_all()
            self.keep = admin.checkpoint("keep")
            self.at_keep = self.model.copy()
            db.write([Put(keys[9], b"e")])
            db.flush_memtable()
            db.write([Put(keys[11], b"wal only")])
            db.flush_wal()
        clone(where, "clone", [CloneSource("src", self.keep.id)])
        self.clone_model = self.at_keep.copy()
        with OfficialDb.open(where, "clone", NO_EMBEDDED_GC, model=self.clone_model) as db:
            db.write([Put(b"own", b"clone")])
            db.flush_memtable()
        clone(where, "proj", [CloneSource("src", self.keep.id, b"k:010", b"k:030")])
        clone(where, "detach", [CloneSource("src", self.keep.id)])
        self.detach_model = self.at_keep.copy()
        with OfficialDb.open(where, "detach", NO_EMBEDDED_GC, model=self.detach_model) as db:
            db.write([Put(b"zz", b"mine")])
            db.flush_memtable()
            OfficialAdmin(where, "detach").compact(l0=None, runs=len(
                OfficialAdmin(where, "detach").sorted_run_ids()))
        # The compactors' own checkpoints pin the pre-compaction manifests for 15 minutes and
        # "brief" lives 1 ms, stored in whole seconds: move every expiry an hour into the
        # past, so that both GCs, whenever they run, see them all expired (and can collect
        # the compaction inputs, and detach the clone whose compaction rewrote every parent
        # SST).
        for name in ("src", "detach"):
            expire_checkpoints(slate_store, name)
        self.dbs = ["clone", "proj", "detach", "src"]

    def check_reads(self, root: Path | ObjectStore) -> None:
        assert scan(root, "src") == self.model.items()
        assert scan(root, "src", checkpoint=self.keep.id) == self.at_keep.items()
        assert scan(root, "clone") == self.clone_model.items()
        assert scan(root, "proj") == self.at_keep.items(b"k:010", b"k:030")
        assert scan(root, "detach") == self.detach_model.items()
        with OfficialDb.open(root, "src") as db:
            assert db.scan() == self.model.items()
        with OfficialDb.open(root, "clone") as db:
            assert db.scan() == self.clone_model.items()


@pytest.mark.parametrize("min_age_s, age_s", [(0, 0), (HOUR_S, 2 * HOUR_S)])
def test_official_databases_and_clones_are_collected_alike(
    tmp_path: Path, min_age_s: float, age_s: float,
) -> None:
    fam = Family(tmp_path / "src_root")
    if age_s:
        age_all_files(fam.root, age_s)  # SST ULIDs stay young: compacted/ must be kept
    official, ours = twins(fam.root, tmp_path)
    reports = {}
    for name in fam.dbs:
        official_gc(official, name, min_age_s)
        reports[name] = our_gc(ours, name, min_age_s)
    assert_same_trees(official, ours)
    assert reports["detach"].detached[0]["status"] == "detached"
    assert fam.expired.id in reports["src"].expired_checkpoints
    deleted = {k: v.deleted for k, v in reports["src"].kinds.items()}
    assert deleted["manifest"] > 0 and deleted["wal"] > 0
    assert deleted["compacted"] == (0 if age_s else 3), deleted
    fam.check_reads(ours)


def more_garbage(root: Path, fam: Family, n: int = 3) -> None:
    """New manifests, WAL SSTs and L0s in ``src`` (official writer, no embedded GC)."""
    with OfficialDb.open(root, "src", NO_EMBEDDED_GC, model=fam.model) as db:
        for i in range(n):
            db.write([Put(f"k:{i:03d}".encode(), b"round " + str(i).encode())])
            db.flush_memtable()


def test_later_runs_on_a_local_disk_advance_the_boundary_and_0_17_copes_with_the_lock(
    tmp_path: Path,
) -> None:
    fam = Family(tmp_path / "src_root")
    for name in fam.dbs:  # first run: both GCs create the boundary files
        our_gc(fam.root, name, 0)
    more_garbage(fam.root, fam)
    official, ours = twins(fam.root, tmp_path)
    reports = {}
    for name in fam.dbs:
        official_gc(official, name, 0)
        reports[name] = our_gc(ours, name, 0)
    assert_same_trees(official, ours, reports)  # 0.17 cannot move the boundary; ours does
    assert reports["src"].kinds["manifest"].deleted > 0
    assert (ours / "src" / "gc" / "manifest.boundary.lock").exists()
    fam.check_reads(ours)
    # 0.17 on our copy, with the lock file in gc/: its WAL and SST GC still work, its
    # manifest GC still cannot move the boundary (as on its own copy), nothing breaks
    more_garbage(ours, fam)
    before = ManifestStore(open_store(f"file://{ours}"), "src").read_latest().value
    wals_before = sorted((ours / "src" / "wal").iterdir())
    official_gc(ours, "src", 0)
    wals_after = sorted((ours / "src" / "wal").iterdir())
    assert len(wals_after) < len(wals_before)
    assert all(int(p.stem) >= before.replay_after_wal_id or p.stat().st_size == 0
               for p in wals_after)
    fam.check_reads(ours)
    again = our_gc(ours, "src", 0)
    assert again.kinds["manifest"].deleted > 0 and again.refused == [] and again.errors == []
    assert int((ours / "src" / "gc" / "manifest.boundary").read_bytes()) == \
        again.boundaries["manifest"]["after"] > reports["src"].boundaries["manifest"]["after"]
    fam.check_reads(ours)


def test_soft_destroyed_clone_is_deleted_by_ours_and_ignored_by_0_17(tmp_path: Path) -> None:
    fam = Family(tmp_path / "src_root")
    store = open_store(f"file://{fam.root}")
    destroy("clone", store, soft=True, clock=FakeClock(int(time.time() * 1000) - 60_000))
    final = ManifestStore(store, "clone").read_latest().value.external_dbs[0].final_checkpoint_id
    official, ours = twins(fam.root, tmp_path)
    no_grace = Settings(gc=GcSettings(db_delete_grace=0))
    for name in ("clone", "src"):
        official_gc(official, name, 0)
        our_gc(ours, name, 0, settings=no_grace)
    assert (official / "clone" / "manifest").is_dir()  # 0.17 knows no soft destroy
    assert not any((ours / "clone").rglob("*.*"))
    src_checkpoints = ManifestStore(open_store(f"file://{ours}"), "src").read_latest().value.checkpoints
    assert final not in {c.id for c in src_checkpoints}
    assert scan(ours, "src") == fam.model.items()
    assert scan(ours, "detach") == fam.detach_model.items()


def mirror(src: SlateStore, dst: SlateStore) -> None:
    dst.delete_many([m.path for m in dst.list("")])
    for m in src.list(""):
        dst.put(m.path, src.get(m.path))


def contents(store: SlateStore) -> dict[str, bytes]:
    return {m.path: store.get(m.path) for m in store.list("")}


@pytest.mark.integration
def test_on_s3_both_collect_alike_and_advance_existing_boundaries(moto_endpoint: str) -> None:
    a, b = create_bucket(moto_endpoint), create_bucket(moto_endpoint)
    official_a = s3_store(a.name, endpoint=moto_endpoint)
    fam = Family(official_a, a.open())
    ours_a, ours_b = a.open(), b.open()
    mirror(ours_a, ours_b)
    boundaries = []
    for round_ in (1, 2):
        for name in fam.dbs:
            official_gc(official_a, name, 0)
            collect_garbage(name, ours_b, min_age=0, force=True, dry_run=False)
        assert contents(ours_a) == contents(ours_b)
        boundaries.append(ours_b.get("src/gc/manifest.boundary"))
        if round_ == 1:  # more garbage, so that round 2 must move the existing boundary
            with OfficialDb.open(official_a, "src", NO_EMBEDDED_GC, model=fam.model) as db:
                for i in range(3):
                    db.write([Put(f"k:{i:03d}".encode(), b"round 2")])
                    db.flush_memtable()
            mirror(ours_a, ours_b)
    assert int(boundaries[1]) > int(boundaries[0]) > 0
    fam.check_reads(s3_store(b.name, endpoint=moto_endpoint))


def segmented_db(root: Path) -> tuple[Model, Any, Model]:
    """An official segmented database (``FixedPrefix(4)``, SlateDB RFC-0024) with garbage
    of every kind a segment leaves: official segment compactions, a drained segment (its
    SSTs dropped by the drain, then the segment pruned by the writer), a second drain after
    a checkpoint (its SSTs pinned by it), and slatelib's compaction of every segment.
    Returns the model, the checkpoint and the model at the checkpoint."""
    from slatedb.uniffi import CompactionSpec, SourceId

    from slatelib.ops.compaction import run_compaction

    root.mkdir(parents=True, exist_ok=True)
    ex = FixedPrefix(4)
    model = Model()
    with OfficialDb.open(root, "seg", NO_EMBEDDED_GC, model=model, segment_extractor=ex) as db:
        admin = OfficialAdmin(root, "seg")
        for r in range(3):
            db.write([Put(p + b"%03d" % i, b"%s-%d" % (p, r)) for p in (b"aaa:", b"bbb:",
                                                                          b"ccc:", b"ddd:")
                      for i in range(0, 40, r + 1)])
            db.flush_memtable()
        admin.compact(segment=b"aaa:")
        admin.compact(segment=b"bbb:", l0=2)

        def drain(prefix: bytes) -> None:
            l0, runs = OfficialAdmin.tree(admin.manifest(), prefix)
            spec = CompactionSpec.DRAIN_SEGMENT(segment=prefix, sources=[
                SourceId.SST_VIEW(v.id) for v in l0] + [SourceId.SORTED_RUN(r.id) for r in runs])
            c = run(admin.admin.submit_compaction(spec))
            deadline = time.monotonic() + 30
            while (got := run(admin.admin.read_compaction(c.id, None))) is None or got.active:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            for key in list(model.kv):
                if key.startswith(prefix):
                    model.kv[key] = None

        drain(b"ccc:")
        db.write([Put(b"aaa:new", b"x")])
        db.flush_all()
        keep = admin.checkpoint("keep")
        at_keep = model.copy()
        drain(b"ddd:")
        db.write([Put(b"bbb:wal", b"only")])
        db.flush_wal()
    run_compaction("seg", open_store(f"file://{root}"), policy="full", takeover=True)
    expire_checkpoints(open_store(f"file://{root}"), "seg")  # the compactors' 15 min ones
    return model, keep, at_keep


def test_a_segmented_database_is_collected_alike(tmp_path: Path) -> None:
    model, keep, at_keep = segmented_db(tmp_path / "seg_root")
    official, ours = twins(tmp_path / "seg_root", tmp_path)
    official_gc(official, "seg", 0)
    report = our_gc(ours, "seg", 0)
    assert_same_trees(official, ours)
    deleted = {k: v.deleted for k, v in report.kinds.items()}
    # the compaction inputs and the first drain's SSTs go; the pinned drain's stay
    assert deleted["compacted"] >= 6 and deleted["manifest"] > 0, deleted
    m = ManifestStore(open_store(f"file://{ours}"), "seg").read_latest().value
    pinned = ManifestStore(open_store(f"file://{ours}"), "seg").read(
        next(c.manifest_id for c in m.checkpoints if c.id.hex == keep.id.replace("-", "")))
    assert b"ddd:" in {s.prefix for s in pinned.value.segments or ()}
    ex = FixedPrefix(4)
    assert scan(ours, "seg", segment_extractor=ex) == model.items()
    assert scan(ours, "seg", segment_extractor=ex, checkpoint=keep.id) == at_keep.items()
