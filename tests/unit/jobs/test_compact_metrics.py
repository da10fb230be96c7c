"""``jobs/compact.py --service`` and ``--worker`` with ``--metrics-port`` (no Spark: key
ranges on threads): a client scrapes ``/metrics`` over HTTP while the mode runs, parses it
with ``prometheus_client``'s parser and finds the databases as their manifests are."""

from __future__ import annotations

import importlib.util
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slatelib.config import WriterSettings
from slatelib.core.segments import trees
from slatelib.errors import InvalidArgumentError
from slatelib.jobs.compact import build_parser, run
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from tests.compaction_fixtures import schedule_compaction
from tests.unit.jobs.test_compact_service import SETTINGS as SERVICE_SETTINGS
from tests.unit.jobs.test_compact_service import make_db
from tests.unit.jobs.test_compact_worker import SETTINGS as WORKER_SETTINGS
from tests.unit.jobs.test_compact_worker import segmented_db

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def scrape_until(port: int, done: Callable[[Samples], bool], timeout: float = 60) -> Samples:
    deadline = time.monotonic() + timeout
    last: Samples = {}
    while time.monotonic() < deadline:
        try:
            last = scrape(port)
        except (urllib.error.URLError, ConnectionError):
            last = {}
        if last and done(last):
            return last
        time.sleep(0.05)
    raise AssertionError(f"metrics never got there: {sorted(last.items())[:40]}")


def lbl(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    return t, out


def test_service_serves_metrics_that_match_the_manifests(tmp_path: Path) -> None:
    make_db(tmp_path, "a", 4)  # size-tiered compacts these 4 L0s
    make_db(tmp_path, "b", 2)  # too few to compact: stays at 2, the (lowered) L0 limit
    port = free_port()
    settings = replace(SERVICE_SETTINGS, writer=WriterSettings(l0_max_ssts=2))
    a, b = f"file://{tmp_path}/a", f"file://{tmp_path}/b"
    args = build_parser().parse_args([
        "--service", "--db", a, "--db", b, "--run-for", "6s", "--metrics-port", str(port),
        "--metrics-host", "127.0.0.1", "--metrics-db-interval", "100ms"])
    thread, result = in_thread(lambda: run(None, settings, args))

    def settled(s: Samples) -> bool:
        return (s.get(("slatelib_compaction_jobs_finished_total",
                       lbl(db=a, outcome="committed"))) == 1
                and s.get(("slatelib_db_l0_ssts", lbl(db=a, segment=""))) == 0
                and ("slatelib_db_l0_ssts", lbl(db=b, segment="")) in s
                and (s.get(("slatelib_compaction_l0_at_limit_seconds_total", lbl(db=b)))
                     or 0) > 1.0)

    got = scrape_until(port, settled)
    store = open_store(f"file://{tmp_path}")
    for name, url in (("a", a), ("b", b)):
        m = ManifestStore(store, name).read_latest().value
        assert got[("slatelib_db_l0_ssts", lbl(db=url, segment=""))] == len(m.l0)
        assert got[("slatelib_compaction_l0_ssts", lbl(db=url))] == len(m.l0)
        assert got[("slatelib_db_sorted_runs", lbl(db=url))] == len(m.compacted)
        versions = len(list((tmp_path / name / "manifest").iterdir()))
        assert got[("slatelib_db_manifest_versions", lbl(db=url))] == versions
    assert got[("slatelib_compaction_databases", frozenset())] == 2
    assert got[("slatelib_compaction_l0_limit", frozenset())] == 2
    # a sat at 4 L0s (over the limit) only until its compaction; b stays at 2 throughout
    at_limit = {u: got[("slatelib_compaction_l0_at_limit_seconds_total", lbl(db=u))]
                for u in (a, b)}
    assert 0 < at_limit[a] <= at_limit[b], at_limit
    assert got[("slatelib_compaction_rows_in_total", lbl(db=a))] == 120
    assert got[("slatelib_compaction_db_state", lbl(db=b, state="idle"))] == 1
    if importlib.util.find_spec("slatelib.objstore.accounting") is not None:
        # request accounting built in: the polls' reads are counted (file:// counts what
        # S3 would have been sent)
        assert got[("slatelib_compaction_store_requests_total", lbl(kind="get"))] > 0
    thread.join(60)
    report, code = result[0]
    assert code == 0 and report["totals"]["compactions"] == 1
    with pytest.raises(urllib.error.URLError):  # the endpoint closes with the service
        scrape(port)


def test_worker_serves_claims_outcomes_heartbeat_lag_and_per_segment_l0(
        tmp_path: Path) -> None:
    segmented_db(tmp_path)
    store = open_store(f"file://{tmp_path}")
    schedule_compaction(store, "db")  # the first segment's two L0 views
    port = free_port()
    url = f"file://{tmp_path}/db"
    args = build_parser().parse_args([
        "--worker", "--db", url, "--run-for", "5s", "--metrics-port", str(port),
        "--metrics-host", "127.0.0.1", "--metrics-db-interval", "100ms"])
    settings = replace(WORKER_SETTINGS, writer=WriterSettings(l0_max_ssts=2))
    thread, result = in_thread(lambda: run(None, settings, args))
    labels = [t.label for t in trees(ManifestStore(store, "db").read_latest().value)]

    def compacted(s: Samples) -> bool:
        return s.get(("slatelib_compaction_jobs_finished_total",
                      lbl(db=url, outcome="compacted"))) == 1

    got = scrape_until(port, compacted)
    assert got[("slatelib_compaction_jobs_claimed_total", lbl(db=url))] == 1
    assert got[("slatelib_compaction_jobs_lost_total", lbl(db=url))] == 0
    assert got[("slatelib_compaction_jobs_running", lbl(db=url))] == 0
    assert got[("slatelib_compaction_heartbeat_lag_seconds", lbl(db=url))] == 0
    assert got[("slatelib_compaction_polls_total", frozenset())] >= 1
    # per segment L0 as the manifest has it (the worker never commits: still 2 each)
    # each segment holds 2 L0s, the (lowered) limit: the worker sees it in the stats
    got = scrape_until(port, lambda s: ("slatelib_db_l0_ssts",
                                        lbl(db=url, segment=labels[0])) in s
                       and (s.get(("slatelib_compaction_l0_at_limit_seconds_total",
                                   lbl(db=url))) or 0) > 0)
    assert got[("slatelib_db_l0_ssts_max_tree", lbl(db=url))] == 2
    m = ManifestStore(store, "db").read_latest().value
    assert {t.label: len(t.l0) for t in trees(m)} == {
        seg: got[("slatelib_db_l0_ssts", lbl(db=url, segment=seg))] for seg in labels}
    thread.join(60)
    assert result[0][1] == 0


def test_metrics_options_are_refused_where_they_do_not_apply(tmp_path: Path) -> None:
    make_db(tmp_path, "db", 1)
    args = build_parser().parse_args(["--db", f"file://{tmp_path}/db", "--metrics-port",
                                      "9100"])
    with pytest.raises(InvalidArgumentError, match="--metrics-port only apply"):
        run(None, SERVICE_SETTINGS, args)
    args = build_parser().parse_args(["--service", "--db", f"file://{tmp_path}/db",
                                      "--metrics-port", "70000"])
    with pytest.raises(InvalidArgumentError, match="--metrics-port must be"):
        run(None, SERVICE_SETTINGS, args)


def test_a_batch_run_writes_its_textfile_and_pushes_per_database(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``jobs/compact.py`` through its ``main`` (a dry run: no Spark): ``--metrics-file``
    and ``--metrics-push`` carry the report's numbers; stdout stays the JSON report."""
    import json

    from slatelib.jobs.compact import main
    from tests.unit.metrics.test_output import Gateway

    make_db(tmp_path, "a", 4)
    make_db(tmp_path, "b", 5)
    conf = tmp_path / "c.toml"
    conf.write_text("[compaction]\nmin_range_bytes = 1\n")
    prom = tmp_path / "textfile" / "slatelib_compact.prom"
    prom.parent.mkdir()
    gateway = Gateway()
    try:
        code = main(["--db", f"file://{tmp_path}/a", "--db", f"file://{tmp_path}/b",
                     "--dry-run", "--policy", "l0", "--conf", str(conf),
                     "--metrics-file", str(prom), "--metrics-push", gateway.url])
    finally:
        gateway.close()
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and [d["outcome"] for d in report["databases"]] == ["dry_run"] * 2
    text = prom.read_text()
    got = {(s.name, frozenset(s.labels.items())): s.value
           for f in text_string_to_metric_families(text) for s in f.samples}
    for d in report["databases"]:
        jd = {"job": "compact", "db": d["db"]}
        assert got[("slatelib_run_exit_code", lbl(**jd))] == 0
        assert got[("slatelib_run_outcome", lbl(**jd, outcome="success"))] == 1
        for phase, secs in d["phases_s"].items():
            if phase != "total":
                assert got[("slatelib_run_phase_seconds", lbl(**jd, phase=phase))] == secs
    assert got[("slatelib_job_seconds", lbl(job="compact"))] == report["seconds"]
    assert got[("slatelib_job_databases", lbl(job="compact"))] == 2
    paths = sorted(p for _, p, _ in gateway.requests)
    assert len(paths) == 3 and paths[2].startswith("/metrics/job/compact/selection/")
    assert all(p.startswith("/metrics/job/compact/db@base64/") for p in paths[:2])
