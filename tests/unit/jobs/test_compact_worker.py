"""``jobs/compact.py --worker`` without Spark (driver threads), on segmented databases: a
stand-in coordinator schedules a segment's tiered compaction, which the worker executes,
and a segment drain, which it does not: that entry is logged, counted in the report and
the status file, and makes ``--until-idle`` exit non-zero. (0.17's own coordinators
never schedule drains for workers: ``tests/interop/test_worker_segments_interop.py``.)"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from slatelib.config import CompactionSettings, Settings, WorkerSettings
from slatelib.core.compactions import CompactionStatus, DrainSegmentSpec
from slatelib.core.row import VALUE
from slatelib.exit_codes import EXIT_DATA, EXIT_OK
from slatelib.ids import ulid_to_str
from slatelib.jobs.compact import build_parser, run
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from tests.compaction_fixtures import (
    NOW_MS,
    commit_reported,
    compaction_entry,
    flush_segmented,
    new_db,
    schedule_compaction,
)

SETTINGS = Settings(compaction=CompactionSettings(min_range_bytes=1),
                    worker=WorkerSettings(compactions_poll_interval=0.02,
                                          heartbeat_interval=0.05,
                                          worker_heartbeat_timeout=1.0))


def job(tmp_path: Path, *argv: str) -> tuple[dict[str, Any], int]:
    return run(None, SETTINGS, build_parser().parse_args(
        ["--worker", "--db", f"file://{tmp_path}/db", *argv]))


def segmented_db(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    new_db(store, "db")
    for seq in (1, 2):
        flush_segmented(store, "db", [(p + b"%03d" % i, seq, VALUE, b"v%d" % seq, None, NOW_MS)
                                      for p in (b"aaa:", b"bbb:") for i in range(50)])


def test_worker_executes_a_segments_compaction_and_declines_a_drain_loudly(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    segmented_db(tmp_path)
    store = open_store(f"file://{tmp_path}")
    tiered = schedule_compaction(store, "db")  # aaa:'s two L0 views
    bbb = ManifestStore(store, "db").read_latest().value.segments[1]  # type: ignore[index]
    drain = schedule_compaction(store, "db", DrainSegmentSpec(
        segment=b"bbb:", l0_view_ids=tuple(v.id for v in bbb.l0)))
    status = tmp_path / "status.json"
    with caplog.at_level(logging.WARNING):
        report, code = job(tmp_path, "--until-idle", "--status-file", str(status))
    assert code == EXIT_DATA and report["status"] == "data_error"
    [db] = report["databases"]
    assert (db["compacted"], db["declined"], db["failed"]) == (1, 1, 0)
    assert db["status"] == "data_error" and report["totals"]["declined"] == 1
    [declined] = db["declined_entries"]
    assert declined["id"] == ulid_to_str(drain) and declined["segment"] == "bbb:"
    assert "drain" in declined["reason"]
    assert [r.message for r in caplog.records if "NOT executing" in r.message
            and ulid_to_str(drain) in r.message]
    # the status file says the same
    st = json.loads(status.read_text())
    assert st["state"] == "stopped" and st["totals"]["declined"] == 1
    assert st["databases"][0]["declined_entries"][0]["id"] == ulid_to_str(drain)
    # the segment's compaction was executed: Compacted, committed by the coordinator
    assert compaction_entry(store, "db", tiered).status == CompactionStatus.COMPACTED
    assert compaction_entry(store, "db", drain).status == CompactionStatus.SCHEDULED
    commit_reported(store, "db", tiered)
    m = ManifestStore(store, "db").read_latest().value
    a, b = m.segments  # type: ignore[misc]
    assert (len(a.l0), [r.id for r in a.compacted]) == (0, [0]) and len(b.l0) == 2


def test_worker_until_idle_exits_zero_when_every_entry_was_executed(tmp_path: Path) -> None:
    segmented_db(tmp_path)
    store = open_store(f"file://{tmp_path}")
    schedule_compaction(store, "db")
    report, code = job(tmp_path, "--until-idle")
    assert code == EXIT_OK and report["totals"]["compacted"] == 1
    assert report["databases"][0]["declined"] == 0
    # the outputs it created, as requests (in this process: no Spark)
    assert report["store_requests"]["driver"]["requests"]["conditional_put"] >= 1
