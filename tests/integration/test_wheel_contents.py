"""The wheel installs one top-level package, ``slatelib`` (issue 27): the jobs live in
``slatelib/jobs/``, the checkout's ``jobs/`` entry scripts stay out of it, and
``slate-spark`` points into slatelib. Built from this checkout into a temporary directory
(``pip wheel --no-deps --no-build-isolation``, as ``make package-jobs`` does)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy, so that setuptools' build/ and egg-info stay out of the tree
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "dist", "var", "*.egg-info", "__pycache__", "*.so",
        "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache", "site"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", str(tmp / "dist"), str(src)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    (built,) = (tmp / "dist").glob("slatelib-*.whl")
    return built


def test_the_wheel_has_no_top_level_jobs_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(
        (".dist-info", ".data"))}
    assert tops == {"slatelib"}, tops
    assert not [n for n in names if n.startswith("jobs/")]
    for job in ("compact", "gc", "rescale", "export", "launcher", "_common"):
        assert f"slatelib/jobs/{job}.py" in names, job
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")] or [None]
    if top_level is not None:
        assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["slatelib"]
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "slate-spark = slatelib.jobs.launcher:main" in scripts
    assert "jobs.launcher" not in scripts.replace("slatelib.jobs.launcher", "")


def test_the_checkout_entry_scripts_call_the_installed_jobs() -> None:
    """``jobs/<job>.py`` run as a script (as spark-submit runs it: its own directory first
    on sys.path) reaches the slatelib job: ``--help`` prints the job's options."""
    for job, option in (("compact", "--policy"), ("gc", "--min-age"),
                        ("rescale", "split"), ("export", "--format")):
        done = subprocess.run([sys.executable, str(ROOT / "jobs" / f"{job}.py"), "--help"],
                              capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr[-2000:]
        assert option in done.stdout, (job, done.stdout[:500])
