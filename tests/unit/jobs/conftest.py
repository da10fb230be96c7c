"""Fixtures of the jobs' unit tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slatelib.jobs import launcher


@pytest.fixture
def fake_job(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], list[list[str]]]:
    """Make every job module slate-spark imports a stand-in whose ``main`` records its
    arguments and returns ``code``; returns the list the calls are recorded in."""

    def install(code: int) -> list[list[str]]:
        seen: list[list[str]] = []

        class Fake:
            @staticmethod
            def main(argv: list[str]) -> int:
                seen.append(list(argv))
                return code

        monkeypatch.setattr(launcher.importlib, "import_module", lambda name: Fake)
        return seen

    return install
