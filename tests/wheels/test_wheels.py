"""The built wheels, installed into fresh venvs of Python 3.11, 3.12 and 3.13 (``make
test-wheels``, part of ``make test``; the wheels come from ``make wheels``).

Each venv has only ``dist/slatelib-*-cpXY-*.whl[spark]`` (plus the test extra on 3.12 and
3.13) and runs from a temporary directory with ``PYTHONSAFEPATH=1``: nothing of the checkout
is importable. On each version: the compiled extensions load from site-packages, ``slate
--version``, a read of an official 0.17 fixture, a bulk load read back, and ``slate-spark
compact`` in local mode with its result read back. On 3.12 and 3.13, a subset of the unit
and interop suites (the whole suites run on 3.11 from ``.venv``) against the installed wheel.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GOLDEN_DIR, load_expected
from tests.integration.test_readme_tour import check_tour, tour_script
from tests.wheels.installed import (
    REPO,
    SUITE_VERSIONS,
    VERSIONS,
    WHEEL_DIR_ENV,
    InstalledVenv,
    clean_env,
    find_wheel,
    venv_with,
    wheel_dir,
)

pytestmark = pytest.mark.wheels

SUITE_PATHS = ["tests/unit/format/test_native.py", "tests/unit/format/test_native_merge.py",
               "tests/unit/format/test_sst_native.py", "tests/unit/format/test_manifest_native.py",
               "tests/interop/test_read_fixtures.py", "tests/interop/test_manifest_interop.py"]
"""The subset run on the extra versions (about 180 tests): what depends on the Python
version is the compiled code, so the differential tests of the C extensions against the
pure-Python reference, and the official package and slatelib reading each other's
manifests and fixtures. Without the check of a checkout's in-place build and the timing
budgets (they belong to the whole suites, which run on 3.11 from ``.venv``)."""
SUITE_SELECT = ["-m", "not benchmark",
                "-k", "not test_extension_is_built_in_place and not fast_enough"]
SUITE_MIN_PASSED = 120
"""Fewer passed tests than this means the subset was not collected, not that it passed."""


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda v: f"py{v}")
def installed(request: pytest.FixtureRequest) -> InstalledVenv:
    version: str = request.param
    wheel = find_wheel(version)
    if wheel is None:
        message = f"no cp{version.replace('.', '')} wheel in {wheel_dir()} (make wheels)"
        if os.environ.get(WHEEL_DIR_ENV):
            pytest.fail(message)
        pytest.skip(message)
    extras = "spark,test" if version in SUITE_VERSIONS else "spark"
    return venv_with(version, wheel, extras)


def ok(proc: Any) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    out: str = proc.stdout
    return out


def wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def scan(venv: InstalledVenv, url: str, cwd: Path) -> dict[bytes, bytes]:
    lines = ok(venv.run(["slate", "--db", url, "scan"], cwd)).splitlines()
    return {bytes.fromhex(o["key"]): bytes.fromhex(o["value"]) for o in map(json.loads, lines)}


def expected_live(name: str) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in load_expected(name)["live"].items()}


def fixture_copy(name: str, dst: Path) -> Path:
    shutil.copytree(GOLDEN_DIR / name, dst / name)
    for p in (dst / name).rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst / name


def test_imports_from_site_packages_with_the_extensions_compiled(
    installed: InstalledVenv, tmp_path: Path,
) -> None:
    code = ("import json, importlib.metadata as m, slatelib\n"
            "from slatelib.format import native, manifest_native\n"
            "print(json.dumps({'file': slatelib.__file__, 'version': slatelib.__version__,\n"
            "  'meta': m.version('slatelib'), 'speedups': native.speedups is not None,\n"
            "  'manifest': manifest_native.ext is not None}))")
    got = json.loads(ok(installed.run(["python", "-c", code], tmp_path)))
    assert Path(got["file"]).parent == installed.site_packages() / "slatelib"
    assert got["version"] == got["meta"] == wheel_version(installed.wheel)
    assert got["speedups"] and got["manifest"], got


def test_slate_version(installed: InstalledVenv, tmp_path: Path) -> None:
    out = ok(installed.run(["slate", "--version"], tmp_path))
    assert re.fullmatch(
        rf"slate {re.escape(wheel_version(installed.wheel))} \(SlateDB 0\.17 format: writes "
        r"manifest v2, SST v2, compactions v2; reads manifest v1-v2, SST v1-v2\)\n", out), out


def test_reads_an_official_fixture(installed: InstalledVenv, tmp_path: Path) -> None:
    db = fixture_copy("basic", tmp_path)
    assert scan(installed, f"file://{db}", tmp_path) == expected_live("basic")
    got = json.loads(ok(installed.run(["slate", "--db", f"file://{db}", "get",
                                       b"key:0300".hex()], tmp_path)))
    assert bytes.fromhex(got["value"]) == b"single-300"


def test_bulk_load_reads_back(installed: InstalledVenv, tmp_path: Path) -> None:
    rows = {f"user:{i:05d}".encode(): f"value-{i * 7}".encode() * (1 + i % 5)
            for i in range(0, 600, 3)}
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"key": k.hex(), "value": v.hex()}) + "\n"
                            for k, v in reversed(list(rows.items()))))
    url = f"file://{tmp_path}/loaded"
    report = json.loads(ok(installed.run(["slate", "--db", url, "load", str(data)], tmp_path)))
    assert report["rows"] == len(rows) and len(report["ssts"]) >= 1
    assert scan(installed, url, tmp_path) == rows


def test_slate_spark_compact_in_local_mode(installed: InstalledVenv, tmp_path: Path) -> None:
    # the fixture's official 0.17 writer held the compactor epoch: --takeover fences it
    db = fixture_copy("basic", tmp_path)
    url = f"file://{db}"
    before = json.loads(ok(installed.run(["slate", "--db", url, "summary"], tmp_path)))
    assert before["l0_views"] == 2
    proc = installed.run(["slate-spark", "compact", "--db", url, "--policy", "l0", "--takeover",
                          "--master", "local[1]"], tmp_path, SLATELIB_SPARK_LOG_LEVEL="ERROR")
    report = json.loads(ok(proc))
    assert report["job"] == "compact" and report["totals"]["failed"] == 0, report["headline"]
    assert report["totals"]["rows_in"] > 0, report["headline"]
    after = json.loads(ok(installed.run(["slate", "--db", url, "summary"], tmp_path)))
    assert after["l0_views"] == 0 and after["manifest_id"] > before["manifest_id"]
    assert scan(installed, url, tmp_path) == expected_live("basic")


def test_the_readme_tour_with_only_the_wheel(installed: InstalledVenv, tmp_path: Path) -> None:
    # the README's five-minute tour, as a newcomer runs it: its python and slate are the
    # venv's, in a directory with no checkout
    path = f"{installed.bin}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(["bash", "-c", tour_script()], cwd=tmp_path,
                          env=clean_env(PATH=path), capture_output=True, text=True,
                          timeout=600, check=False)
    check_tour(done, tmp_path)


def test_no_top_level_jobs_package_in_site_packages(installed: InstalledVenv) -> None:
    sp = installed.site_packages()
    (dist_info,) = sp.glob("slatelib-*.dist-info")
    top_level = (dist_info / "top_level.txt").read_text().split()
    assert not (sp / "jobs").exists() and top_level == ["slatelib"], top_level


def test_unit_and_interop_subset(installed: InstalledVenv, tmp_path: Path) -> None:
    if installed.version not in SUITE_VERSIONS:
        pytest.skip(f"the whole suites run on {installed.version} from .venv")
    # the tests and pytest's settings, without the package: slatelib comes from the wheel
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "tests", tree / "tests",
                    ignore=shutil.ignore_patterns("__pycache__", "cluster", "dags", "faults"))
    shutil.copy(REPO / "pyproject.toml", tree)
    proc = installed.run(
        ["python", "-m", "pytest", *SUITE_PATHS, "-q", "-p", "no:cacheprovider", "-x",
         *SUITE_SELECT, "-p", "tests.wheels.site_check"],
        tree, timeout=1200, PYTHONPATH=str(tree))
    tail = proc.stdout[-3000:]
    assert proc.returncode == 0, f"{tail}\n{proc.stderr[-2000:]}"
    passed = re.search(r"(\d+) passed", tail)
    assert passed and int(passed.group(1)) >= SUITE_MIN_PASSED, tail
    assert "slatelib from site-packages" in proc.stdout, tail
