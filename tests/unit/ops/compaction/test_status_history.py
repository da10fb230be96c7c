"""The service's status history: bounded JSON Lines, one sample a minute, written by the
service loop and read back (torn lines skipped)."""

from __future__ import annotations

import uuid
from pathlib import Path

from slatelib.config import ServiceSettings, Settings
from slatelib.objstore import open_store
from slatelib.ops.compaction.service import CompactionService, ServiceDb
from slatelib.ops.compaction.status_history import (
    HistoryPoint,
    StatusHistory,
    parse_history,
    read_status_history,
)
from slatelib.testing.clock import FakeClock
from tests.compaction_fixtures import flush_l0, new_db
from tests.unit.ops.compaction.test_service import make_db


def test_the_file_keeps_the_newest_samples(tmp_path: Path) -> None:
    path = tmp_path / "h" / "history.jsonl"
    h = StatusHistory(str(path), kept=8, interval_s=60)
    for i in range(25):
        assert h.due(i * 60.0)
        h.append(1000 * i, i * 60.0, {"a": (i, 1), "b": (None, None)})
        assert not h.due(i * 60.0 + 59)
        assert len(path.read_text().splitlines()) <= 10  # kept + a quarter
    got = read_status_history(str(path))
    assert [p.l0 for p in got["a"]][-8:] == list(range(17, 25))
    assert got["b"][-1] == HistoryPoint(24_000, None, None)
    # a second writer (a restarted service) counts the lines already there
    again = StatusHistory(str(path), kept=8)
    for i in range(3):
        again.append(99, 0.0 + i, {"a": (0, 0)})
    assert len(path.read_text().splitlines()) <= 10


def test_unparsable_lines_are_skipped() -> None:
    lines = ['{"at_ms": 5, "dbs": {"a": [1, 2]}}', '{"at_ms": 6, "dbs": {"a": [3', "junk",
             '{"at_ms": 7, "dbs": {"a": [4, "x"], "b": 3}}']
    assert parse_history(lines) == {"a": [HistoryPoint(5, 1, 2), HistoryPoint(7, 4, None)]}


def test_the_service_appends_l0_depth_once_a_minute(tmp_path: Path) -> None:
    store = open_store(f"memory://{uuid.uuid4().hex}/")
    make_db(store, "a", 2)
    new_db(store, "b")
    path = tmp_path / "history.jsonl"
    clock = FakeClock()
    svc = CompactionService(
        [ServiceDb("db:a", "a", store), ServiceDb("db:b", "b", store)],
        settings=Settings(service=ServiceSettings(poll_interval=10.0, status_interval=10.0,
                                                  status_history=str(path))),
        clock=clock)
    for _ in range(4):  # polls every 10 s; a sample at most every 60 s
        svc.step()
        assert svc.join(30)
        clock.advance(20.0)
        flush_l0(store, "b", [(b"k", 1, 0, b"v", None, 0)])
    svc.step()
    got = read_status_history(str(path))
    assert [p.at_ms for p in got["db:a"]] == [got["db:a"][0].at_ms, got["db:a"][0].at_ms + 60_000]
    assert [p.l0 for p in got["db:a"]] == [2, 2]  # below min_compaction_sources: stays
    assert [p.l0 for p in got["db:b"]][-1] == 3  # L0 grew between the samples
