"""``make demo-s3``'s script, end to end with a small database: moto_server, the official
writer, ``slate-spark compact`` and ``gc`` on Spark against the server, the official reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.interop, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]


def test_demo_s3_script_runs_the_newcomer_path(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLATELIB_")}
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "s3_demo.py"), "--rows", "3000", "--l0s", "3",
         "--workdir", str(tmp_path)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=540, check=False)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert "ok: the official reader sees every one of the" in proc.stdout
    assert "moto_server stopped" in proc.stdout
    compact = json.loads((tmp_path / "compact.json").read_text())
    gc = json.loads((tmp_path / "gc.json").read_text())
    assert (compact["job"], compact["status"]) == ("compact", "success")
    assert (gc["job"], gc["status"]) == ("gc", "success")
    assert gc["totals"]["deleted"] >= 1
    assert "SLATELIB_S3_SECRET_ACCESS_KEY=testing" in (tmp_path / "s3.env").read_text()
