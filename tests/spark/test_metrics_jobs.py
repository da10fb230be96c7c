"""Metrics of the Spark jobs on the session's ``local[2]`` Spark: the service on Spark
serves ``/metrics`` (scraped over HTTP, parsed with ``prometheus_client``) matching the
manifests, and a one-shot compaction on Spark through the jobs' entry-point shell
(``run_main``) writes a textfile whose numbers are the report's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slatelib.jobs._common import run_main
from slatelib.jobs.compact import build_parser, headline, run
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from tests.spark.test_compact_job import SETTINGS, make_db
from tests.unit.jobs.test_compact_metrics import free_port, in_thread, lbl, scrape_until

pytestmark = pytest.mark.spark


def test_service_on_spark_serves_metrics_matching_the_manifests(spark: Any,
                                                               tmp_path: Path) -> None:
    for seed, name in enumerate("ab", 1):
        make_db(tmp_path, name, seed)
    urls = [f"file://{tmp_path}/{n}" for n in "ab"]
    port = free_port()
    args = build_parser().parse_args([
        "--service", *(a for u in urls for a in ("--db", u)), "--run-for", "20s",
        "--parallelism", "2", "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
        "--metrics-db-interval", "200ms"])
    thread, result = in_thread(lambda: run(spark, SETTINGS, args))

    def compacted(s: Any) -> bool:
        return all(s.get(("slatelib_compaction_jobs_finished_total",
                          lbl(db=u, outcome="committed"))) == 1
                   and s.get(("slatelib_db_sorted_runs", lbl(db=u))) == 1 for u in urls)

    got = scrape_until(port, compacted, timeout=120)
    store = open_store(f"file://{tmp_path}")
    for name, url in zip("ab", urls, strict=True):
        m = ManifestStore(store, name).read_latest().value
        assert got[("slatelib_db_l0_ssts", lbl(db=url, segment=""))] == len(m.l0) == 0
        assert got[("slatelib_db_sorted_runs", lbl(db=url))] == len(m.compacted) == 1
        assert got[("slatelib_db_sst_views", lbl(db=url))] == sum(
            len(r.views) for r in m.compacted)
        assert got[("slatelib_compaction_rows_in_total", lbl(db=url))] == 480
    thread.join(120)
    report, code = result[0]
    assert code == 0 and report["totals"]["compactions"] == 2
    for d in report["databases"]:
        assert got[("slatelib_compaction_bytes_out_total", lbl(db=d["db"]))] == d["bytes_out"]


def test_compaction_on_spark_writes_the_reports_numbers_to_its_textfile(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_db(tmp_path, "db", 3)
    prom = tmp_path / "slatelib_compact.prom"
    args = build_parser().parse_args(["--db", f"file://{tmp_path}/db", "--policy", "l0",
                                      "--metrics-file", str(prom)])
    code = run_main(args, "metrics-test", lambda _s, settings, a: run(spark, SETTINGS, a),
                    needs_spark=False, headline=headline)
    report = json.loads(capsys.readouterr().out)
    [db] = report["databases"]
    assert code == 0 and db["outcome"] == "committed"
    got = {(s.name, frozenset(s.labels.items())): s.value
           for f in text_string_to_metric_families(prom.read_text()) for s in f.samples}
    jd = {"job": "compact", "db": db["db"]}
    for key in ("rows_in", "rows_out", "bytes_in", "bytes_out"):
        assert got[(f"slatelib_run_{key}", lbl(**jd))] == db[key] > 0
    assert got[("slatelib_run_phase_seconds", lbl(**jd, phase="execute"))] == \
        db["phases_s"]["execute"]
    assert got[("slatelib_run_outcome", lbl(**jd, outcome="success"))] == 1
    assert got[("slatelib_job_seconds", lbl(job="compact"))] == report["seconds"]
