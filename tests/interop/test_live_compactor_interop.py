"""D1 of the reliability issue: an official 0.17 writer runs with its embedded compactor
on (0.17's default settings) and keeps writing while our compaction is started again and
again, as a scheduled DAG would start it.

By default every run refuses (exit 7, ``compactor_active``) before its first write, and the
official writer keeps running. With ``--takeover`` our run fences the official compactor,
and this records what 0.17 then does: the whole official ``Db`` closes with
``Closed(FENCED)`` within a few compactor polls, every write it acknowledged as durable
stays readable, and a writer reopened with ``compactor_options = null`` works on top of our
compaction, which no longer needs ``--takeover``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import pytest
from slatedb.uniffi import Settings as OfficialSettings

from slatelib.cli.app import main as slate_main
from slatelib.config import CompactionSettings, Settings
from slatelib.errors import CompactorActiveError
from slatelib.exit_codes import EXIT_COMPACTOR_ACTIVE
from slatelib.jobs import compact as compact_job
from slatelib.objstore import open_store
from slatelib.ops.compaction import run_compaction
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from tests.interop.official import DbSettings, OfficialDb, OfficialReader, Put, run, to_batch

pytestmark = pytest.mark.interop

PATH = "db"
SETTINGS = Settings(compaction=CompactionSettings(policy="l0", min_range_bytes=1))
POLL_S = 5.0  # 0.17's default compactor poll_interval


def default_compactor() -> DbSettings:
    """0.17's default compactor options, unchanged (compactor=False would write null; the
    extra key puts the defaults back)."""
    co = json.loads(OfficialSettings.default().to_json_string())["compactor_options"]
    assert co["poll_interval"] == "5s"
    return DbSettings(compactor=False, flush_interval="20ms",
                      extra={"compactor_options": json.dumps(co)})


class DurableWriter:
    """Writes batches to an official Db, awaiting each one durable, and remembers what was
    acknowledged."""

    def __init__(self, db: OfficialDb) -> None:
        self.db = db
        self.acked: dict[bytes, bytes] = {}
        self.n = 0

    def batch(self, rows: int = 40) -> None:
        ops = [Put(b"k%06d" % (self.n + i), b"v%06d" % (self.n + i)) for i in range(rows)]
        handle = run(self.db.db.write(to_batch(ops)))
        run(handle.await_durable())
        for op in ops:
            self.acked[op.key] = op.value
        self.n += rows


def job_args(root: Path, *extra: str) -> argparse.Namespace:
    return compact_job.build_parser().parse_args(
        ["--db", f"file://{root}/{PATH}", "--policy", "l0", *extra])


def epoch(root: Path) -> int:
    return ManifestStore(open_store(f"file://{root}"), PATH).read_latest().value.compactor_epoch


def claims(root: Path) -> list[str]:
    return [m.path for m in open_store(f"file://{root}").list(DbPaths(PATH).claims_dir)]


def official_scan(root: Path) -> dict[bytes, bytes]:
    with OfficialReader.open(root, PATH) as r:
        return dict(r.scan())


def test_scheduled_runs_refuse_a_live_official_compactor_and_the_writer_keeps_running(
    tmp_path: Path,
) -> None:
    with OfficialDb.open(tmp_path, PATH, default_compactor()) as db:
        w = DurableWriter(db)
        for _ in range(3):
            w.batch()
            db.flush_memtable()
        held = epoch(tmp_path)
        assert held >= 1  # the embedded compactor claimed an epoch when the Db opened
        for attempt in range(3):  # "every minute", compressed
            w.batch()
            db.flush_memtable()
            report, code = compact_job.run(None, SETTINGS, job_args(tmp_path))
            assert code == EXIT_COMPACTOR_ACTIVE, report
            [one] = report["databases"]
            assert one["status"] == "compactor_active"
            assert "--takeover" in one["error"]["message"]
            assert slate_main(["--db", f"file://{tmp_path}/{PATH}", "compact"]) == \
                EXIT_COMPACTOR_ACTIVE
            with pytest.raises(CompactorActiveError):
                run_compaction(PATH, open_store(f"file://{tmp_path}"), settings=SETTINGS)
            assert epoch(tmp_path) == held and claims(tmp_path) == [], attempt
        deadline = time.monotonic() + 2.5 * POLL_S  # more than two compactor polls
        while time.monotonic() < deadline:
            w.batch(10)
            time.sleep(0.2)
        w.batch()  # still open, still durable
        assert db.get(b"k%06d" % (w.n - 1)) == b"v%06d" % (w.n - 1)
    assert official_scan(tmp_path) == w.acked


def test_takeover_fences_the_official_compactor_and_0_17_closes_its_db(tmp_path: Path) -> None:
    db = OfficialDb.open(tmp_path, PATH, default_compactor())
    w = DurableWriter(db)
    error: Any = None
    try:
        for _ in range(3):
            w.batch()
            db.flush_memtable()
        held = epoch(tmp_path)
        report, code = compact_job.run(None, SETTINGS, job_args(tmp_path, "--takeover"))
        assert code == 0, report
        [one] = report["databases"]
        assert one["outcome"] == "committed" and one["compactor_epoch"] == held + 1
        assert one["compactor"]["holder"] == "foreign"
        deadline = time.monotonic() + 4 * POLL_S
        while time.monotonic() < deadline:
            try:
                w.batch(10)
            except Exception as exc:  # what 0.17 raises once its compactor is fenced
                error = exc
                break
            time.sleep(0.1)
    finally:
        try:
            db.close(flush=None)
        except Exception:  # already closed by the fence
            pass
    assert error is not None, "the official Db kept running after its compactor was fenced"
    assert "fenced" in str(error).lower(), repr(error)
    # every write acknowledged as durable before the close is there
    after = official_scan(tmp_path)
    assert {k: after.get(k) for k in w.acked} == w.acked
    # reopened without a compactor, the writer keeps writing on top of our run, and our
    # next run needs no takeover: the epoch is ours now
    no_compactor = DbSettings(compactor=False, flush_interval="20ms")
    with OfficialDb.open(tmp_path, PATH, no_compactor) as db2:
        w2 = DurableWriter(db2)
        w2.n = w.n
        w2.acked = dict(after)
        w2.batch()
        db2.flush_memtable()
        report = run_compaction(PATH, open_store(f"file://{tmp_path}"), settings=SETTINGS)
        assert report.status == "committed" and report.compactor["holder"] == "ours"
        w2.batch()
    assert official_scan(tmp_path) == w2.acked
