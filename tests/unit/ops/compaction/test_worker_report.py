"""Worker mode's accounting: what a database's work left undone says (declined entries,
jobs handed back after failing, a failing poll), in the report, the status file and the
exit code of ``--until-idle``."""

from __future__ import annotations

from slatelib.exit_codes import EXIT_CONFLICT, EXIT_DATA, EXIT_OK, EXIT_UNAVAILABLE
from slatelib.ids import Ulid
from slatelib.ops.compaction.worker_report import (
    DECLINED_LISTED,
    DbStats,
    RunningJob,
    first_problem,
    worker_report,
    worker_status,
)


def declined(n: int) -> DbStats:
    s = DbStats()
    for i in range(n):
        s.declined[Ulid(i)] = {"id": str(i), "reason": "a drain"}
    return s


def test_a_declined_entry_outranks_failures_and_poll_errors() -> None:
    assert DbStats().exit_code == EXIT_OK
    failed = DbStats(failed_entries={Ulid(1): EXIT_CONFLICT}, poll_error_code=EXIT_UNAVAILABLE)
    assert failed.exit_code == EXIT_CONFLICT
    assert DbStats(poll_error_code=EXIT_UNAVAILABLE).exit_code == EXIT_UNAVAILABLE
    both = declined(1)
    both.failed_entries[Ulid(2)] = EXIT_CONFLICT
    assert both.exit_code == EXIT_DATA
    assert first_problem([DbStats(), both, failed]) == EXIT_DATA
    assert first_problem([DbStats(), DbStats()]) == EXIT_OK


def test_report_and_status_count_every_declined_entry_and_list_the_latest() -> None:
    many = declined(DECLINED_LISTED + 5)
    many.compacted = 3
    report = worker_report("w", 7, [("a", many), ("b", DbStats())], 1.23456)
    a, b = report["databases"]
    assert (a["declined"], len(a["declined_entries"]), a["status"]) == (
        DECLINED_LISTED + 5, DECLINED_LISTED, "data_error")
    assert a["declined_entries"][-1]["id"] == str(DECLINED_LISTED + 4)
    assert (b["declined"], b["status"], b["exit_code"]) == (0, "success", 0)
    assert report["totals"]["declined"] == DECLINED_LISTED + 5
    assert report["totals"]["compacted"] == 3 and report["seconds"] == 1.235
    st = worker_status("w", state="running", started_ms=0, now_ms=1000, polls=7,
                       databases=[("a", many, [RunningJob("01X", 4, 1, 2.5)]),
                                  ("b", DbStats(), [])])
    assert st["totals"]["declined"] == DECLINED_LISTED + 5 and st["running"] == 1
    assert st["databases"][0]["running"] == [{"id": "01X", "ranges": 4, "ranges_done": 1,
                                              "heartbeat_age_s": 2.5}]
    assert "jobs" not in st["databases"][0] and st["databases"][1]["last_poll_at"] is None
