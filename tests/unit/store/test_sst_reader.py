"""SstReader and BlockCache: what a scan keeps in memory and how many requests it makes."""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from collections.abc import Iterator

import pytest

from slatelib import DbReader, bulk_load, open_store
from slatelib.config import Settings
from slatelib.objstore import ObjectStore, reset_memory_stores
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.faulty import FlakyObjectStore

ROWS = [(b"k%07d" % i, bytes([i % 251]) * 200) for i in range(20_000)]
"""About 4 MiB in 1 KiB blocks: ~4,000 blocks in ~70 SSTs of 64 KiB."""


def _settings(cache_bytes: int) -> Settings:
    s = Settings()
    return dataclasses.replace(
        s, sst=dataclasses.replace(s.sst, block_size=1024),
        reader=dataclasses.replace(s.reader, block_cache_bytes=cache_bytes),
    )


@pytest.fixture(scope="module")
def store() -> Iterator[ObjectStore]:
    reset_memory_stores()
    st = open_store("memory:///")
    bulk_load("db", st, ROWS, settings=_settings(1 << 20), target_sst_size=64 * 1024)
    yield st
    reset_memory_stores()


def test_full_scan_and_gets_retain_no_more_than_the_block_cache(store: ObjectStore) -> None:
    cache_bytes = 64 * 1024
    ssts = len(ManifestStore(store, "db").read_latest().value.ssts)
    assert ssts > 50
    with DbReader.open("db", store, mode="latest", settings=_settings(cache_bytes)) as r:
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            assert sum(1 for _ in r.scan()) == len(ROWS)
            assert all(r.get(k) == v for k, v in ROWS[::97])
            gc.collect()
            retained = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
        assert r.tables.cache is not None and r.tables.cache.size_bytes <= cache_bytes
    # Every SST's index alone takes ~6 KiB decoded (~450 KiB for the whole database).
    assert retained < 2 * cache_bytes, f"a full scan retained {retained} bytes"


def test_scan_reads_each_index_once_even_when_the_cache_keeps_nothing(store: ObjectStore) -> None:
    flaky = FlakyObjectStore(store)
    m = ManifestStore(store, "db").read_latest().value
    with DbReader.open("db", flaky, mode="latest", settings=_settings(1)) as r:
        before = flaky.calls["get_range"]
        assert list(r.scan()) == ROWS
        gets = [p for op, p in flaky.log if op == "get_range"]
    data_gets = flaky.calls["get_range"] - before - len(m.ssts)
    # one index GET per SST, then the blocks in coalesced GETs of up to 1 MiB (one per SST)
    assert data_gets == len(m.ssts)
    assert len(set(gets)) == len(m.ssts)
