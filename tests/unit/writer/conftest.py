"""Fixtures for writer unit tests: a private memory store and a fake clock."""

from __future__ import annotations

import pytest

from slatelib.objstore import ObjectStore
from slatelib.testing.clock import FakeClock
from tests.unit.writer.support import memory_store


@pytest.fixture
def store() -> ObjectStore:
    return memory_store()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_750_000_000_000)
