"""A pytest plugin for the suites run against an installed wheel (``tests/wheels``): before
any test, refuse a slatelib imported from anywhere but site-packages, or without its
compiled extensions, and say where it came from in the header."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_report_header(config: pytest.Config) -> str:
    import slatelib
    from slatelib.format import native

    where = Path(slatelib.__file__).resolve()
    if where.parent.parent.name != "site-packages":
        raise pytest.UsageError(f"slatelib imported from {where}, not from site-packages")
    if native.speedups is None:
        raise pytest.UsageError("the installed slatelib has no compiled extensions")
    return f"slatelib from site-packages: {where.parent} {slatelib.__version__}"
