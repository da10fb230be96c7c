"""Issue 26's reviewer, end to end: the compaction service over twenty databases on the test
S3 server, official ``slatedb==0.17.0`` writers on four of them, scraped by a Prometheus
client; its reports' request counts against the server's own; the health page in Chromium.

The service runs through the jobs' entry-point shell (``run_main`` with ``jobs/compact.py``'s
``run``: settings from ``--conf``, the report written to ``--report``) on the session's
local Spark, so its compactions' key ranges run on executors.

Why two service runs. The official writers must write to the databases the service
compacts, so their requests land in the same bucket, and the server cannot tell whose a
request was. A count taken while they write would be "ours + theirs", and theirs is not
known exactly. So:

1. **Live run** (``--run-for``): the writers write (batches awaited durable, memtables
   flushed to L0) while the service compacts and a client scrapes ``/metrics``. Checked:
   per-database gauges for all twenty, equal to the manifests once the writers stop;
   bounded label values; the service's families; no write or flush stays stuck at
   ``l0_max_ssts``; and, per request kind, the report's count is at most the server's (the
   rest are the writers' and this test's manifest reads).
2. **Measured run** (``--until-idle``, ``--metrics-port`` with its database stats on): the
   writers have flushed more L0s and closed, so nothing else touches the bucket. The count
   is zeroed on the server just before, and the report's ``store_requests`` must equal the
   server's count for the bucket kind by kind: the compactions on executors, the driver's
   polls, commits and discovery listings, and the metrics' per-database stats collection.

Then ``slate health --discover ... --html --status-file`` (the service's status file points
at its history) renders a page that headless Chromium shows with 20 rows, no script errors,
and an L0-over-time chart per database; every key the official writers acknowledged reads
back with the official reader.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slatelib.cli import main as slate
from slatelib.jobs._common import run_main
from slatelib.jobs.compact import build_parser, headline, run
from slatelib.store.manifest_store import ManifestStore
from tests.integration.test_health_page import browse
from tests.interop.official import DbSettings, OfficialDb, OfficialReader, Put, s3_store, to_batch
from tests.interop.official import run as arun
from tests.s3_server import S3Bucket, create_bucket
from tests.spark.test_store_requests_jobs import s3_env  # noqa: F401 - the fixture
from tests.unit.jobs.test_compact_metrics import Samples, free_port, in_thread, lbl, scrape

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.interop]

DBS = 20
WRITTEN = 4  # databases with a live official writer
PREFIX = "fleet"
LIVE_WRITE_S = 25.0
CONF = """\
[service]
poll_interval = "200ms"
status_interval = "500ms"
discover_interval = "2s"
[compaction]
min_range_bytes = 1
"""
PER_DB = ("slatelib_db_l0_ssts", "slatelib_db_sorted_runs", "slatelib_db_sst_views",
          "slatelib_db_external_dbs", "slatelib_db_checkpoints",
          "slatelib_db_manifest_versions", "slatelib_db_wal_ssts_to_replay",
          "slatelib_db_live_bytes", "slatelib_db_gc_reclaimable_bytes",
          "slatelib_db_gc_reclaimable_objects", "slatelib_compaction_l0_ssts",
          "slatelib_compaction_sorted_runs", "slatelib_compaction_l0_at_limit_seconds_total")
SERVICE = ("slatelib_compaction_databases", "slatelib_compaction_l0_limit",
           "slatelib_compaction_last_poll_timestamp_seconds", "slatelib_compaction_db_state",
           "slatelib_compaction_jobs_running", "slatelib_compaction_jobs_finished_total",
           "slatelib_compaction_store_requests_total", "slatelib_compaction_store_bytes_read_total")


def names(i: int) -> str:
    return f"{PREFIX}/t{i:02d}"


class Writer:
    """One official writer without a compactor (the service is the only compactor, README
    "One compactor per database"); remembers what was acknowledged durable."""

    def __init__(self, bucket: S3Bucket, name: str) -> None:
        settings = DbSettings(compactor=False, flush_interval="50ms")
        self.db = OfficialDb.open(s3_store(bucket.name, endpoint=bucket.endpoint), name,
                                  settings)
        self.name = name
        self.acked: dict[bytes, bytes] = {}
        self.n = 0
        self.longest_s = 0.0

    def batch(self, rows: int) -> None:
        ops = [Put(b"%s/k%07d" % (self.name.encode(), self.n + i), b"v%07d" % (self.n + i) * 8)
               for i in range(rows)]
        t = time.monotonic()
        handle = arun(self.db.db.write(to_batch(ops)))
        arun(handle.await_durable())
        self.acked.update((op.key, op.value) for op in ops)
        self.n += rows
        self.longest_s = max(self.longest_s, time.monotonic() - t)

    def flush(self) -> None:
        t = time.monotonic()
        self.db.flush_memtable()
        self.longest_s = max(self.longest_s, time.monotonic() - t)


@pytest.fixture
def bucket(moto_endpoint: str) -> S3Bucket:
    return create_bucket(moto_endpoint)


@pytest.fixture
def fleet(bucket: S3Bucket) -> Iterator[tuple[list[Writer], dict[str, dict[bytes, bytes]]]]:
    """Twenty databases made by official writers (1 to 5 L0s each); the first four keep an
    open writer. Returns the writers and the keys acknowledged in the closed ones."""
    writers: list[Writer] = []
    closed: dict[str, dict[bytes, bytes]] = {}
    try:
        for i in range(DBS):
            w = Writer(bucket, names(i))
            for _ in range(1 + i % 5):
                w.batch(30)
                w.flush()
            if i < WRITTEN:
                writers.append(w)
            else:
                w.db.close()
                closed[w.name] = w.acked
        yield writers, closed
    finally:
        for w in writers:
            w.db.close()


def service_args(tmp_path: Path, bucket: S3Bucket, port: int, run: str, tag: str) -> list[str]:
    conf = tmp_path / "service.toml"
    conf.write_text(CONF)
    return ["--service", "--discover", f"{bucket.url}/{PREFIX}/", *run.split(),
            "--parallelism", "2", "--max-concurrent", "2", "--conf", str(conf),
            "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
            "--metrics-db-interval", "1s", "--status-file", str(tmp_path / "status.json"),
            "--status-history", str(tmp_path / "history.jsonl"),
            "--report", str(tmp_path / f"report-{tag}.json")]


def start_service(spark: Any, argv: list[str]) -> tuple[Any, list[Any]]:
    args = build_parser().parse_args(argv)
    return in_thread(lambda: run_main(
        args, "observability-fleet", lambda _s, settings, a: run(spark, settings, a),
        needs_spark=False, headline=headline))


def manifest_counts(bucket: S3Bucket, urls: dict[str, str]) -> dict[str, tuple[int, int, int]]:
    store = bucket.open()
    out = {}
    for url, name in urls.items():
        m = ManifestStore(store, name).read_latest().value
        # SST views: L0's and the sorted runs' (docs/metrics.md: all in the manifest)
        out[url] = (len(m.l0), len(m.compacted),
                    len(m.l0) + sum(len(r.views) for r in m.compacted))
    return out


def gauges(s: Samples, urls: dict[str, str]) -> dict[str, tuple[float, float, float] | None]:
    out: dict[str, tuple[float, float, float] | None] = {}
    for url in urls:
        keys = (("slatelib_db_l0_ssts", lbl(db=url, segment="")),
                ("slatelib_db_sorted_runs", lbl(db=url)), ("slatelib_db_sst_views", lbl(db=url)))
        out[url] = tuple(s[k] for k in keys) if all(k in s for k in keys) else None  # type: ignore[assignment]
    return out


def wait_for(port: int, ok: Any, timeout: float, seen: list[Samples]) -> Samples:
    deadline = time.monotonic() + timeout
    last: Samples = {}
    while time.monotonic() < deadline:
        try:
            last = scrape(port)
            seen.append(last)
        except OSError:
            last = {}
        if last and ok(last):
            return last
        time.sleep(0.5)
    raise AssertionError(f"metrics never got there: {sorted(last.items())[:60]}")


def check_cardinality(seen: list[Samples], urls: dict[str, str]) -> int:
    """No label value grows with SSTs: the db label takes only the twenty URLs, every other
    label a handful of fixed words, and the series per family stay within 20 x a few."""
    values: dict[str, set[str]] = {}
    per_family: dict[str, set[frozenset[tuple[str, str]]]] = {}
    for s in seen:
        for name, labels in s:
            per_family.setdefault(name, set()).add(labels)
            for k, v in labels:
                values.setdefault(k, set()).add(v)
    assert values["db"] <= set(urls), values["db"] - set(urls)
    assert values.get("segment", set()) <= {""}, values["segment"]
    for key, vals in values.items():
        if key != "db":
            assert len(vals) <= 12, (key, vals)
            assert not any(re.fullmatch(r"[0-9A-Z]{26}|\d{3,}", v) for v in vals), (key, vals)
    biggest = max(len(v) for v in per_family.values())
    assert biggest <= DBS * 8, sorted((len(v), k) for k, v in per_family.items())[-3:]
    return sum(len(v) for v in per_family.values())


@pytest.mark.usefixtures("s3_env")
def test_service_over_twenty_databases_scraped_counted_and_shown(
        spark: Any, bucket: S3Bucket, tmp_path: Path,
        fleet: tuple[list[Writer], dict[str, dict[bytes, bytes]]]) -> None:
    writers, closed = fleet
    urls = {f"{bucket.url}/{names(i)}": names(i) for i in range(DBS)}
    seen: list[Samples] = []

    # -- 1. live: the writers write while the service compacts and is scraped ----------
    bucket.reset_requests()
    port = free_port()
    thread, result = start_service(spark, service_args(tmp_path, bucket, port, "--run-for 100s",
                                                       "live"))
    wait_for(port, lambda s: all(g is not None for g in gauges(s, urls).values()), 60, seen)
    deadline = time.monotonic() + LIVE_WRITE_S
    rounds = 0
    while time.monotonic() < deadline:
        for w in writers:
            w.batch(40)
            if rounds % 2:
                w.flush()
        rounds += 1
        seen.append(scrape(port))
    for w in writers:  # stopped: the last flush waits for nothing
        w.batch(10)
        w.flush()

    diff: list[Any] = []

    def settled(s: Samples) -> bool:
        want = manifest_counts(bucket, urls)
        diff[:] = [(u, g, want[u]) for u, g in gauges(s, urls).items()
                   if g is None or g != tuple(float(x) for x in want[u])]
        return not diff

    try:
        last = wait_for(port, settled, 40, seen)
    except AssertionError as exc:
        raise AssertionError(f"gauges != manifests: {diff}") from exc
    for url in urls:
        for family in PER_DB:
            key = lbl(db=url, segment="") if family == "slatelib_db_l0_ssts" else lbl(db=url)
            assert (family, key) in last, (family, url)
    for family in SERVICE:
        assert any(name == family for name, _ in last), family
    assert last[("slatelib_compaction_databases", frozenset())] == DBS
    states = {u: sum(v for (n, lb), v in last.items()
                     if n == "slatelib_compaction_db_state" and ("db", u) in lb) for u in urls}
    assert set(states.values()) == {1}, states  # one state per database
    assert sum(v for (n, _), v in last.items()
               if n == "slatelib_compaction_jobs_finished_total") >= 10
    series = check_cardinality(seen, urls)
    thread.join(120)
    assert not thread.is_alive()
    assert result[0] == 0
    live = json.loads((tmp_path / "report-live.json").read_text())
    assert len(live["databases"]) == DBS and live["totals"]["compactions"] >= 10
    served = bucket.requests()["requests"]
    ours = live["store_requests"]["requests"]
    # ours is part of the server's count; the rest is the official writers'
    assert all(n <= served.get(kind, 0) for kind, n in ours.items()), (ours, served)
    assert live["store_requests"]["executors"]["total"] > 0  # the key ranges ran there
    longest = max(w.longest_s for w in writers)
    # never stuck at l0_max_ssts (without a compactor a flush there never returns); the
    # first compactions on a cold local Spark take ~15 s on a busy two-core machine
    assert longest < 60.0, longest

    # -- 2. measured: more L0s, the writers closed, nothing else on the bucket -----------
    for w in writers:
        for _ in range(4):
            w.batch(40)
            w.flush()
        w.db.close()
    bucket.reset_requests()
    port = free_port()
    thread, result = start_service(spark, service_args(tmp_path, bucket, port, "--until-idle",
                                                       "measured"))
    thread.join(180)
    assert not thread.is_alive() and result[0] == 0
    served_all = bucket.requests()
    measured = json.loads((tmp_path / "report-measured.json").read_text())
    counted = measured["store_requests"]
    assert measured["totals"]["compactions"] >= WRITTEN
    assert counted["requests"] == served_all["requests"], (counted, served_all)
    assert counted["total"] == sum(served_all["requests"].values())
    assert 0 < counted["bytes_read"] <= served_all["bytes_out"]
    assert 0 < counted["bytes_written"] <= served_all["bytes_in"]
    assert counted["executors"]["total"] > 0
    assert counted["driver"]["total"] + counted["executors"]["total"] == counted["total"]

    # -- 3. the health page from the service's status file ------------------------------
    page = tmp_path / "health.html"
    code = slate(["health", "--format", "json", "--discover", f"{bucket.url}/{PREFIX}/",
                  "--html", str(page), "--status-file", str(tmp_path / "status.json")])
    assert code == 0
    proc = browse(tmp_path, "--dump-dom", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r"<html[^>]*>", proc.stdout)
    assert m is not None, proc.stdout[:500]
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(0)))
    assert attrs.get("data-rendered") == "1" and attrs.get("data-errors") == "0", attrs
    assert attrs.get("data-rows") == str(DBS), attrs
    assert int(attrs.get("data-charts", "0")) >= DBS + 1, attrs  # runs and L0 charts
    body = proc.stdout[proc.stdout.index("<tbody>"):proc.stdout.index("</tbody>")]
    rows = re.findall(r'<tr class="status-(\w+)"><td class="db">([^<]*)</td>', body)
    assert sorted(n.rsplit("/", 1)[1] for _, n in rows) == [f"t{i:02d}" for i in range(DBS)]
    assert {s for s, _ in rows} == {"ok"}
    history = [json.loads(line) for line in
               (tmp_path / "history.jsonl").read_text().splitlines()]
    assert len(history) >= 2 and all(len(h["dbs"]) == DBS for h in history)

    # -- 4. nothing lost: every acknowledged key reads back with the official reader ------
    store = s3_store(bucket.name, endpoint=bucket.endpoint)
    for name, acked in [*((w.name, w.acked) for w in writers), *closed.items()]:
        with OfficialReader.open(store, name) as reader:
            assert dict(reader.scan()) == acked, name
    print(f"live: {live['totals']['compactions']} compactions, {rounds} write rounds, "
          f"longest write/flush {longest:.2f}s, {series} series over {len(seen)} scrapes, "
          f"server {sum(served.values())} vs ours {live['store_requests']['total']}; "
          f"measured: {measured['totals']['compactions']} compactions, "
          f"{counted['total']} requests {counted['requests']} in {measured['seconds']}s "
          f"(driver {counted['driver']['total']}, executors {counted['executors']['total']}, "
          f"server bytes in/out {served_all['bytes_in']}/{served_all['bytes_out']}, ours "
          f"written/read {counted['bytes_written']}/{counted['bytes_read']}); "
          f"history {len(history)} samples, page charts {attrs.get('data-charts')}")
