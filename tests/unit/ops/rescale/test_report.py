"""The rescale job's report and headline (slatelib/ops/rescale/report.py): the shape every
job shares (slatelib/ops/job_report.py), one entry per source and target."""

from __future__ import annotations

import io

from slatelib.objstore import ObjectStore
from slatelib.ops.progress import progress_output
from slatelib.ops.rescale import split_database
from slatelib.ops.rescale.report import rescale_headline, rescale_report
from slatelib.testing.clock import FakeClock
from tests.unit.ops.rescale.support import make_source


def test_a_split_report_has_the_shared_top_level_and_an_entry_per_database() -> None:
    result = {"outcome": "done", "sources": [{"path": "src"}],
              "targets": [{"path": "s-0", "keys": 4, "bytes": 2000},
                          {"path": "s-1", "keys": 6, "bytes": 3000}],
              "validation": {"ok": True}}
    r = rescale_report("split", 0, result, seconds=0.5, dry_run=False)
    assert list(r)[:4] == ["job", "status", "headline", "seconds"]
    assert list(r)[-2:] == ["totals", "databases"]
    assert (r["job"], r["status"], r["command"], r["exit_code"]) == ("rescale", "success",
                                                                      "split", 0)
    assert r["totals"] == {"databases": 3, "failed": 0, "sources": 1, "targets": 2,
                           "keys": 10, "bytes": 5000}
    assert [(d["db"], d["role"]) for d in r["databases"]] == [
        ("src", "source"), ("s-0", "target"), ("s-1", "target")]
    assert r["headline"] == "split src into 2 databases (10 keys, 5.0 kB); validated; 0.50 s"


def test_a_failed_or_dry_merge_says_so_in_its_headline() -> None:
    err = {"error": {"type": "ConflictError", "message": "lost a race"}}
    r = rescale_report("merge", 4, err, seconds=1.0, dry_run=False)
    assert r["totals"]["failed"] == 1 and r["databases"] == []
    assert r["headline"] == "merge failed (conflict): lost a race; 1.0 s"
    dry = {"outcome": "dry_run", "sources": [{"path": "a"}, {"path": "b"}],
           "targets": [{"path": "ab", "estimated_bytes": 3000}]}
    r = rescale_report("merge", 0, dry, seconds=0.2, dry_run=True)
    assert rescale_headline(r) == ("dry run: would merged 2 databases into ab (~3.0 kB); "
                                   "nothing written; 0.20 s")


def test_every_phase_of_a_split_shows_on_the_progress_output(
        store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock)
    stream = io.StringIO()
    with progress_output(True, interval_s=0.0, stream=stream, tty=False):
        report = split_database("src", store, ["s-0", "s-1"], clock=clock).to_dict()
    lines = stream.getvalue().splitlines()
    shown = [x.split("  ")[0] for x in lines if x.startswith("rescale split ")]
    phases = [p for p in report["phases_s"] if p != "total"]
    assert phases and {f"rescale split {p}" for p in phases} <= set(shown)
    assert all("  done in " in x for x in lines if x.startswith("rescale split "))

