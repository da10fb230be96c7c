"""``slate gc`` and ``slate compact`` with their progress (slatelib/cli/progress.py) on
stderr: a line rewritten in place when stderr is a terminal (run here under a
pseudo-terminal), plain lines with ``--progress`` when it is not, nothing by default then;
stdout stays JSON throughout."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slatelib.cli.app import main
from slatelib.core.row import VALUE
from slatelib.objstore import open_store
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db
from tests.unit.gc_support import DbWriter, manifest

ROOT = Path(__file__).resolve().parents[3]


def slate_on_a_terminal(*argv: str) -> tuple[int, str, str]:
    """Run ``slate`` in a new process with stderr on a pseudo-terminal and stdout on a pipe:
    ``(exit code, stdout, what the terminal received)``."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from slatelib.cli.app import main; raise SystemExit(main())",
         *argv], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    received = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's last writer has gone
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.stdout.close()
    return proc.wait(timeout=60), out, received.decode().replace("\r\n", "\n")


@pytest.fixture
def gc_db(tmp_path: Path) -> str:
    w = DbWriter(open_store(f"file://{tmp_path}"), "db")
    w.manifests_upto(3, manifest(replay_after=40, last_seen=40))
    for wid in range(1, 51):
        w.wal(wid)
    return f"file://{tmp_path}/db"


@pytest.fixture
def compact_db(tmp_path: Path) -> tuple[str, str]:
    store = open_store(f"file://{tmp_path}")
    new_db(store, "db")
    for s in range(1, 4):
        flush_l0(store, "db", [(b"k%03d" % i, s, VALUE, b"v%d" % s, None, NOW_MS)
                               for i in range(0, 300, s)])
    conf = tmp_path / "c.toml"
    conf.write_text("[compaction]\nmin_range_bytes = 1\n")
    return f"file://{tmp_path}/db", str(conf)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_slate_gc_on_a_terminal_shows_listing_and_deleting_progress(gc_db: str) -> None:
    code, out, term = slate_on_a_terminal("--db", gc_db, "--format", "json", "gc",
                                          "--min-age", "0s", "--force", "--no-dry-run")
    assert code == 0, term
    *decisions, report = json_lines(out)  # stdout: JSON only
    assert report["job"] == "gc" and report["totals"]["deleted"] == 41
    assert len(decisions) == 53
    assert "\r" in term and "\x1b[K" in term  # rewritten in place
    assert "/db/wal  50 objects  " in term
    assert "/db wal  39/39 objects  " in term
    assert "/db manifest  2/2 objects  " in term
    assert "done in" in term and term.rstrip().endswith(report["headline"])


def test_slate_compact_on_a_terminal_shows_bytes_compacted(
        compact_db: tuple[str, str]) -> None:
    db, conf = compact_db
    code, out, term = slate_on_a_terminal("--db", db, "--conf", conf, "--format", "json",
                                          "compact", "--policy", "l0", "--parallelism", "2",
                                          "--max-sst-size", "2KiB")
    assert code == 0, term
    [report] = json_lines(out)
    assert report["job"] == "compact" and report["databases"][0]["outcome"] == "committed"
    [line] = [x for x in term.split("\n") if "done in" in x]
    assert line.split("\r")[-1].startswith(f"compact {db}  ")
    assert " kB/" in line and "\x1b[K" in line


def test_slate_gc_off_a_terminal_shows_progress_only_when_asked(
        gc_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--db", gc_db, "gc", "--min-age", "0s", "--force"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "gc list" not in err and json_lines(out)[-1]["job"] == "gc"
    assert main([*argv, "--progress"]) == 0
    out, err = capsys.readouterr()
    assert "\r" not in err
    # small and fast: no periodic line (one every 10 s), each phase's last line only
    [wal] = [x for x in err.splitlines() if x.startswith("gc list ") and "/db/wal  " in x]
    assert "/db/wal  50 objects  " in wal and "  done in " in wal
    assert not [x for x in err.splitlines() if x.startswith("gc delete")]  # a dry run
    assert json_lines(out)[-1]["dry_run"] is True
