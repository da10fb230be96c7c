"""The README's five-minute tour, run as written: its shell blocks, in order, in an empty
directory, with the installed ``slate`` (this interpreter's bin directory) on PATH."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def tour_script() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("## A five-minute tour")
    end = readme.index("\n## ", start + 1)
    blocks = re.findall(r"^```\n(.*?)^```$", readme[start:end], flags=re.S | re.M)
    assert len(blocks) >= 4, "the tour's write, compact, gc and read blocks"
    return "set -euo pipefail\n" + "\n".join(blocks)


def check_tour(done: subprocess.CompletedProcess[str], where: Path) -> None:
    """What the tour run in ``where`` must have printed and written."""
    assert done.returncode == 0, done.stderr[-3000:]
    out, err = done.stdout, done.stderr
    assert "l0_views: 5" in out and "l0_views: 0" in out
    assert "value: name-42" in out
    assert re.search(r"^user:00041 +name-41$", out, flags=re.M)
    assert '"value": null' in out  # the deleted key
    assert "slate compact: compacted 5 L0" in err
    assert "dry run: would delete 0 objects" in err
    gc = [json.loads(line) for line in (where / "gc-report.json").read_text().splitlines()]
    deleted = [r for r in gc if r.get("action") == "delete"]
    assert sum(1 for r in deleted if r["kind"] == "wal") == 1000
    assert json.loads((where / "compact-report.json").read_text())["status"] == "success"


def test_the_readme_tour_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", "-c", tour_script()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    check_tour(done, tmp_path)
