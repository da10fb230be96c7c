"""jobs/gc.py on Spark: many databases per run, the same decisions as the single-process
planner, a parent and its clones collected at once, and a 100k-object S3 listing split
across executors."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slatelib.clock import SYSTEM_CLOCK
from slatelib.config import GcSettings, Settings, load_settings
from slatelib.core.compactions import CompactionStatus
from slatelib.core.manifest import Manifest
from slatelib.errors import InvalidArgumentError, ObjectMissingError
from slatelib.jobs.gc import build_parser, run
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.destroy import destroy
from slatelib.ops.gc import collect_garbage, gc_options, run_gc
from slatelib.paths import DbPaths
from slatelib.spark.gc import SparkBackend
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sequenced import Versioned
from slatelib.testing.clock import FakeClock
from slatelib.txn import update_versioned
from tests.interop.official import (
    CloneSource,
    DbSettings,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    clone,
)
from tests.s3_server import S3Bucket
from tests.unit.gc_support import HOUR, DbWriter, compactions, manifest, ulid_at

pytestmark = pytest.mark.spark

DBS = ["basic", "ckpt_src", "gc_collected"]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def job_args(tmp_path: Path, *argv: str, listing_max: int = 0) -> Any:
    conf = tmp_path / "gc.toml"
    conf.write_text(f"[gc]\ndriver_listing_max = {listing_max}\nlist_partitions = 3\n")
    return build_parser().parse_args([*argv, "--conf", str(conf)])


def test_job_collects_many_databases_like_the_single_process_planner(
    spark: Any, fixture_copy: Path, tmp_path: Path,
) -> None:
    twin = tmp_path / "twin"
    shutil.copytree(fixture_copy, twin)
    (tmp_path / "afile").write_bytes(b"not a database")
    args = job_args(tmp_path, *[a for n in DBS for a in ("--db", f"file://{fixture_copy}/{n}")],
                    "--db", f"file://{fixture_copy}/not-a-db",
                    "--db", f"file://{tmp_path}/afile",  # a file: not a database root either
                    "--db", f"file://{fixture_copy}/ckpt_clone/",  # a prefix spelling: refused
                    "--min-age", "0s", "--force", "--no-dry-run")
    report, code = run(spark, load_settings(args.conf), args)
    assert code == 5
    by_db = {r["db"].rstrip("/").rsplit("/", 1)[1]: r for r in report["databases"]}
    assert by_db["not-a-db"]["status"] == "data_error"
    assert "not a database root" in by_db["not-a-db"]["error"]["message"]
    assert by_db["afile"]["status"] == "data_error"
    assert by_db["afile"]["error"]["message"].endswith("afile' is a file, not a database root")
    assert by_db["ckpt_clone"]["status"] == "invalid_input"
    assert "ends with '/': that names a prefix" in by_db["ckpt_clone"]["error"]["message"]
    assert all(by_db[n]["status"] == "success" for n in DBS)
    assert report["totals"]["databases"] == 6 and report["totals"]["failed"] == 3
    assert by_db["basic"]["kinds"]["compacted"]["deleted"] == 3
    local = open_store(f"file://{twin}")
    for n in DBS:
        collect_garbage(n, local, min_age=0, force=True, dry_run=False)
    assert tree(fixture_copy) == tree(twin)


def test_dry_run_writes_every_decision_to_stderr_and_deletes_nothing(
    spark: Any, fixture_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    before = tree(fixture_copy)
    args = job_args(tmp_path, "--discover", f"file://{fixture_copy}/", "--min-age", "0s",
                    "--force", "--dry-run", listing_max=1000)
    report, code = run(spark, load_settings(args.conf), args)
    assert code == 0 and tree(fixture_copy) == before
    printed = capsys.readouterr()
    assert printed.out == ""  # stdout is the report's alone
    lines = [json.loads(x) for x in printed.err.splitlines() if x.startswith("{")]
    assert len(report["databases"]) == 13
    assert report["status"] == "success" and report["headline"].startswith("dry run: would ")
    basic = [x for x in lines if x["db"].endswith("/basic")]
    local = collect_garbage(f"{fixture_copy}/basic".lstrip("/"), open_store("file:///"),
                            min_age=0, force=True)
    assert sorted((x["path"], x["action"]) for x in basic) == sorted(
        (d.path, d.action.value) for d in local.decisions)
    assert all(x["reason"].startswith(("kept: ", "delete: ")) for x in lines)


def test_per_directory_flags_and_conf_reach_the_job_as_in_the_single_process_gc(
    spark: Any, fixture_copy: Path, tmp_path: Path,
) -> None:
    twin = tmp_path / "twin"
    shutil.copytree(fixture_copy, twin)
    conf = tmp_path / "dirs.toml"
    conf.write_text('[gc]\ndriver_listing_max = 0\nlist_partitions = 3\n'
                    '[gc.manifest_options]\nenabled = false\n')
    argv = ["--min-age", "0s", "--force", "--no-dry-run", "--compacted-dry-run",
            "--wal-min-age", "1h", "--no-boundary-files", "--conf", str(conf)]
    args = build_parser().parse_args(["--db", f"file://{fixture_copy}/basic", *argv])
    report, code = run(spark, load_settings(args.conf), args)
    assert code == 0 and report["dry_run"] is False
    basic = report["databases"][0]
    assert basic["directories"]["compacted"]["dry_run"] is True
    assert (basic["directories"]["wal"]["min_age_s"], basic["boundary_files_enabled"]) == (
        3600.0, False)
    assert basic["directories"]["manifest"]["enabled"] is False
    assert basic["kinds"]["compacted"]["deleted"] == 0 == basic["kinds"]["manifest"]["deleted"]
    assert basic["kinds"]["compacted"]["kept"] == basic["kinds"]["compacted"]["listed"]
    from slatelib.ops.gc.flags import gc_options_from_args

    local_args = build_parser().parse_args(["--db", "x", *argv])
    options, forced = gc_options_from_args(load_settings(args.conf), local_args)
    local = collect_garbage("basic", open_store(f"file://{twin}"), dry_run=forced,
                            options=options)
    assert not forced and len([d for d in local.decisions if d.reason.startswith(
        "kept: GC of compacted/ is a dry run")]) == 3  # what a real compacted GC deletes
    assert tree(fixture_copy) == tree(twin)
    assert all((fixture_copy / p).read_bytes() == (twin / p).read_bytes()
               for p in tree(twin) if "/gc/" in f"/{p}")
    assert not (twin / "basic" / "gc").exists()  # no boundary file without boundary files


def test_min_age_below_the_floor_refuses_the_whole_job(spark: Any, tmp_path: Path) -> None:
    args = job_args(tmp_path, "--db", f"file://{tmp_path}/db", "--min-age", "1m")
    with pytest.raises(InvalidArgumentError, match="below the safety floor"):
        run(spark, load_settings(args.conf), args)


# ------------------------------------------------------------------ 100k objects on S3
N_WAL, N_SST = 60_000, 45_000


def seed_big_db(bucket: S3Bucket, root: str) -> tuple[ObjectStore, set[str], int]:
    store = bucket.open()
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, root)
    l0 = ulid_at(t0 - HOUR)
    w.sst(l0)
    w.compactions(1, compactions((ulid_at(t0 - HOUR), CompactionStatus.COMPLETED)))
    w.manifests_upto(3, manifest(l0=[l0], replay_after=N_WAL + 1, last_seen=N_WAL + 2))
    w.wal(N_WAL + 1)
    w.wal(N_WAL + 2)
    garbage = [w.paths.wal(i) for i in range(1, N_WAL + 1)]
    garbage += [w.paths.compacted(ulid_at(t0 - 3 * HOUR - i * 1000)) for i in range(N_SST)]
    bucket.seed(garbage, b"x")
    return store, set(garbage), t0


@pytest.mark.integration
def test_100k_objects_on_s3_are_listed_in_ranges_across_executors_and_collected(
    spark: Any, s3_bucket: S3Bucket,
) -> None:
    store, garbage, t0 = seed_big_db(s3_bucket, "tenant/db")
    backend = SparkBackend(spark, list_partitions=8, local_threshold=0)
    options = gc_options(Settings(gc=GcSettings()), min_age=300)
    report = run_gc(store, "tenant/db", options, dry_run=False, backend=backend,
                    clock=_At(t0 + HOUR))
    for directory, n in (("wal", N_WAL + 2), ("compacted", N_SST + 1)):
        split = report.listing[directory]
        assert split["objects"] == n and 4 <= split["ranges"] <= 8, split
        assert split["nonempty_ranges"] >= 4 and split["largest_range"] < n / 2, split
    kinds = report.to_json()["kinds"]
    assert (kinds["wal"]["listed"], kinds["compacted"]["listed"]) == (N_WAL + 2, N_SST + 1)
    assert (kinds["wal"]["deleted"], kinds["compacted"]["deleted"]) == (N_WAL, N_SST)
    left = {m.path for m in store.list("tenant/db")}
    assert not (left & garbage)
    # the L0, compactions 1, manifest 3, two WALs and gc/manifest.boundary
    assert len(left) == 6 and "tenant/db/gc/manifest.boundary" in left


class _At:
    def __init__(self, now_ms: int) -> None:
        self._now = now_ms

    def now_ms(self) -> int:
        return self._now

    def monotonic_s(self) -> float:
        return SYSTEM_CLOCK.monotonic_s()

    def sleep(self, seconds: float) -> None:
        SYSTEM_CLOCK.sleep(seconds)


# ------------------------------------------------------- a clone family collected at once
def _expire_checkpoints(store: ObjectStore, db: str) -> None:
    """Move every checkpoint that has an expiry an hour into the past (the compactor's
    15-minute ones included), so that GC removes them and collects what they pinned."""
    past = int(time.time()) - HOUR // 1000

    def mutate(cur: Versioned[Manifest]) -> Manifest | None:
        cps = tuple(replace(c, expire_time_s=past) if c.expire_time_s is not None else c
                    for c in cur.value.checkpoints)
        return None if cps == cur.value.checkpoints else replace(cur.value, checkpoints=cps)

    update_versioned(ManifestStore(store, db), mutate)


def _dangling(store: ObjectStore, db: str) -> list[str]:
    """Every object a live manifest of ``db`` (the latest or one a checkpoint pins)
    references that does not exist: its SSTs, its parents' SSTs, the pinned manifests."""
    ms = ManifestStore(store, db)
    latest = ms.read_latest()
    live = {latest.id: latest.value}
    missing = []
    for c in latest.value.checkpoints:
        got = ms.try_read(c.manifest_id)
        if got is None:
            missing.append(ms.path(c.manifest_id))
        else:
            live[c.manifest_id] = got.value
    for m in live.values():
        owners = m.external_sst_paths()
        for sid in m.referenced_sst_ids():
            path = DbPaths.of(owners.get(sid, db)).compacted(sid)
            try:
                store.head(path)
            except ObjectMissingError:
                missing.append(path)
    return sorted(set(missing))


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_parent_and_clones_collected_at_once_match_a_sequential_run_and_stay_readable(
    spark: Any, tmp_path: Path,
) -> None:
    """A parent, a clone, a clone of that clone, a clone that can detach and a soft-destroyed
    clone, collected by one job with ``db_concurrency = 4``: the detaching and the destroyed
    clone release their final checkpoints in the parent (a CAS on its manifest) while the
    parent's GC removes its expired checkpoints (another CAS) and decides from a live set it
    read before. Every database succeeds, the result is that of a sequential run in
    parent-first order, and the official reader reads every key afterwards."""
    # The official store is rooted at "/", so that the clones name their parents by the
    # path our file:// database URLs give them (the store root of file:// URLs is "/").
    fs = Path("/")
    fam = tmp_path / "fam"
    fam.mkdir()
    rel = str(fam).lstrip("/")
    src, c1, c2, det, gone = (f"{rel}/{n}" for n in ("src", "c1", "c2", "det", "gone"))
    no_gc = DbSettings(extra={"garbage_collector_options": "null"})
    keys = [f"k:{i:02d}".encode() for i in range(30)]
    model = Model()
    with OfficialDb.open(fs, src, no_gc, model=model) as db:
        admin = OfficialAdmin(fs, src)
        db.write([Put(k, b"a" + k) for k in keys[:20]])
        db.flush_memtable()
        db.write([Put(k, b"b" + k) for k in keys[10:]])
        db.flush_all()
        keep = admin.checkpoint("keep")  # pins the two L0s that the compaction replaces
        at_keep = model.copy()
        db.write([Put(keys[3], b"c")])
        db.flush_memtable()  # an L0 that only the compactor's expired checkpoint pins
        admin.compact(l0=None)
        db.write([Put(keys[4], b"d")])
        db.flush_memtable()
    # Every clone is made at "keep", so every final checkpoint in src pins the manifest
    # "keep" pins: releasing one does not change src's live set, whichever GC runs first.
    clone(fs, c1, [CloneSource(src, keep.id)])
    c1_model = at_keep.copy()
    with OfficialDb.open(fs, c1, no_gc, model=c1_model) as db:
        db.write([Put(b"c1", b"own")])
        db.flush_memtable()
    clone(fs, c2, [CloneSource(c1)])
    c2_model = c1_model.copy()
    with OfficialDb.open(fs, c2, no_gc, model=c2_model) as db:
        db.write([Put(b"c2", b"own")])
        db.flush_memtable()
    clone(fs, det, [CloneSource(src, keep.id)])
    det_model = at_keep.copy()
    with OfficialDb.open(fs, det, no_gc, model=det_model) as db:
        db.write([Put(b"zz", b"mine")])
        db.flush_memtable()
        admin = OfficialAdmin(fs, det)
        admin.compact(l0=None, runs=len(admin.sorted_run_ids()))  # rewrites every src SST
    clone(fs, gone, [CloneSource(src, keep.id)])
    store = open_store("file:///")
    for name in (src, c1, c2, det):
        _expire_checkpoints(store, name)
    destroy(gone, store, soft=True, clock=FakeClock(int(time.time() * 1000) - 60_000))
    src_latest = ManifestStore(store, src).read_latest().id
    before = tmp_path / "before"
    shutil.copytree(fam, before)  # copy2: modification times are kept

    def collect(concurrency: int, order: list[str]) -> dict[str, Any]:
        conf = tmp_path / f"gc{concurrency}.toml"
        conf.write_text(f"[gc]\ndb_concurrency = {concurrency}\ndb_delete_grace = \"0s\"\n"
                        "driver_listing_max = 0\nlist_partitions = 2\n")
        args = build_parser().parse_args([
            *[a for n in order for a in ("--db", f"file:///{n}")],
            "--min-age", "0s", "--force", "--no-dry-run", "--conf", str(conf)])
        report, code = run(spark, load_settings(args.conf), args)
        assert code == 0, report
        by_db = {r["db"].rsplit("/", 1)[1]: r for r in report["databases"]}
        assert {n: r["status"] for n, r in by_db.items()} == dict.fromkeys(by_db, "success")
        return by_db

    # Clones first, so that they run alongside the parent rather than after it.
    at_once = collect(4, [c2, det, src, gone, c1])
    assert at_once["det"]["detached"][0]["status"] == "detached"
    assert at_once["gone"]["destroy"]["completed"] is True
    assert at_once["src"]["totals"]["deleted"] > 0 and at_once["src"]["expired_checkpoints"]
    concurrent = _snapshot(fam)
    shutil.rmtree(fam)
    shutil.copytree(before, fam)
    collect(1, [src, c1, c2, det, gone])
    sequential = _snapshot(fam)
    # src's manifest is written three times during the run (its expired checkpoints, the
    # detached and the destroyed clone's releases), in an order that depends on timing; with
    # min_age 0 its own manifest GC may then see an intermediate version as superseded (and
    # move its boundary to it) or not. Only those may differ; the latest is the same.
    final = ManifestStore(store, src).read_latest().id
    assert final == src_latest + 3
    racy = {f"src/manifest/{i:020d}.manifest" for i in range(src_latest + 1, final)}
    racy.add("src/gc/manifest.boundary")
    assert concurrent.keys() ^ sequential.keys() <= racy
    differs = {k for k in concurrent.keys() & sequential.keys() if concurrent[k] != sequential[k]}
    assert differs <= racy, differs
    assert f"src/manifest/{final:020d}.manifest" in concurrent.keys() & sequential.keys()
    assert not any(k.startswith("gone/") for k in concurrent)
    # of the compaction's three inputs, the one no checkpoint pins
    assert at_once["src"]["kinds"]["compacted"]["deleted"] == 1
    for name in (src, c1, c2, det):
        assert _dangling(store, name) == [], name
    for name, expected in ((src, model), (c1, c1_model), (c2, c2_model), (det, det_model)):
        with OfficialReader.open(fs, name) as r:
            assert r.scan() == expected.items(), name
    with OfficialReader.open(fs, src, checkpoint=keep.id) as r:
        assert r.scan() == at_keep.items()
