"""Build the sdist and one wheel per supported CPython (``make wheels``).

    build_wheels.py [--dist DIR] [--pythons 3.11 3.12 3.13] [--tools DIR]

1. ``python -m build --sdist`` with the running interpreter writes ``slatelib-V.tar.gz``.
2. For each version, ``python -m build --wheel`` runs under that interpreter ON THE SDIST
   (so a source the sdist forgot fails the build), in a small tool venv with ``build``
   cached under ``--tools`` (one per version).
3. Each wheel must hold the three C extensions compiled for its version: the extensions
   are ``optional=True`` in setup.py, so a failed compile would otherwise ship a silent
   pure-Python wheel.

Interpreters are found as ``$(pyenv root)/versions/X.Y.*/bin/python`` (the newest patch
release), else ``pythonX.Y`` on PATH. Old slatelib wheels and sdists in ``--dist`` are
removed first; other files there (the packed executor env) are kept. Exit code 1 on any
failure, with the failing step's output.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = ("_speedups", "_manifest", "_sstwrite")
DEFAULT_PYTHONS = ("3.11", "3.12", "3.13")


def find_python(version: str) -> Path:
    """The interpreter for ``version`` (``"3.12"``): pyenv's newest patch release, else PATH."""
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates = []
    for d in Path(root, "versions").glob(f"{version}.*"):
        m = re.fullmatch(rf"{re.escape(version)}\.(\d+)", d.name)
        if m and (d / "bin" / "python").exists():
            candidates.append((int(m.group(1)), d / "bin" / "python"))
    if candidates:
        return max(candidates)[1]
    found = shutil.which(f"python{version}")
    if found:
        return Path(found)
    raise SystemExit(f"build_wheels: no Python {version} (pyenv install {version} or put "
                     f"python{version} on PATH)")


def run(cmd: list[str | Path], **kwargs: object) -> None:
    """Run ``cmd``; on failure print its output and exit 1."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"build_wheels: failed ({proc.returncode}): {' '.join(map(str, cmd))}")


def tool_python(version: str, tools: Path) -> Path:
    """A venv for ``version`` with ``build`` installed, made once under ``tools``."""
    venv = tools / f"py{version}"
    py = venv / "bin" / "python"
    if not (venv / ".ready").exists():
        shutil.rmtree(venv, ignore_errors=True)
        run([find_python(version), "-m", "venv", venv])
        run([py, "-m", "pip", "install", "-q", "build>=1.2,<2"])
        (venv / ".ready").touch()
    return py


def wheel_problems(wheel: Path, version: str) -> list[str]:
    """What is wrong with ``wheel`` as the CPython ``version`` wheel (empty when nothing)."""
    tag = "cp" + version.replace(".", "")
    problems = []
    if f"-{tag}-{tag}-" not in wheel.name:
        problems.append(f"{wheel.name}: not tagged {tag}")
    names = zipfile.ZipFile(wheel).namelist()
    for ext in EXTENSIONS:
        if not any(re.fullmatch(rf"slatelib/{ext}\.cpython-{tag[2:]}-.*\.so", n) for n in names):
            problems.append(f"{wheel.name}: no compiled slatelib/{ext} for {version}")
    stray = [n for n in names if n.endswith((".c", ".h"))]
    if stray:
        problems.append(f"{wheel.name}: C sources in the wheel: {stray[:3]}")
    return problems


def build_all(dist: Path, versions: list[str], tools: Path) -> list[Path]:
    """The sdist, then one checked wheel per version; returns [sdist, *wheels]."""
    dist.mkdir(parents=True, exist_ok=True)
    for old in [*dist.glob("slatelib-*.whl"), *dist.glob("slatelib-*.tar.gz")]:
        old.unlink()
    run([sys.executable, "-m", "build", "--sdist", "--outdir", dist, ROOT])
    (sdist,) = dist.glob("slatelib-*.tar.gz")
    print(f"sdist: {sdist}")
    built = [sdist]
    for version in versions:
        before = set(dist.glob("slatelib-*.whl"))
        run([tool_python(version, tools), "-m", "build", "--wheel", "--outdir", dist, sdist])
        (wheel,) = set(dist.glob("slatelib-*.whl")) - before
        problems = wheel_problems(wheel, version)
        if problems:
            raise SystemExit("build_wheels: " + "; ".join(problems))
        print(f"wheel: {wheel}")
        built.append(wheel)
    return built


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Build the slatelib sdist and one wheel per Python.")
    p.add_argument("--dist", type=Path, default=ROOT / "dist", help="output folder (dist/)")
    p.add_argument("--pythons", nargs="+", default=list(DEFAULT_PYTHONS), metavar="X.Y",
                   help="the CPython versions to build wheels for (3.11 3.12 3.13)")
    p.add_argument("--tools", type=Path, default=ROOT / "build" / "wheel-tools",
                   help="where the per-version venvs with `build` are kept")
    args = p.parse_args(argv)
    build_all(args.dist.resolve(), args.pythons, args.tools.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
