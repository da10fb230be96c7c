"""Service mode without Spark: the size-tiered loop over several small databases, its status
file, error backoff, stops (graceful and abandoning, by request and by SIGTERM), a database
held by a foreign compactor, ``run_for`` and discovery. Key ranges run on threads."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slatelib import DbReader
from slatelib.config import CompactionSettings, ServiceSettings, Settings, SstSettings
from slatelib.core.compactions import Compactions, CompactionStatus
from slatelib.core.row import VALUE
from slatelib.errors import InvalidArgumentError
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction
from slatelib.ops.compaction.service import (
    CompactionService,
    ServiceDb,
    status_path,
    stop_on_signals,
    write_status,
)
from slatelib.ops.engine import CompactionTask, TaskOutcome
from slatelib.paths import DbPaths
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.txn import update_versioned
from tests.compaction_fixtures import NOW_MS, add_run, flush_l0, new_db

WAIT_S = 30.0  # bound on waits for threads (never reached when the code works)


def settings(**service: Any) -> Settings:
    base: dict[str, Any] = {"poll_interval": 0.01, "status_interval": 0.01,
                            "error_backoff": 3600.0}
    base.update(service)
    return Settings(sst=SstSettings(block_size=256, min_filter_keys=4),
                    compaction=CompactionSettings(min_range_bytes=1),
                    service=ServiceSettings(**base))


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}/")


def make_db(store: ObjectStore, root: str, l0s: int, seed: int = 1,
            runs: int = 0) -> dict[bytes, bytes]:
    """``runs`` sorted runs of similar size (ids runs-1 .. 0), then ``l0s`` L0s; returns
    what a reader must see."""
    new_db(store, root)
    rng = random.Random(seed)
    live: dict[bytes, bytes] = {}
    seq = 0
    for run_id in reversed(range(runs)):
        seq += 1
        rows = sorted((b"k%03d" % k, seq, VALUE, b"r%d-%d" % (run_id, k), None, NOW_MS)
                      for k in rng.sample(range(200), 50))
        add_run(store, root, run_id, [rows])
        live.update((r[0], r[3]) for r in rows)
    for _ in range(l0s):
        seq += 1
        rows = [(b"k%03d" % k, seq, VALUE, b"v%d-%d" % (seq, k), None, NOW_MS)
                for k in rng.sample(range(200), 40)]
        flush_l0(store, root, rows)
        live.update((r[0], r[3]) for r in rows)
    return live


def scan(store: ObjectStore, root: str) -> dict[bytes, bytes]:
    with DbReader.open(root, store, mode="latest") as r:
        return dict(r.scan())


def shape(store: ObjectStore, root: str) -> tuple[int, int]:
    m = ManifestStore(store, root).read_latest().value
    return len(m.l0), len(m.compacted)


def target(store: ObjectStore, root: str) -> ServiceDb:
    return ServiceDb(f"db:{root}", root, store)


class Gate:
    """A task runner that holds a compaction until released (``entered`` once it is held)."""

    def __init__(self, on_enter: Callable[[], None] | None = None) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.on_enter = on_enter
        self.inner = ThreadTaskRunner(2)

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        out = self.inner(tasks)  # the outputs are written: only the commit is left
        self.entered.set()
        if self.on_enter is not None:
            self.on_enter()
        assert self.release.wait(WAIT_S)
        return out


def run_in_thread(service: CompactionService) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(service.run()), daemon=True)
    thread.start()
    return thread, result


# ------------------------------------------------------------------------ scheduling
def test_until_idle_compacts_each_database_by_size_tiered_rules(store: ObjectStore,
                                                                tmp_path: Path) -> None:
    live = {"many": make_db(store, "many", 10, seed=1),      # 8 oldest L0s, then 2 stay
            "few": make_db(store, "few", 3, seed=2),        # below min_compaction_sources
            "runs": make_db(store, "runs", 0, seed=3, runs=4)}  # 4 similar runs merge
    status = tmp_path / "status" / "service.json"
    service = CompactionService([target(store, n) for n in live], settings=settings(),
                                max_concurrent=2, until_idle=True, status_file=str(status))
    report, code = service.run()
    assert code == 0 and report["status"] == "success" and report["stop_reason"] == "until_idle"
    by_db = {d["db"].removeprefix("db:"): d for d in report["databases"]}
    assert shape(store, "many") == (2, 1) and by_db["many"]["compactions"] == 1
    [one] = by_db["many"]["history"]
    assert len(one["sources"]) == 8 and one["destination"] == 0 and one["rows_in"] == 320
    assert shape(store, "few") == (3, 0) and by_db["few"]["compactions"] == 0
    assert shape(store, "runs") == (0, 1) and by_db["runs"]["history"][0]["sources"] == [
        "sr:3", "sr:2", "sr:1", "sr:0"]
    for name, expected in live.items():
        assert scan(store, name) == expected, name
    assert report["totals"]["compactions"] == 2 and report["totals"]["errors"] == 0
    final = json.loads(status.read_text())
    assert final["state"] == "stopped" and final["totals"]["running"] == 0
    assert {d["db"]: (d["l0"], d["sorted_runs"]) for d in final["databases"]} == {
        "db:many": (2, 1), "db:few": (3, 0), "db:runs": (0, 1)}
    assert os.listdir(status.parent) == ["service.json"]  # no temporary file left behind


def test_after_a_commit_the_database_is_polled_again_at_once(store: ObjectStore) -> None:
    live = make_db(store, "db", 16)
    clock = FakeClock()
    service = CompactionService([target(store, "db")], settings=settings(poll_interval=60.0),
                                max_concurrent=1, clock=clock)
    for _ in range(3):  # the clock never moves: every poll after the first is a re-poll
        assert service.step() is not None
        assert service.join(WAIT_S)
    assert service.step() is not None
    report, _ = service.report()
    [db] = report["databases"]
    # 16 L0s: the 8 oldest into run 0, then the other 8 into run 1; then nothing to do
    assert [len(h["sources"]) for h in db["history"]] == [8, 8]
    assert [h["destination"] for h in db["history"]] == [0, 1]
    assert shape(store, "db") == (0, 2) and scan(store, "db") == live


def test_a_failing_database_backs_off_and_the_others_go_on(store: ObjectStore) -> None:
    make_db(store, "good", 4)
    clock = FakeClock()
    service = CompactionService([target(store, "missing"), target(store, "good")],
                                settings=settings(poll_interval=5.0, error_backoff=30.0),
                                clock=clock)
    service.step()
    assert service.join(WAIT_S)
    service.step()
    status = {d["db"]: d for d in service.status()["databases"]}
    assert status["db:missing"]["state"] == "backoff"
    assert status["db:missing"]["last_error"]["type"] == "NotADatabaseRootError"
    assert status["db:good"]["compactions"] == 1 and shape(store, "good") == (0, 1)

    live = make_db(store, "missing", 4)  # the database appears meanwhile
    clock.advance(29.0)
    service.step()  # still backing off
    assert shape(store, "missing") == (4, 0)
    clock.advance(1.0)
    service.step()
    assert service.join(WAIT_S)
    service.step()
    status = {d["db"]: d for d in service.status()["databases"]}
    assert status["db:missing"]["compactions"] == 1 and status["db:missing"]["state"] == "idle"
    assert shape(store, "missing") == (0, 1) and scan(store, "missing") == live
    service.request_stop()
    assert service.step() is None
    report, code = service.report()
    assert code == 0 and report["totals"]["errors"] == 1  # a clean stop despite the error


def test_a_database_held_by_a_foreign_compactor_is_skipped_and_reported(
    store: ObjectStore, tmp_path: Path,
) -> None:
    make_db(store, "ours", 4)
    make_db(store, "foreign", 5)
    official_fence_at(store, "foreign")
    before = ManifestStore(store, "foreign").read_latest()
    status = tmp_path / "status.json"
    service = CompactionService([target(store, "ours"), target(store, "foreign")],
                                settings=settings(), until_idle=True, status_file=str(status))
    report, code = service.run()
    ours, foreign = report["databases"]
    assert ours["compactions"] == 1 and ours["status"] == "success"
    assert (foreign["status"], foreign["compactions"], foreign["refusals"]) == \
        ("compactor_active", 0, 1)
    assert foreign["compactor"] == "foreign" and "--takeover" in foreign["last_error"]["message"]
    assert code == 7  # --until-idle reports the refusal, as the one-shot job would
    after = ManifestStore(store, "foreign").read_latest()
    assert after.id == before.id  # not a byte written: never fenced
    [entry] = [d for d in json.loads(status.read_text())["databases"] if d["db"] == "db:foreign"]
    assert entry["state"] == "refused" and entry["l0"] == 5
    assert entry["last_error"]["status"] == "compactor_active"


def official_fence_at(store: ObjectStore, root: str) -> None:
    """What an official compactor does when it starts: bump the epoch in the manifest,
    then claim it in the compactions file."""
    written = update_versioned(ManifestStore(store, root), lambda cur: replace(
        cur.value, compactor_epoch=cur.value.compactor_epoch + 1))
    cs = CompactionsStore(store, root)
    latest = cs.try_read_latest()
    cs.write(1 if latest is None else latest.id + 1,
             Compactions(compactor_epoch=written.value.compactor_epoch))


# ------------------------------------------------------------------------------ stops
def test_a_stop_while_a_compaction_runs_lets_it_commit_and_starts_nothing_new(
    store: ObjectStore, tmp_path: Path,
) -> None:
    live = make_db(store, "a", 4)
    make_db(store, "b", 4)
    gate = Gate()
    status = tmp_path / "status.json"
    service = CompactionService([target(store, "a"), target(store, "b")], settings=settings(),
                                max_concurrent=1, runner_factory=lambda db: gate,
                                status_file=str(status))
    thread, result = run_in_thread(service)
    assert gate.entered.wait(WAIT_S)
    running = wait_for_status(status, lambda s: bool(s["running"]))
    assert running["state"] == "running" and running["totals"]["queued"] == 1
    [job] = running["running"]
    assert job["db"] == "db:a" and len(job["sources"]) == 4 and job["destination"] == 0
    [a] = [d for d in running["databases"] if d["db"] == "db:a"]
    assert a["state"] == "running" and a["l0"] == 4 and a["running"]["db"] == "db:a"
    service.request_stop("SIGTERM")
    assert wait_for_status(status, lambda s: s["state"] == "stopping")["stop_reason"] == \
        "SIGTERM"
    gate.release.set()
    thread.join(WAIT_S)
    report, code = result[0]
    assert code == 0 and report["stop_reason"] == "SIGTERM"
    assert shape(store, "a") == (0, 1) and scan(store, "a") == live  # it committed
    assert shape(store, "b") == (4, 0)  # queued, never started
    assert json.loads(status.read_text())["state"] == "stopped"


def wait_for_status(path: Path, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    done = threading.Event()
    for _ in range(int(WAIT_S / 0.01)):
        if path.exists():
            status: dict[str, Any] = json.loads(path.read_text())
            if ready(status):
                return status
        done.wait(0.01)
    raise AssertionError(f"status never became ready: {path.read_text()}")


def test_sigterm_stops_the_service_gracefully(store: ObjectStore) -> None:
    live = make_db(store, "db", 4)
    gate = Gate(on_enter=lambda: os.kill(os.getpid(), signal.SIGTERM))
    gate.release.set()
    service = CompactionService([target(store, "db")], settings=settings(),
                                runner_factory=lambda db: gate)
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals(service):  # the handler runs on this (the main) thread
        report, code = service.run()
    assert signal.getsignal(signal.SIGTERM) is before
    assert (code, report["stop_reason"]) == (0, "SIGTERM")
    assert report["databases"][0]["compactions"] == 1 and scan(store, "db") == live


def test_a_second_stop_abandons_the_running_compaction_for_gc(store: ObjectStore) -> None:
    live = make_db(store, "db", 4)
    gate = Gate()
    service = CompactionService([target(store, "db")], settings=settings(),
                                runner_factory=lambda db: gate,
                                on_abandon=gate.release.set)  # as Spark cancels its jobs
    thread, result = run_in_thread(service)
    assert gate.entered.wait(WAIT_S)
    service.request_stop()
    service.request_stop()
    thread.join(WAIT_S)
    report, code = result[0]
    assert code == 0 and report["totals"]["abandoned"] == 1
    assert report["totals"]["compactions"] == 0 and report["abandoned_running"] == []
    assert shape(store, "db") == (4, 0) and scan(store, "db") == live  # nothing committed
    [entry] = CompactionsStore(store, "db").read_latest().value.recent_compactions
    assert entry.status == CompactionStatus.FAILED
    m = ManifestStore(store, "db").read_latest().value
    written = {x.path for x in store.list(DbPaths("db").compacted_dir)}
    referenced = {DbPaths("db").compacted(i) for i in m.referenced_sst_ids()}
    assert written - referenced  # the abandoned outputs: garbage for GC
    again = run_compaction("db", store, settings=settings())
    assert again.status == "committed" and scan(store, "db") == live


def test_an_abandoned_compaction_left_running_is_resolved_by_the_next_run(
    store: ObjectStore,
) -> None:
    live = make_db(store, "db", 4)
    gate = Gate()
    service = CompactionService([target(store, "db")], settings=settings(),
                                runner_factory=lambda db: gate, abandon_grace_s=0.0)
    thread, result = run_in_thread(service)
    assert gate.entered.wait(WAIT_S)
    service.request_stop()
    service.request_stop()
    thread.join(WAIT_S)
    report, _ = result[0]
    [left] = report["abandoned_running"]
    assert left["db"] == "db:db"
    [entry] = CompactionsStore(store, "db").read_latest().value.recent_compactions
    assert entry.status == CompactionStatus.RUNNING  # as a killed process leaves it
    # The next service's first run finds the L0s busy (the Running entry holds them): it
    # fences, which closes the entry as Failed, and polls again at once to compact them.
    report, code = CompactionService([target(store, "db")], settings=settings(),
                                     until_idle=True).run()
    assert code == 0 and report["databases"][0]["compactions"] == 1
    states = {c.id: c.status for c in
              CompactionsStore(store, "db").read_latest().value.recent_compactions}
    assert states.get(entry.id, CompactionStatus.FAILED) == CompactionStatus.FAILED
    gate.release.set()  # the old thread now finds itself abandoned and fenced
    assert service.join(WAIT_S)
    assert shape(store, "db") == (0, 1) and scan(store, "db") == live


def test_run_for_stops_after_the_duration(store: ObjectStore) -> None:
    make_db(store, "db", 2)
    clock = FakeClock()
    service = CompactionService([target(store, "db")], settings=settings(poll_interval=5.0),
                                run_for=60.0, clock=clock)
    assert service.step() == pytest.approx(0.01)  # the status interval is the next event
    clock.advance(59.0)
    assert service.step() is not None
    clock.advance(1.0)
    assert service.step() is None
    report, code = service.report()
    assert (code, report["stop_reason"], report["seconds"]) == (0, "run_for", 60.0)


def test_discovery_adds_new_databases_and_drops_vanished_ones(store: ObjectStore) -> None:
    make_db(store, "a", 1)
    listed = [target(store, "a")]
    clock = FakeClock()
    service = CompactionService(list(listed), settings=settings(discover_interval=60.0),
                                discover=lambda: list(listed), clock=clock)
    service.step()
    live = make_db(store, "b", 4)
    listed[:] = [target(store, "b")]
    clock.advance(59.0)
    service.step()
    assert [d["db"] for d in service.status()["databases"]] == ["db:a"]
    clock.advance(1.0)
    service.step()
    assert service.join(WAIT_S)
    service.step()
    assert [d["db"] for d in service.status()["databases"]] == ["db:b"]
    assert shape(store, "b") == (0, 1) and scan(store, "b") == live
    report, _ = service.report()
    assert [d["db"] for d in report["databases"]] == ["db:a", "db:b"]  # a stays in the report


# --------------------------------------------------------------------- arguments, status
def test_bad_arguments_are_refused_before_anything_runs(store: ObjectStore) -> None:
    db = [target(store, "db")]
    with pytest.raises(InvalidArgumentError, match="at least one database"):
        CompactionService([], settings=settings())
    with pytest.raises(InvalidArgumentError, match="max-concurrent"):
        CompactionService(db, settings=settings(), max_concurrent=0)
    with pytest.raises(InvalidArgumentError, match="poll_interval"):
        CompactionService(db, settings=settings(poll_interval=0.0))
    with pytest.raises(InvalidArgumentError, match="only local paths"):
        CompactionService(db, settings=settings(), status_file="s3://bucket/status.json")
    bad = replace(settings(), compaction=CompactionSettings(min_compaction_sources=0))
    with pytest.raises(InvalidArgumentError, match="min_compaction_sources"):
        CompactionService(db, settings=bad)


def test_status_paths_and_atomic_writes(tmp_path: Path) -> None:
    assert status_path("") is None and status_path(None) is None
    assert status_path("file:///var/run/x.json") == "/var/run/x.json"
    assert status_path("rel/x.json") == "rel/x.json"
    with pytest.raises(InvalidArgumentError):
        status_path("gs://bucket/x.json")
    path = tmp_path / "s.json"
    write_status(str(path), {"a": 1})
    write_status(str(path), {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2} and os.listdir(tmp_path) == ["s.json"]


def test_a_segmented_database_is_compacted_per_segment(store: ObjectStore,
                                                       tmp_path: Path) -> None:
    """SlateDB RFC-0024: each segment is its own tree; one compaction per segment that
    needs it, committed together; the status shows the deepest segment's L0."""
    from tests.compaction_fixtures import flush_segmented

    new_db(store, "seg")
    live: dict[bytes, bytes] = {}
    for seq in range(1, 6):  # aaa: 5 L0s, bbb: 4, ccc: 2
        rows = [(p + b"%03d" % k, seq, VALUE, b"v%d" % seq, None, NOW_MS)
                for p, n in ((b"aaa:", 5), (b"bbb:", 4), (b"ccc:", 2)) if seq <= n
                for k in range(0, 60, seq)]
        flush_segmented(store, "seg", rows)
        live.update((r[0], r[3]) for r in rows)
    status = tmp_path / "status.json"
    service = CompactionService([target(store, "seg")], settings=settings(), until_idle=True,
                                status_file=str(status))
    report, code = service.run()
    assert code == 0
    [db] = report["databases"]
    [one] = db["history"]
    assert one["compaction_id"] is None and one["destination"] is None
    assert [(s["segment"], s["destination"]) for s in one["segments"]] == [("aaa:", 0),
                                                                            ("bbb:", 1)]
    m = ManifestStore(store, "seg").read_latest().value
    assert [(s.prefix, len(s.l0), [r.id for r in s.compacted]) for s in m.segments or ()] == [
        (b"aaa:", 0, [0]), (b"bbb:", 0, [1]), (b"ccc:", 2, [])]
    assert scan(store, "seg") == live
    assert db["max_l0"] == 5  # aaa:'s five L0s before the compaction
    final = json.loads(status.read_text())["databases"][0]
    assert (final["l0"], final["sorted_runs"], final["segments"]) == (2, 1, 3)


def test_polls_of_an_unchanged_database_list_once_per_directory_and_read_nothing(
        store: ObjectStore) -> None:
    from slatelib.testing.faulty import FlakyObjectStore

    make_db(store, "db", 3)  # below min_compaction_sources: nothing to do
    run_compaction("db", store, settings=settings(), policy="l0")  # a compactions file
    flush_l0(store, "db", [(b"k", 1_000, VALUE, b"v", None, NOW_MS)])
    counted = FlakyObjectStore(store)
    clock = FakeClock()
    service = CompactionService([ServiceDb("db", "db", counted)], settings=settings(
        poll_interval=5.0), max_concurrent=1, clock=clock)
    assert service.step() is not None  # the first poll reads both latest versions
    assert [p for op, p in counted.log if op == "get" and "/manifest/" in p]
    counted.log.clear()
    for _ in range(3):
        clock.advance(5.0)
        assert service.step() is not None
    ops = [(op, p) for op, p in counted.log]
    assert sorted(op for op, _ in ops) == ["list"] * 6, ops  # manifest/, compactions/
    flush_l0(store, "db", [(b"k2", 1_001, VALUE, b"v", None, NOW_MS)])
    clock.advance(5.0)
    assert service.step() is not None
    [db] = service.report()[0]["databases"]
    assert db["l0"] == 2  # the new version was read
