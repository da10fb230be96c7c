"""``jobs/compact.py --service --status-history``: the service records L0 depth over time,
and ``slate health --status-file`` charts it on the page (the end-to-end path of the
health page's L0 charts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slatelib.cli import main as slate
from slatelib.errors import InvalidArgumentError
from slatelib.jobs.compact import build_parser, run
from slatelib.ops.compaction.status_history import read_status_history
from tests.unit.jobs.test_compact_service import SETTINGS, make_db


def test_the_service_history_feeds_the_health_page(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for name, l0s in (("tenants/a", 4), ("tenants/b", 2)):
        make_db(tmp_path, name, l0s)
    status, history = tmp_path / "run" / "status.json", tmp_path / "run" / "history.jsonl"
    args = build_parser().parse_args([
        "--service", "--discover", f"file://{tmp_path}/tenants/", "--until-idle",
        "--status-file", str(status), "--status-history", str(history)])
    _, code = run(None, SETTINGS, args)
    assert code == 0
    assert json.loads(status.read_text())["status_history"] == str(history)
    got = read_status_history(str(history))
    a = got[f"file:{tmp_path}/tenants/a"]
    assert a[0].l0 == 4 and a[-1].l0 == 0  # first poll, then the state when it stopped
    assert [p.l0 for p in got[f"file:{tmp_path}/tenants/b"]] == [2] * len(a)

    page = tmp_path / "health.html"
    code = slate(["health", "--format", "json", "--discover", f"file://{tmp_path}/tenants/",
                  "--status-file", str(status), "--html", str(page)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["totals"]["databases"] == 2
    assert page.read_text().count('class="chart l0"') == 2


def test_status_history_is_refused_on_a_one_shot_run(tmp_path: Path) -> None:
    args = build_parser().parse_args(["--db", f"file://{tmp_path}/db", "--status-history",
                                      str(tmp_path / "h.jsonl")])
    with pytest.raises(InvalidArgumentError, match="--status-history only apply"):
        run(None, SETTINGS, args)
