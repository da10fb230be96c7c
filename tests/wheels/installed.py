"""Fresh venvs with a built slatelib wheel installed, for ``tests/wheels`` (``make test-wheels``).

A venv per (Python version, wheel, extras) lives in ``build/wheel-venvs/pyX.Y-<key>``, where
``key`` is a hash of the wheel's bytes and the extras: a rebuilt wheel gets a new venv, an
unchanged one reuses it (and pip's cache serves the dependencies), and older venvs of the
same version are removed. ``.ready`` is written last, so a half-made venv is made again.

Commands run in a temporary directory with ``PYTHONSAFEPATH=1`` and no ``PYTHONPATH``, so
nothing of the checkout is importable: what runs is what the wheel installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WHEEL_DIR_ENV = "SLATELIB_WHEEL_DIR"
"""Where the wheels are (``make wheels`` writes ``dist/``). ``make test`` sets it, so a
missing wheel fails there instead of skipping."""
VENV_ROOT = REPO / "build" / "wheel-venvs"
VERSIONS = ("3.11", "3.12", "3.13")
SUITE_VERSIONS = ("3.12", "3.13")
"""The versions the unit and interop subset runs on (3.11 runs the whole suite from .venv)."""


def wheel_dir() -> Path:
    return Path(os.environ.get(WHEEL_DIR_ENV) or REPO / "dist")


def find_wheel(version: str) -> Path | None:
    """The cpXY wheel of ``version`` in :func:`wheel_dir` (None when there is none)."""
    tag = "cp" + version.replace(".", "")
    found = sorted(wheel_dir().glob(f"slatelib-*-{tag}-{tag}-*.whl"))
    if len(found) > 1:
        raise AssertionError(f"more than one {tag} wheel in {wheel_dir()}: {found}")
    return found[0] if found else None


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for an installed command: no checkout path, no SLATELIB_* settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLATELIB_", "PYTHON", "PYSPARK_", "VIRTUAL_ENV", "SPARK_HOME"))}
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


@dataclass(frozen=True)
class InstalledVenv:
    version: str
    path: Path
    wheel: Path

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def site_packages(self) -> Path:
        (sp,) = self.path.glob("lib/python*/site-packages")
        return sp

    def run(self, args: list[str | Path], cwd: Path, *, input: str | None = None,
            timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
        """``args`` (``args[0]`` a command of the venv's bin/) in ``cwd``, not checked."""
        cmd = [str(self.bin / str(args[0])), *map(str, args[1:])]
        return subprocess.run(cmd, cwd=cwd, env=clean_env(**env), input=input,
                              capture_output=True, text=True, timeout=timeout, check=False)


def _python_for(version: str) -> str:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from build_wheels import find_python  # scripts/build_wheels.py
    finally:
        sys.path.pop(0)
    return str(find_python(version))


def venv_with(version: str, wheel: Path, extras: str) -> InstalledVenv:
    """A venv of ``version`` with ``wheel[extras]`` installed, made once per wheel content."""
    h = hashlib.sha256(wheel.read_bytes())
    h.update(extras.encode())
    name = f"py{version}-{h.hexdigest()[:16]}"
    path = VENV_ROOT / name
    venv = InstalledVenv(version, path, wheel)
    if (path / ".ready").exists():
        return venv
    VENV_ROOT.mkdir(parents=True, exist_ok=True)
    for old in VENV_ROOT.glob(f"py{version}-*"):
        shutil.rmtree(old, ignore_errors=True)
    subprocess.run([_python_for(version), "-m", "venv", str(path)], check=True,
                   env=clean_env(), capture_output=True)
    proc = subprocess.run(
        [str(venv.python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         f"{wheel}[{extras}]"],
        env=clean_env(), capture_output=True, text=True, check=False, cwd=VENV_ROOT)
    if proc.returncode != 0:
        raise AssertionError(f"pip install {wheel.name}[{extras}] failed:\n"
                             f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    (path / ".ready").touch()
    return venv
