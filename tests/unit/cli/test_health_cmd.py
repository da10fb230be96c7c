"""``slate health``: JSON and table output, thresholds (exit 1), --discover, unreadable
databases (their own exit code while the others are still checked), the HTML page and the
service's status history."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slatelib.cli import main as slate
from slatelib.core.row import VALUE
from slatelib.exit_codes import EXIT_DATA, EXIT_USAGE
from slatelib.objstore import open_store
from slatelib.ops.compaction.status_history import StatusHistory
from slatelib.paths import DbPaths
from tests.compaction_fixtures import NOW_MS, add_run, flush_l0, new_db


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """``fleet/a``: 3 L0 SSTs and a sorted run; ``fleet/b``: empty; ``fleet/sub/c``: 1 L0."""
    store = open_store(f"file://{tmp_path}")
    for root, l0s in (("fleet/a", 3), ("fleet/b", 0), ("fleet/sub/c", 1)):
        new_db(store, root)
        if root == "fleet/a":
            add_run(store, root, 0, [[(b"k%03d" % i, 1, VALUE, b"r", None, NOW_MS)
                                      for i in range(50)]])
        for s in range(l0s):
            flush_l0(store, root, [(b"k%03d" % i, s + 2, VALUE, b"v", None, NOW_MS)
                                   for i in range(20)])
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = slate(["health", "--format", "json", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def by_db(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["db"].rsplit("/", 1)[-1]: e for e in report["databases"]}


def test_json_has_one_entry_per_database(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, err = run(capsys, "--db", f"file://{fleet}/fleet/a",
                            "--db", f"file://{fleet}/fleet/b")
    assert code == 0 and report["status"] == "ok" and report["breaches"] == []
    dbs = by_db(report)
    assert list(dbs) == ["a", "b"]
    a = dbs["a"]["stats"]
    assert (a["l0_ssts"], a["sorted_runs"], a["manifest_versions"]) == (3, 1, 5)
    assert len(a["sorted_run_sizes"]) == 1 and a["sorted_run_sizes"][0]["bytes"] > 0
    assert dbs["b"]["stats"]["l0_ssts"] == 0 and dbs["b"]["health"] == "ok"
    assert "2 databases: 2 ok" in err


def test_a_crossed_threshold_exits_1_naming_database_and_threshold(
        fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = run(capsys, "--discover", f"file://{fleet}/fleet/", "--max-l0", "2",
                          "--max-manifests", "100")
    assert code == 1 and report["status"] == "breach"
    assert [(b["db"].rsplit("/", 1)[-1], b["threshold"], b["value"], b["limit"])
            for b in report["breaches"]] == [("a", "--max-l0", 3, 2)]
    assert report["thresholds"] == {"--max-l0": 2, "--max-manifests": 100}
    # at the limit is not over it
    code, report, _ = run(capsys, "--discover", f"file://{fleet}/fleet/", "--max-l0", "3")
    assert code == 0 and report["totals"] == {"databases": 3, "ok": 3, "breaches": 0,
                                              "errors": 0}


def test_discover_finds_every_database_below_the_prefix(
        fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = run(capsys, "--discover", f"file://{fleet}/fleet")
    assert code == 0
    assert [e["db"] for e in report["databases"]] == [
        f"file://{fleet}/fleet/{n}" for n in ("a", "b", "sub/c")]


def test_an_unreadable_database_gets_its_code_and_the_others_are_checked(
        fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = DbPaths.of("fleet/bad")
    open_store(f"file://{fleet}").put(bad.manifest(1), b"not a manifest")
    code, report, _ = run(capsys, "--discover", f"file://{fleet}/fleet/", "--max-l0", "1")
    assert code == EXIT_DATA and report["status"] == "data_error"
    dbs = by_db(report)
    assert dbs["bad"]["health"] == "error" and dbs["bad"]["exit_code"] == EXIT_DATA
    assert dbs["bad"]["error"]["type"] == "UnsupportedFormatVersionError"  # a DataError
    assert dbs["a"]["health"] == "breach" and dbs["c"]["health"] == "ok"  # still checked
    code, report, _ = run(capsys, "--db", f"file://{fleet}/fleet/a",
                          "--db", f"file://{fleet}/nothing")
    assert code == EXIT_DATA and by_db(report)["nothing"]["error"]["type"] == \
        "NotADatabaseRootError"


def test_no_database_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert slate(["health", "--max-l0", "1"]) == EXIT_USAGE
    assert "no database given" in capsys.readouterr().err


def test_table_has_a_row_per_database(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = slate(["health", "--format", "table", "--discover", f"file://{fleet}/fleet/",
                  "--max-sorted-runs", "0"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert code == 1 and lines[0].split()[:3] == ["DATABASE", "L0", "RUNS"]
    rows = lines[1:4]
    assert [r.split()[0].rsplit("/", 1)[-1] for r in rows] == ["a", "b", "c"]
    assert rows[0].split()[-1] == "BREACH" and rows[1].split()[-1] == "ok"
    assert f"file://{fleet}/fleet/a: --max-sorted-runs: sorted runs" in out


def test_html_page_and_status_history(fleet: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "svc" / "history.jsonl"
    h = StatusHistory(str(history), interval_s=0)
    names = [f"file:{fleet}/fleet/a", f"file:{fleet}/fleet/b"]  # as the service names them
    for i, depth in enumerate((1, 4, 2)):
        h.append(NOW_MS + i * 60_000, float(i), {names[0]: (depth, 1)})
    status = tmp_path / "svc" / "status.json"
    status.write_text(json.dumps({"status_history": str(history)}))
    page = tmp_path / "out" / "health.html"
    code, report, err = run(capsys, "--discover", f"file://{fleet}/fleet/", "--html", str(page),
                            "--status-file", str(status), "--max-l0", "5")
    assert code == 0 and f"page {page}" in err
    text = page.read_text()
    assert text.count('<tr class="status-') == 3
    assert text.count('class="chart l0"') == 1  # only a has history
    assert text.count('class="chart runs"') == 1  # only a has a sorted run
    assert 'class="limit"' in text and "http" not in text.replace("http-equiv", "")
    missing = tmp_path / "svc" / "plain.json"
    missing.write_text("{}")
    assert slate(["health", "--db", f"file://{fleet}/fleet/a", "--status-file", str(missing),
                  "--html", str(page)]) == EXIT_USAGE
    assert "keeps no status history" in capsys.readouterr().err


def test_the_installed_command(fleet: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "slatelib.cli.app", "health", "--db", f"file://{fleet}/fleet/a",
         "--max-manifests", "4"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)  # not a terminal: JSON
    assert report["breaches"][0]["threshold"] == "--max-manifests"
    assert report["breaches"][0]["message"] == \
        "manifest versions on storage 5 > --max-manifests 4"
