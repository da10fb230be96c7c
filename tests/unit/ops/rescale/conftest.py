"""Fixtures shared by the rescale unit tests: an in-memory store and a clock that follows
real time (a module that needs a seeded store defines its own ``store``)."""

from __future__ import annotations

import pytest

from slatelib.objstore import ObjectStore
from slatelib.testing.clock import FakeClock
from tests.unit.ops.rescale.support import real_clock
from tests.unit.writer.support import memory_store


@pytest.fixture
def store() -> ObjectStore:
    return memory_store()


@pytest.fixture
def clock() -> FakeClock:
    return real_clock()
