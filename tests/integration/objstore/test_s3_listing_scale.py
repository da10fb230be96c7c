"""A 100k-object listing on S3, split into ranges with start_after/end_before, is exactly
the full listing (and exactly what was written)."""

from __future__ import annotations

import random
import time

import pytest

from slatelib.objstore import ObjectStore
from tests.s3_server import S3Bucket

pytestmark = pytest.mark.integration

N = 100_000


def make_keys() -> list[str]:
    keys = [f"db/compacted/{i:08d}.sst" for i in range(0, 70_000)]
    keys += [f"db/manifest/{i:020d}.manifest" for i in range(20_000)]
    keys += [f"db/wal/{i:020d}.sst" for i in range(9_975)]
    keys += [f"db/odd names/{c}{i}" for i, c in enumerate("+=,;@$&!' ()-_.")]
    keys += [f"db/wal/x{i}" for i in range(N - len(keys))]
    assert len(keys) == N
    return keys


def test_split_listing_of_100k_objects_equals_full_listing(s3_bucket: S3Bucket) -> None:
    started = time.monotonic()
    keys = make_keys()
    siblings = ["db-clone/compacted/1.sst", "db.bak/x", "dbx/manifest/1", "da/y"]
    s3_bucket.seed(keys + siblings)
    store: ObjectStore = s3_bucket.open()
    expected = sorted(keys)

    full = [m.path for m in store.list("db")]
    assert full == expected

    rnd = random.Random(11)
    existing_bounds = rnd.sample(keys, 6)
    other_bounds = ["db/compacted/00012345x", "db/manifest/", "db/odd names/", "db/wal/~", "db/a"]
    bounds: list[str | None] = [None, *sorted(existing_bounds + other_bounds), None]
    pieces: list[str] = []
    present = set(keys)
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        pieces += [m.path for m in store.list("db", start_after=lo, end_before=hi)]
        if hi is not None and hi in present:
            pieces.append(hi)  # both bounds are exclusive
    assert pieces == full
    elapsed = time.monotonic() - started
    # About 30 s here; a generous guard against losing the fast listing of tests/s3_server.py.
    assert elapsed < 120, f"100k listing test took {elapsed:.1f}s"
