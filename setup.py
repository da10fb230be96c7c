"""Build hook for the optional C extensions (``slatelib._speedups`` and its siblings).

All metadata lives in pyproject.toml; this file only declares the extensions. Each is
``optional=True``: without a C compiler, setuptools warns and installs the pure-Python
package, and ``slatelib.format.native`` falls back to the reference implementations.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import Extension, setup

# Each extension lists its sources: its own ``slatelib/_<name>.c`` plus the shared units under
# ``slatelib/csrc/`` (common.c: loads, the growth buffer, CRC-32; fbbuild.c: the FlatBuffers
# builder; pipe.c: the native pipeline). Any header under csrc/ rebuilds every extension.
# Warnings are errors; -fvisibility=hidden keeps the shared helpers out of each .so's exports.
# `make test-sanitize` rebuilds the same sources with ASan/UBSan flags into build/sanitize.
_ROOT = Path(__file__).parent
_HEADERS = sorted(str(h.relative_to(_ROOT)) for h in _ROOT.joinpath("slatelib", "csrc").glob("*.h"))
_COMMON = ["slatelib/csrc/common.c"]
_SOURCES = {
    "slatelib._speedups": ["slatelib/_speedups.c", "slatelib/csrc/pipe.c", *_COMMON],
    "slatelib._manifest": ["slatelib/_manifest.c", "slatelib/csrc/fbbuild.c", *_COMMON],
    "slatelib._sstwrite": ["slatelib/_sstwrite.c", "slatelib/csrc/fbbuild.c", *_COMMON],
}
_CFLAGS = ["-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"]

setup(
    ext_modules=[
        Extension(name, sources=sources, depends=_HEADERS, extra_compile_args=_CFLAGS,
                  optional=True)
        for name, sources in _SOURCES.items()
    ],
)
