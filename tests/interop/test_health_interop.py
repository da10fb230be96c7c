"""Health numbers of databases written by the official ``slatedb==0.17.0`` package, checked
against the official package's own view (``Admin.read_manifest``, ``list_manifests``,
``list_checkpoints``): L0 and sorted runs per tree, checkpoints (count, oldest creation and
expiry), manifest versions, external databases, the WAL replay point and the compactor; and
``slate health --discover`` over every golden fixture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slatelib.cli import main as slate
from slatelib.core.db_stats import DbStats
from slatelib.objstore import open_store
from slatelib.ops.db_stats import collect_db_stats
from slatelib.paths import parse_wal_name
from tests.interop.official import DbSettings, OfficialAdmin, OfficialDb, Put, run

pytestmark = pytest.mark.interop

FIXTURES = ("basic", "codec_zstd", "ckpt_src", "ckpt_clone", "ckpt_clone_proj", "ttl_merge",
            "segmented", "default_settings", "gc_collected", "seq_tracker")


def official_view(root: Path, path: str, now_s: float) -> dict[str, Any]:
    """What the official Admin says of the database."""
    admin = OfficialAdmin(root, path)
    m = admin.manifest()
    trees = [(list(m.l0), list(m.compacted))]
    trees += [(list(s.l0), list(s.compacted)) for s in m.segments]
    cps = [c for c in run(admin.admin.list_checkpoints(None))
           if not c.expire_time_secs or c.expire_time_secs > now_s]
    # the oldest by creation time, ties broken by id (as DbStats does)
    oldest = min(cps, key=lambda c: (c.create_time_secs, c.id), default=None)
    return {
        "manifest_id": m.id,
        "l0": sum(len(t[0]) for t in trees), "l0_max_tree": max(len(t[0]) for t in trees),
        "runs": sum(len(t[1]) for t in trees),
        "run_ids": [r.id for t in trees for r in t[1]],
        "checkpoints": len(cps),
        "oldest_create_ms": None if oldest is None else oldest.create_time_secs * 1000,
        "oldest_expire_ms": None if oldest is None or not oldest.expire_time_secs
        else oldest.expire_time_secs * 1000,
        "manifests": len(run(admin.admin.list_manifests(None, None))),
        "external_dbs": len(m.external_dbs),
        "replay_after_wal_id": m.replay_after_wal_id,
        "compactor_epoch": m.compactor_epoch,
        "segments": len(m.segments),
    }


def ours(s: DbStats) -> dict[str, Any]:
    return {
        "manifest_id": s.manifest_id, "l0": s.l0_ssts, "l0_max_tree": s.l0_ssts_max_tree,
        "runs": s.sorted_runs, "run_ids": [r.id for r in s.sorted_run_sizes],
        "checkpoints": s.checkpoints, "oldest_create_ms": s.oldest_checkpoint_create_ms,
        "oldest_expire_ms": s.oldest_checkpoint_expire_ms, "manifests": s.manifest_versions,
        "external_dbs": s.external_dbs, "compactor_epoch": s.compactor_epoch,
        "segments": s.segments,
    }


def wal_after(root: Path, path: str, replay_after: int) -> int:
    """Non-empty WAL SSTs on disk with an id above the official replay point."""
    n = 0
    wal = root / path / "wal"
    for f in wal.iterdir() if wal.is_dir() else ():
        wid = parse_wal_name(f.name)
        if wid is not None and wid > replay_after and f.stat().st_size > 0:
            n += 1
    return n


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_numbers_match_the_official_view(fixture_copy: Path, name: str) -> None:
    stats = collect_db_stats(open_store(f"file://{fixture_copy}"), name)
    official = official_view(fixture_copy, name, stats.now_ms / 1000)
    replay_after = official.pop("replay_after_wal_id")
    assert ours(stats) == official
    assert stats.wal_ssts_to_replay == wal_after(fixture_copy, name, replay_after)
    # every official compactor's epoch is foreign to slatelib; epoch 0: nobody's
    want = "foreign" if official["compactor_epoch"] else "free"
    assert stats.compactor_holder == want, stats.compactor_reason
    if name == "segmented":
        assert set(stats.l0_ssts_by_segment) >= {"(top-level)", "usr:"}
    assert sum(r.bytes for r in stats.sorted_run_sizes) <= stats.live_sst_bytes


def test_a_live_official_database(tmp_path: Path) -> None:
    """An official writer with its embedded compactor: L0s, a compaction into a sorted run,
    WAL-only writes, checkpoints with and without expiry, seen as the official Admin sees
    them while the writer is open."""
    with OfficialDb.open(tmp_path, "db", DbSettings()) as db:
        for batch in range(3):
            db.write([Put(b"k%04d" % i, b"v%d" % batch) for i in range(100)])
            db.flush_memtable()
        admin = OfficialAdmin(tmp_path, "db")
        admin.compact(l0=2)
        db.write([Put(b"wal-only-1", b"x")])
        db.flush_wal()
        db.write([Put(b"wal-only-2", b"y")])
        db.flush_wal()
        admin.checkpoint("kept", lifetime_ms=3_600_000)
        admin.checkpoint("forever")
        stats = collect_db_stats(open_store(f"file://{tmp_path}"), "db")
        official = official_view(tmp_path, "db", stats.now_ms / 1000)
        replay_after = official.pop("replay_after_wal_id")
        assert ours(stats) == official
        assert (stats.l0_ssts, stats.sorted_runs) == (1, 1)
        assert stats.checkpoints >= 2  # ours and whatever the writer keeps (as official)
        assert stats.wal_ssts_to_replay == wal_after(tmp_path, "db", replay_after) >= 2
        assert stats.foreign_compactor  # the writer's embedded compactor holds the epoch
        assert stats.last_compaction_ms is not None
        assert stats.last_compaction_ms <= stats.now_ms
        assert stats.sorted_run_sizes[0].bytes > 0 and stats.l0_bytes > 0


def test_slate_health_discovers_every_fixture(fixture_copy: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = slate(["health", "--format", "json", "--discover", f"file://{fixture_copy}/",
                  "--no-foreign-compactor"])
    report = json.loads(capsys.readouterr().out)
    names = sorted(p.name for p in fixture_copy.iterdir() if (p / "manifest").is_dir())
    assert [e["db"].rsplit("/", 1)[-1] for e in report["databases"]] == names
    assert report["totals"]["errors"] == 0
    foreign = {e["db"].rsplit("/", 1)[-1] for e in report["databases"]
               if e["stats"]["foreign_compactor"]}
    assert foreign and "default_settings" not in foreign  # written without a compactor
    assert code == 1 and {b["db"].rsplit("/", 1)[-1] for b in report["breaches"]} == foreign
