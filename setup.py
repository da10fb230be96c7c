"""Build hook for the optional C extension ``slatelib._speedups``.

All metadata lives in pyproject.toml; this file only declares the extension. It is
``optional=True``: without a C compiler, setuptools warns and installs the pure-Python
package, and ``slatelib.format.native`` falls back to the reference implementations.
"""

from __future__ import annotations

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "slatelib._speedups",
            sources=["slatelib/_speedups.c"],
            optional=True,
        )
    ],
)
