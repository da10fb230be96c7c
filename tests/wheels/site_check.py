"""A pytest plugin for the suites run against an installed wheel (``tests/wheels``): at
start, refuse a slatelib imported from anywhere but site-packages, or without its compiled
extensions; at the end, say where it came from (the summary shows even with ``-q``)."""

from __future__ import annotations

from pathlib import Path

import pytest

_KEY = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    import slatelib
    from slatelib.format import native

    where = Path(slatelib.__file__).resolve()
    if where.parent.parent.name != "site-packages":
        raise pytest.UsageError(f"slatelib imported from {where}, not from site-packages")
    if native.speedups is None:
        raise pytest.UsageError("the installed slatelib has no compiled extensions")
    config.stash[_KEY] = f"slatelib from site-packages: {where.parent} {slatelib.__version__}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    terminalreporter.write_line(config.stash[_KEY])
