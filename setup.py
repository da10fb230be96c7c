"""Build hook for the optional C extensions (``slatelib._speedups`` and its siblings).

All metadata lives in pyproject.toml; this file only declares the extensions. Each is
``optional=True``: without a C compiler, setuptools warns and installs the pure-Python
package, and ``slatelib.format.native`` falls back to the reference implementations.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import Extension, setup

# Every ``slatelib/_<name>.c`` is one optional extension module ``slatelib._<name>``; the
# headers under ``slatelib/csrc/`` (included by them) rebuild every extension when changed.
_ROOT = Path(__file__).parent
_SOURCES = sorted(_ROOT.joinpath("slatelib").glob("_*.c"))
_HEADERS = sorted(str(h.relative_to(_ROOT)) for h in _ROOT.joinpath("slatelib", "csrc").glob("*.h"))

setup(
    ext_modules=[
        Extension(f"slatelib.{src.stem}", sources=[f"slatelib/{src.name}"], depends=_HEADERS,
                  optional=True)
        for src in _SOURCES
    ],
)
