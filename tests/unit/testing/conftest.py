"""A fresh memory store for the tests of the shipped test doubles (slatelib/testing/)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from slatelib.objstore import ObjectStore, open_raw_store, reset_memory_stores


@pytest.fixture(autouse=True)
def _fresh_memory_stores() -> Iterator[None]:
    reset_memory_stores()
    yield
    reset_memory_stores()


@pytest.fixture
def memory_store() -> ObjectStore:
    return open_raw_store(f"memory://m{uuid.uuid4().hex[:12]}/")
