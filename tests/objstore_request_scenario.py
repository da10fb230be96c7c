"""One sequence of ObjectStore calls whose S3 requests are known, run against memory, local
and S3 stores by the request-accounting tests (tests/unit/objstore/test_accounting.py,
tests/integration/objstore/test_accounting_s3.py).

:data:`EXPECTED` is what S3 bills for :func:`run_scenario`, worked out by hand from S3's
rules (one ListObjectsV2 page per 1000 keys, DeleteObjects batches of up to 1000 keys,
multipart uploads of :data:`~slatelib.objstore.obstore_store.MULTIPART_PART_SIZE` parts,
ranges more than 1 MiB apart fetched separately)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slatelib.errors import AlreadyExistsError, ObjectMissingError
from slatelib.objstore import ObjectStore

MIB = 1024 * 1024
BIG = 17 * MIB  # > MULTIPART_THRESHOLD (16 MiB): create + 2 parts + complete
KEYS = [f"many/{i:05d}" for i in range(2500)]

EXPECTED = {
    # 3 small puts, the big one in 4 requests
    "put": 3 + 4,
    # create, create that conflicts, update by ETag
    "conditional_put": 3,
    # get, get of a missing object, get_with_meta
    "get": 3,
    "head": 1,
    # get_range (1), get_ranges of two close ranges and a far one (2)
    "ranged_get": 3,
    # 2500 keys (3 pages), the same stopped at many/01500 (2 pages), an empty listing (1)
    "list": 3 + 2 + 1,
    # delete (1), delete_many of 2500 keys (3 batches), of one key (1)
    "multi_delete": 1 + 3 + 1,
}


def run_scenario(store: ObjectStore, seed: Callable[[list[str]], None]) -> None:
    """The calls of :data:`EXPECTED` (``seed`` creates :data:`KEYS` uncounted first)."""
    seed(KEYS)
    store.put("a", b"alpha")
    store.put("b", b"x" * 3000)
    store.put("c", b"gamma")
    store.put("big", bytes(BIG))
    store.put_if_absent("cas", b"one")
    with pytest.raises(AlreadyExistsError):
        store.put_if_absent("cas", b"two")
    _, meta = store.get_with_meta("cas")
    store.put_if_match("cas", b"three", meta.e_tag)
    assert store.get("a") == b"alpha"
    with pytest.raises(ObjectMissingError):
        store.get("missing")
    assert store.head("b").size == 3000
    assert store.get_range("b", 10, 20) == b"x" * 10
    got = store.get_ranges("big", [(0, 10), (100, 200), (5 * MIB, 5 * MIB + 7)])
    assert [len(g) for g in got] == [10, 100, 7]
    assert len(list(store.list("many"))) == len(KEYS)
    assert len(list(store.list("many", end_before="many/01500"))) == 1500
    assert list(store.list("nothing-here")) == []
    store.delete("c")
    store.delete_many(KEYS)
    store.delete_many(["a"])


EXPECTED_BYTES_WRITTEN = 5 + 3000 + 5 + BIG + 3 + 3 + 5
EXPECTED_BYTES_READ = 3 + 5 + 10 + (200) + 7
"""Object bytes: the puts' bodies; the GET bodies (``cas`` ``one``, ``a``, a 10-byte range,
the span ``[0, 200)`` covering two close ranges, 7 bytes far away)."""
