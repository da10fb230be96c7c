"""The pure family builders: a job's report, the worker's and service's status and a
database's stats become the catalog's families, with bounded labels, and nothing is
invented for a value the input does not have."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from slatelib.exit_codes import EXIT_NAMES
from slatelib.metrics import METRICS, L0LimitClock, run_families, standing_families
from slatelib.metrics.families import FamilySet, db_stats_families
from slatelib.metrics.output import registry_of

ALLOWED_LABELS = {"job", "db", "kind", "phase", "outcome", "state", "segment"}


def scrape(families: list[Any]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Families through the exposition format and back, as {(sample, labels): value}."""
    text = generate_latest(registry_of(families)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def compact_report(**db: Any) -> dict[str, Any]:
    entry = {"db": "s3://b/t/a", "status": "success", "outcome": "committed",
             "rows_in": 480, "rows_out": 300, "bytes_in": 9000, "bytes_out": 4000,
             "phases_s": {"plan": 0.5, "execute": 2.0, "commit": 0.25, "total": 3.0},
             "exit_code": 0, **db}
    return {"job": "compact", "status": "success", "seconds": 7.5,
            "totals": {"databases": 2, "failed": 1},
            "databases": [entry, {"db": "s3://b/t/b", "status": "fenced", "exit_code": 3}]}


def test_catalog_labels_are_bounded_and_names_unique() -> None:
    for m in METRICS.values():
        assert set(m.labels) <= ALLOWED_LABELS, m.name
        assert m.kind in ("gauge", "counter") and m.name.startswith("slatelib_")
        assert not m.name.endswith("_total"), m.name


def test_run_families_of_a_compaction_report() -> None:
    s = scrape(run_families(compact_report(), now_s=1_700_000_000.0))
    a = {"job": "compact", "db": "s3://b/t/a"}
    assert value(s, "slatelib_run_rows_in", **a) == 480
    assert value(s, "slatelib_run_bytes_out", **a) == 4000
    assert value(s, "slatelib_run_seconds", **a) == 3.0  # the phases' total
    assert value(s, "slatelib_run_phase_seconds", **a, phase="execute") == 2.0
    assert ("slatelib_run_phase_seconds", tuple(sorted({**a, "phase": "total"}.items()))) \
        not in s
    assert value(s, "slatelib_run_exit_code", job="compact", db="s3://b/t/b") == 3
    outcomes = {o: value(s, "slatelib_run_outcome", job="compact", db="s3://b/t/b",
                         outcome=o) for o in EXIT_NAMES.values()}
    assert outcomes == {o: (1.0 if o == "fenced" else 0.0) for o in EXIT_NAMES.values()}
    assert value(s, "slatelib_job_seconds", job="compact") == 7.5
    assert value(s, "slatelib_job_exit_code", job="compact") == 0
    assert value(s, "slatelib_job_failed_databases", job="compact") == 1
    assert value(s, "slatelib_run_finished_timestamp_seconds", **a) == 1_700_000_000.0
    # a database entry without rows gives no row samples (no invented zeros)
    assert ("slatelib_run_rows_in", (("db", "s3://b/t/b"), ("job", "compact"))) not in s
    # no store_requests in the report: no request families at all
    assert not [k for k in s if "store" in k[0] or "retries" in k[0]]


def test_store_requests_per_database_and_per_run() -> None:
    sr = {"requests": {"get": 7, "list": 2, "conditional_put": 1}, "total": 10,
          "bytes_read": 1234, "bytes_written": 99, "retries": 3,
          "driver": {}, "executors": {}}
    report = compact_report(store_requests={**sr, "requests": {"get": 5}, "retries": 1})
    report["store_requests"] = sr
    s = scrape(run_families(report, now_s=0.0))
    a = {"job": "compact", "db": "s3://b/t/a"}
    assert value(s, "slatelib_run_store_requests", **a, kind="get") == 5
    assert value(s, "slatelib_run_retries", **a) == 1
    assert value(s, "slatelib_job_store_requests", job="compact", kind="list") == 2
    assert value(s, "slatelib_job_store_bytes_read", job="compact") == 1234
    assert value(s, "slatelib_job_retries", job="compact") == 3


def test_gc_export_and_rescale_map_their_own_fields() -> None:
    gc = {"job": "gc", "status": "success", "dry_run": True, "seconds": 1.0,
          "databases": [{"db": "d", "exit_code": 0, "phases_s": {"list": 0.1},
                         "totals": {"to_delete": 12, "to_delete_bytes": 3400,
                                    "deleted": 0, "deleted_bytes": 0}}]}
    s = scrape(run_families(gc, now_s=0.0))
    assert value(s, "slatelib_run_deleted_objects", job="gc", db="d") == 12
    assert value(s, "slatelib_run_deleted_bytes", job="gc", db="d") == 3400
    export = {"job": "export", "databases": [{"db": "d", "rows": 50, "bytes": 700,
                                              "exit_code": 0}]}
    s = scrape(run_families(export, now_s=0.0))
    assert value(s, "slatelib_run_rows_out", job="export", db="d") == 50
    rescale = {"job": "rescale", "exit_code": 0, "phases_s": {"clone": 1.5, "total": 2},
               "databases": [{"db": "t1", "role": "target", "keys": 10, "bytes": 80}]}
    s = scrape(run_families(rescale, now_s=0.0))
    assert value(s, "slatelib_run_rows_out", job="rescale", db="t1") == 10
    assert value(s, "slatelib_run_exit_code", job="rescale", db="t1") == 0  # the run's
    assert value(s, "slatelib_job_phase_seconds", job="rescale", phase="clone") == 1.5


def test_one_database_only_leaves_out_the_others_and_the_whole_run() -> None:
    fams = run_families(compact_report(), now_s=0.0, databases=["s3://b/t/b"],
                        whole_run=False)
    s = scrape(fams)
    assert {dict(k[1])["db"] for k in s} == {"s3://b/t/b"}
    assert not [k for k in s if k[0].startswith("slatelib_job_")]


def test_family_set_refuses_labels_outside_the_catalog() -> None:
    out = FamilySet()
    with pytest.raises(ValueError, match="labels"):
        out.add("run_rows_in", 1, job="compact", db="x", sst="01ABC")
    with pytest.raises(KeyError):
        out.add("run_no_such_metric", 1)


def test_l0_limit_clock_charges_time_to_the_depth_seen() -> None:
    c = L0LimitClock(limit=8)
    assert c.seconds("a") is None
    c.observe("a", 3, 100.0)
    c.observe("a", 8, 110.0)  # 100..110 at 3: not charged
    c.observe("a", 9, 115.0)  # 110..115 at 8: charged
    c.observe("a", 2, 125.0)  # 115..125 at 9: charged
    c.observe("a", 2, 200.0)
    assert c.seconds("a") == 15.0
    c.observe("b", None, 1.0)
    assert c.seconds("b") == 0.0


def test_worker_status_families() -> None:
    status = {"worker": "slatelib compaction worker", "polls": 42, "databases": [
        {"db": "d1", "claimed": 5, "compacted": 3, "released": 1, "lost": 1, "failed": 0,
         "declined": 2, "rows_in": 10, "rows_out": 8, "bytes_in": 100, "bytes_out": 90,
         "last_poll_at": "2026-01-01T00:00:00.000Z",
         "running": [{"id": "x", "heartbeat_age_s": 1.5}, {"id": "y", "heartbeat_age_s": 4}]},
        {"db": "d2", "claimed": 0, "running": []}]}
    s = scrape(standing_families(status, l0=L0LimitClock(8)))
    assert value(s, "slatelib_compaction_polls_total") == 42
    assert value(s, "slatelib_compaction_databases") == 2
    assert value(s, "slatelib_compaction_jobs_claimed_total", db="d1") == 5
    assert value(s, "slatelib_compaction_jobs_running", db="d1") == 2
    assert value(s, "slatelib_compaction_jobs_finished_total", db="d1",
                 outcome="compacted") == 3
    assert value(s, "slatelib_compaction_jobs_lost_total", db="d1") == 1
    assert value(s, "slatelib_compaction_heartbeat_lag_seconds", db="d1") == 4
    assert value(s, "slatelib_compaction_heartbeat_lag_seconds", db="d2") == 0
    assert value(s, "slatelib_compaction_last_poll_timestamp_seconds", db="d1") == 1767225600
    assert value(s, "slatelib_compaction_l0_limit") == 8


def test_service_status_families() -> None:
    clock = L0LimitClock(4)
    clock.observe("d1", 5, 0.0)
    clock.observe("d1", 5, 30.0)
    status = {"service": "slatelib compaction service", "databases": [
        {"db": "d1", "state": "running", "l0": 5, "sorted_runs": 2, "compactions": 3,
         "errors": 1, "refusals": 0, "abandoned": 0, "rows_in": 7,
         "running": {"sources": ["l0:1"]}},
        {"db": "d2", "state": "refused", "l0": None, "running": None}]}
    s = scrape(standing_families(status, l0=clock))
    assert value(s, "slatelib_compaction_jobs_running", db="d1") == 1
    assert value(s, "slatelib_compaction_jobs_running", db="d2") == 0
    assert value(s, "slatelib_compaction_jobs_finished_total", db="d1",
                 outcome="committed") == 3
    assert value(s, "slatelib_compaction_db_state", db="d2", state="refused") == 1
    assert value(s, "slatelib_compaction_db_state", db="d2", state="idle") == 0
    assert value(s, "slatelib_compaction_l0_ssts", db="d1") == 5
    assert value(s, "slatelib_compaction_l0_at_limit_seconds_total", db="d1") == 30
    assert ("slatelib_compaction_l0_ssts", (("db", "d2"),)) not in s


def test_db_stats_families_per_segment_and_without_segments() -> None:
    stats = {"now_ms": 5_000, "l0_ssts": 3, "l0_ssts_max_tree": 2,
             "l0_ssts_by_segment": {"aaa:": 2, "bbb:": 1}, "sorted_runs": 4,
             "sst_views": 9, "external_dbs": 1, "checkpoints": 2, "manifest_versions": 17,
             "wal_ssts_to_replay": 3, "wal_ssts_replayed": 5, "live_sst_bytes": 1000,
             "gc_reclaimable_bytes": 50, "gc_reclaimable_objects": 6,
             "last_compaction_ms": 4_000, "compactor_holder": "foreign",
             "oldest_checkpoint_age_s": 12.5}
    s = scrape(db_stats_families("d", stats))
    assert value(s, "slatelib_db_l0_ssts", db="d", segment="aaa:") == 2
    assert value(s, "slatelib_db_l0_ssts", db="d", segment="bbb:") == 1
    assert value(s, "slatelib_db_manifest_versions", db="d") == 17
    assert value(s, "slatelib_db_wal_ssts_to_replay", db="d") == 3
    assert value(s, "slatelib_db_foreign_compactor", db="d") == 1
    assert value(s, "slatelib_db_stats_timestamp_seconds", db="d") == 5
    assert value(s, "slatelib_db_stats_errors", db="d") == 0
    flat = scrape(db_stats_families("d", {**stats, "l0_ssts_by_segment": {}}))
    assert value(flat, "slatelib_db_l0_ssts", db="d", segment="") == 3
    failed = scrape(db_stats_families("d", None, errors=2))
    assert failed == {("slatelib_db_stats_errors", (("db", "d"),)): 2.0}


def test_process_request_families_show_every_kind() -> None:
    from slatelib.metrics.families import REQUEST_KINDS, process_request_families

    s = scrape(process_request_families({"list": 12, "get": 3, "bytes_read": 900}))
    assert {dict(k[1])["kind"]: v for k, v in s.items()
            if k[0] == "slatelib_compaction_store_requests_total"} == {
        k: {"list": 12, "get": 3}.get(k, 0) for k in REQUEST_KINDS}
    assert value(s, "slatelib_compaction_store_bytes_read_total") == 900
    assert value(s, "slatelib_compaction_store_retries_total") == 0
