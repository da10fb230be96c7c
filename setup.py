"""Build hook for the optional C extensions (``slatelib._speedups`` and its siblings).

All metadata lives in pyproject.toml; this file only declares the extensions. Each is
``optional=True``: without a C compiler, setuptools warns and installs the pure-Python
package, and ``slatelib.format.native`` falls back to the reference implementations.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import Extension, setup

# Every ``slatelib/_<name>.c`` is one optional extension module ``slatelib._<name>``.
_SOURCES = sorted(Path(__file__).parent.joinpath("slatelib").glob("_*.c"))

setup(
    ext_modules=[
        Extension(f"slatelib.{src.stem}", sources=[f"slatelib/{src.name}"], optional=True)
        for src in _SOURCES
    ],
)
