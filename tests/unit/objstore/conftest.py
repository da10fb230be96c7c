"""Stores for the object-store unit tests: a fresh memory store and a fresh local root."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def local_store(tmp_path: Path) -> ObjectStore:
    return open_raw_store(f"file://{tmp_path}/root")


@pytest.fixture(params=["memory", "local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """Each test using this runs once on a memory store and once on a local directory."""
    if request.param == "memory":
        return open_raw_store(f"memory://m{uuid.uuid4().hex[:12]}/")
    return open_raw_store(f"file://{tmp_path}/root")
