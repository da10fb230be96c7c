"""``slate compact``/``slate gc --format json`` print the report of ``jobs/compact.py``/
``jobs/gc.py`` for one database: the same keys at every level (issue 12). Both sides run
without Spark: the job's Spark task runner and GC backend are replaced by the in-process
ones the CLI uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import slatelib.spark.compaction
import slatelib.spark.gc
from slatelib.cli import main as slate
from slatelib.core.row import VALUE
from slatelib.jobs import compact as compact_job
from slatelib.jobs import gc as gc_job
from slatelib.jobs._common import settings_from
from slatelib.objstore import open_store
from slatelib.ops.compaction import ThreadTaskRunner
from slatelib.ops.gc.backend import LocalBackend
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db
from tests.unit.gc_support import DbWriter, manifest


def shape(report: dict[str, Any]) -> dict[str, Any]:
    """The keys of the report, of its totals and of its one database entry."""
    [db] = report["databases"]
    return {"top": list(report), "totals": sorted(report["totals"]), "db": sorted(db)}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert slate(["--format", "json", *argv]) == 0
    out, err = capsys.readouterr()
    report: dict[str, Any] = json.loads(out.splitlines()[-1])
    assert err.strip().endswith(report["headline"])
    return report


def job(module: Any, spark: Any, *argv: str) -> dict[str, Any]:
    args = module.build_parser().parse_args(list(argv))
    report, code = module.run(spark, settings_from(args), args)
    assert code == 0, report
    return dict(report)


def compaction_db(root: Path) -> str:
    store = open_store(f"file://{root}")
    new_db(store, "db")
    for s in range(1, 4):
        flush_l0(store, "db", [(b"k%03d" % i, s, VALUE, b"v%d" % s, None, NOW_MS)
                               for i in range(0, 300, s)])
    (root / "c.toml").write_text("[compaction]\nmin_range_bytes = 1\n")
    return f"file://{root}/db"


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry_run", "committed"])
def test_slate_compact_prints_the_compact_jobs_report(
    dry_run: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slatelib.spark.compaction, "SparkTaskRunner",
                        lambda *_a, **_k: ThreadTaskRunner(2))
    flags = ["--policy", "l0", "--parallelism", "2", *(["--dry-run"] if dry_run else [])]
    ours = compaction_db(tmp_path / "cli")
    theirs = compaction_db(tmp_path / "job")
    got = cli(capsys, "--db", ours, "--conf", str(tmp_path / "cli" / "c.toml"), "compact",
              *flags)
    want = job(compact_job, None if dry_run else object(), "--db", theirs,
               "--conf", str(tmp_path / "job" / "c.toml"), *flags)
    assert shape(got) == shape(want)
    assert got["databases"][0]["db"] == ours
    outcome = "dry_run" if dry_run else "committed"
    for r in (got, want):
        assert (r["job"], r["status"], r["dry_run"]) == ("compact", "success", dry_run)
        assert (r["databases"][0]["outcome"], r["databases"][0]["status"]) == (outcome, "success")
        assert r["totals"]["rows_in"] == (0 if dry_run else 550)
    # the same headline but for the time and the tasks' share of execute (both timings)
    def timeless(headline: str) -> list[str]:
        return [p for p in headline.split(";")[:-1] if "% of execute" not in p]

    assert timeless(got["headline"]) == timeless(want["headline"])
    assert ("% of execute" in got["headline"]) == ("% of execute" in want["headline"]) \
        == (not dry_run)


def gc_db(root: Path) -> str:
    w = DbWriter(open_store(f"file://{root}"), "db")
    w.manifests_upto(3, manifest(replay_after=2, last_seen=2))
    w.wal(1)
    w.wal(2)
    return f"file://{root}/db"


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry_run", "deleting"])
def test_slate_gc_prints_the_gc_jobs_report(
    dry_run: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slatelib.spark.gc, "SparkBackend", lambda *_a, **_k: LocalBackend())
    flags = ["--min-age", "0s", "--force", "--dry-run" if dry_run else "--no-dry-run"]
    ours, theirs = gc_db(tmp_path / "cli"), gc_db(tmp_path / "job")
    got = cli(capsys, "--db", ours, "gc", *flags)
    want = job(gc_job, None, "--db", theirs, *flags)
    capsys.readouterr()
    assert shape(got) == shape(want)
    assert sorted(got["totals"]["kinds"]) == sorted(want["totals"]["kinds"])
    assert got["databases"][0]["db"] == ours
    for r in (got, want):
        assert (r["job"], r["status"], r["dry_run"], r["min_age_s"]) == ("gc", "success",
                                                                         dry_run, 0)
        assert r["databases"][0]["status"] == "success"
        assert r["totals"]["to_delete"] == 3
    assert got["headline"].split(";")[:-1] == want["headline"].split(";")[:-1]
