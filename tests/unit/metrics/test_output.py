"""The metrics' I/O shell: the textfile is replaced atomically, each Pushgateway group is
one PUT whose path carries job and database (so runs over other databases never replace
it), and ``/metrics`` serves the latest published status over HTTP."""

from __future__ import annotations

import base64
import hashlib
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slatelib.metrics.output import (
    StandingMetrics,
    emit_run_metrics,
    push_groups,
    push_run_metrics,
    write_run_textfile,
)

REPORT: dict[str, Any] = {
    "job": "gc", "status": "success", "seconds": 2.0, "dry_run": False,
    "totals": {"databases": 2, "failed": 0},
    "databases": [
        {"db": "s3://bucket/tenants/a", "exit_code": 0,
         "totals": {"deleted": 4, "deleted_bytes": 400}},
        {"db": "s3://bucket/tenants/b", "exit_code": 0,
         "totals": {"deleted": 1, "deleted_bytes": 10}}]}


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_textfile_is_written_whole_and_parses(tmp_path: Path) -> None:
    path = tmp_path / "slatelib_gc.prom"
    path.write_text("old content\n")
    write_run_textfile(str(path), REPORT, now_s=10.0)
    got = samples(path.read_text())
    assert got[("slatelib_run_deleted_objects",
                frozenset({("job", "gc"), ("db", "s3://bucket/tenants/a")}))] == 4
    assert got[("slatelib_job_seconds", frozenset({("job", "gc")}))] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["slatelib_gc.prom"]  # no temp left


def test_a_textfile_that_cannot_be_written_is_reported_not_raised(tmp_path: Path) -> None:
    problems = emit_run_metrics(REPORT, metrics_file=str(tmp_path / "no" / "x.prom"),
                                metrics_push=None)
    assert len(problems) == 1 and "--metrics-file" in problems[0]


class Gateway:
    """A tiny stand-in Pushgateway: records each request's method, path and body."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length", 0))
                outer.requests.append(("PUT", self.path, self.rfile.read(n)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    g = Gateway()
    yield g
    g.close()


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def test_push_puts_one_group_per_database_and_one_for_the_selection(
        gateway: Gateway) -> None:
    assert push_run_metrics(gateway.url, REPORT, now_s=10.0) == 3
    paths = [p for _, p, _ in gateway.requests]
    assert {m for m, _, _ in gateway.requests} == {"PUT"}
    digest = hashlib.sha256(b"s3://bucket/tenants/a\ns3://bucket/tenants/b").hexdigest()[:16]
    assert paths == [f"/metrics/job/gc/selection/{digest}",
                     f"/metrics/job/gc/db@base64/{b64('s3://bucket/tenants/a')}",
                     f"/metrics/job/gc/db@base64/{b64('s3://bucket/tenants/b')}"]
    run = samples(gateway.requests[0][2].decode())
    assert {n for n, _ in run} >= {"slatelib_job_seconds", "slatelib_job_exit_code"}
    assert not [n for n, _ in run if n.startswith("slatelib_run_")]
    a = samples(gateway.requests[1][2].decode())
    assert {dict(lbl)["db"] for _, lbl in a} == {"s3://bucket/tenants/a"}
    assert not [n for n, _ in a if n.startswith("slatelib_job_")]
    assert a[("slatelib_run_deleted_bytes",
              frozenset({("job", "gc"), ("db", "s3://bucket/tenants/a")}))] == 400


def test_a_single_database_run_pushes_one_group_with_everything(gateway: Gateway) -> None:
    one = {**REPORT, "databases": REPORT["databases"][:1]}
    assert push_run_metrics(gateway.url, one, now_s=10.0) == 1
    [(_, path, body)] = gateway.requests
    assert path == f"/metrics/job/gc/db@base64/{b64('s3://bucket/tenants/a')}"
    names = {n for n, _ in samples(body.decode())}
    assert {"slatelib_job_seconds", "slatelib_run_deleted_bytes"} <= names


def test_groups_of_runs_over_other_databases_never_coincide() -> None:
    def keys(*dbs: str) -> set[tuple[tuple[str, str], ...]]:
        report = {**REPORT, "databases": [{"db": d, "exit_code": 0} for d in dbs]}
        return {tuple(sorted(g.key.items())) for g in push_groups(report)}

    ab, ac, a = keys("x/a", "x/b"), keys("x/a", "x/c"), keys("x/a")
    assert len(ab) == 3 and ab & ac == {(("db", "x/a"), ("job", "gc"))}
    assert keys("x/b", "x/a") == ab  # the same selection, in any order: the same groups
    assert a <= ab  # a later run over x/a alone replaces only x/a's group


def test_push_to_nothing_is_reported_not_raised() -> None:
    problems = emit_run_metrics(REPORT, metrics_file=None,
                                metrics_push="http://127.0.0.1:9")  # nothing listens
    assert len(problems) == 1 and "--metrics-push" in problems[0]


def test_standing_metrics_serve_the_latest_status_over_http() -> None:
    t = [0.0]
    m = StandingMetrics(l0_limit=2, clock=lambda: t[0])
    url = m.serve(0, "127.0.0.1")
    try:
        def scrape() -> dict[Any, float]:
            with urllib.request.urlopen(url, timeout=10) as r:
                return samples(r.read().decode())

        # nothing published yet: only the process's own store requests (request accounting)
        assert not [k for k in scrape() if k[0].startswith("slatelib_")
                    and not k[0].startswith("slatelib_compaction_store_")]
        db = {"db": "d", "state": "idle", "l0": 3, "sorted_runs": 1, "compactions": 2}
        m.publish({"service": "s", "databases": [db]})
        t[0] = 12.0
        m.publish({"service": "s", "databases": [{**db, "l0": 0, "compactions": 3}]})
        got = scrape()
        d = frozenset({("db", "d")})
        assert got[("slatelib_compaction_l0_ssts", d)] == 0
        assert got[("slatelib_compaction_jobs_finished_total",
                    frozenset({("db", "d"), ("outcome", "committed")}))] == 3
        assert got[("slatelib_compaction_l0_at_limit_seconds_total", d)] == 12
    finally:
        m.close()


def test_per_database_families_are_the_databases_stats(tmp_path: Path) -> None:
    """The standing modes' per-database families, collected from real databases: the
    numbers are what the manifest and the files say; a database that cannot be read counts
    an error and shows nothing else."""
    import random
    import time

    from slatelib.core.row import VALUE
    from slatelib.objstore import open_store
    from slatelib.ops.checkpoint import create_checkpoint
    from slatelib.store.manifest_store import ManifestStore
    from tests.compaction_fixtures import NOW_MS, flush_l0, new_db

    store = open_store(f"file://{tmp_path}")
    new_db(store, "db")
    rng = random.Random(7)
    for seq in (1, 2, 3):
        flush_l0(store, "db", [(b"k%03d" % k, seq, VALUE, b"v", None, NOW_MS)
                               for k in rng.sample(range(100), 20)])
    create_checkpoint("db", store, lifetime=3600)
    m = StandingMetrics(l0_limit=8)
    m.start_db_stats(lambda: [("file:///db", store, "db"), ("file:///gone", store, "gone")],
                     3600, worker=False)
    try:
        deadline = time.monotonic() + 30
        got: dict[Any, float] = {}
        while time.monotonic() < deadline:
            got = samples(m.exposition().decode())
            if ("slatelib_db_stats_errors", frozenset({("db", "file:///gone")})) in got \
                    and ("slatelib_db_checkpoints", frozenset({("db", "file:///db")})) in got:
                break
            time.sleep(0.02)
    finally:
        m.close()
    d = frozenset({("db", "file:///db")})
    latest = ManifestStore(store, "db").read_latest().value
    compacted = list((tmp_path / "db" / "compacted").iterdir())
    assert got[("slatelib_db_l0_ssts", d | {("segment", "")})] == len(latest.l0) == 3
    assert got[("slatelib_db_sst_views", d)] == 3
    assert got[("slatelib_db_sorted_runs", d)] == 0
    assert got[("slatelib_db_checkpoints", d)] == len(latest.checkpoints) == 1
    assert got[("slatelib_db_manifest_versions", d)] == \
        len(list((tmp_path / "db" / "manifest").iterdir()))
    assert got[("slatelib_db_live_bytes", d)] == sum(p.stat().st_size for p in compacted)
    assert got[("slatelib_db_stats_errors", d)] == 0
    gone = [k for k in got if ("db", "file:///gone") in k[1]]
    assert gone == [("slatelib_db_stats_errors", frozenset({("db", "file:///gone")}))]
    assert got[gone[0]] == 1


def test_databases_no_longer_watched_leave_the_scrape(tmp_path: Path) -> None:
    import time

    from slatelib.objstore import open_store
    from tests.compaction_fixtures import new_db

    store = open_store(f"file://{tmp_path}")
    for name in ("a", "b"):
        new_db(store, name)
    watched = [("A", store, "a"), ("B", store, "b")]
    m = StandingMetrics(l0_limit=8)
    m.start_db_stats(lambda: list(watched), 0.02, worker=False)

    def dbs() -> set[str]:
        return {dict(k[1])["db"] for k in samples(m.exposition().decode())
                if k[0] == "slatelib_db_sorted_runs"}

    def wait_for(want: set[str]) -> set[str]:
        deadline = time.monotonic() + 30
        while (got := dbs()) != want and time.monotonic() < deadline:
            time.sleep(0.02)
        return got

    try:
        assert wait_for({"A", "B"}) == {"A", "B"}
        del watched[1]
        assert wait_for({"A"}) == {"A"}
    finally:
        m.close()
