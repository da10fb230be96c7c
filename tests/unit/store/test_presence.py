"""One ``object_exists``: a missing object is False, any other error propagates."""

from __future__ import annotations

import uuid

import pytest

from slatelib.errors import UnavailableError
from slatelib.objstore import open_raw_store
from slatelib.store.presence import object_exists
from slatelib.testing.faulty import FlakyObjectStore


def test_present_and_missing() -> None:
    store = open_raw_store(f"memory://{uuid.uuid4().hex}/")
    store.put("db/x", b"")
    assert object_exists(store, "db/x") is True
    assert object_exists(store, "db/y") is False


def test_a_failing_store_is_not_read_as_missing() -> None:
    flaky = FlakyObjectStore(open_raw_store(f"memory://{uuid.uuid4().hex}/"),
                             sleep=lambda s: None)
    flaky.fail_before("head")
    with pytest.raises(UnavailableError):
        object_exists(flaky, "db/x")
