"""Where a split cuts: block anchors from the indexes, rows from the stats, a per-row
fallback for small sources, the WAL tail."""

from __future__ import annotations

from dataclasses import replace

from slatelib import bulk_load
from slatelib.config import Settings, SstSettings
from slatelib.core.rescale_plan import shard_ranges
from slatelib.ops.rescale.balance import (
    estimate_shards,
    manifest_views,
    plan_weights,
    read_weights,
    wal_weight,
)
from slatelib.store.manifest_store import ManifestStore
from tests.unit.writer.support import memory_store

SMALL_BLOCKS = replace(Settings(), sst=SstSettings(block_size=512, min_filter_keys=1))


def _load(n: int, *, dense_from: int | None = None, target_sst_size: int = 8192):
    store = memory_store()
    rows = [(b"key%05d" % i, b"x" * (200 if dense_from is not None and i >= dense_from
                                     else 20)) for i in range(n)]
    bulk_load("db", store, rows, settings=SMALL_BLOCKS, target_sst_size=target_sst_size)
    return store, ManifestStore(store, "db").read_latest().value, dict(rows)


def test_keys_balance_bytes_not_keys() -> None:
    store, m, rows = _load(2000, dense_from=1500)
    weights, keys = plan_weights(store, "db", m, 2)
    assert keys is not None
    halves = [sum(len(k) + len(v) for k, v in rows.items() if r.contains(k))
              for r in shard_ranges(keys)]
    assert abs(halves[0] - halves[1]) < 0.1 * sum(halves)
    assert b"key01500" < keys[0] < b"key02000"  # inside the dense region


def test_estimates_follow_the_stats_blocks() -> None:
    store, m, rows = _load(1000)
    weights = read_weights(store, manifest_views(store, "db", m), into=4)
    ranges = shard_ranges([b"key00250", b"key00500", b"key00750"])
    est, known = estimate_shards(weights, ranges)
    assert known and abs(sum(e.rows for e in est) - 1000) <= 4
    assert all(200 <= e.rows <= 300 for e in est)


def test_a_small_source_with_one_block_is_cut_per_row() -> None:
    store = memory_store()
    bulk_load("db", store, [(b"k%d" % i, b"v") for i in range(6)])
    m = ManifestStore(store, "db").read_latest().value
    assert len(manifest_views(store, "db", m)) == 1
    _, keys = plan_weights(store, "db", m, 3)
    assert keys == (b"k2", b"k4")


def test_too_few_keys_give_no_keys() -> None:
    store = memory_store()
    bulk_load("db", store, [(b"only", b"v")])
    m = ManifestStore(store, "db").read_latest().value
    assert plan_weights(store, "db", m, 2)[1] is None


def test_the_wal_tail_counts() -> None:
    store = memory_store()
    bulk_load("db", store, [(b"a%d" % i, b"v") for i in range(4)])
    m = ManifestStore(store, "db").read_latest().value
    tail = [(b"z%d" % i, 100) for i in range(20)]
    weights, keys = plan_weights(store, "db", m, 2, tail)
    assert keys is not None and keys[0] > b"z"
    assert wal_weight(tail).rows == 20 and weights[-1].view is None


def test_a_checkpoint_added_weighs_the_same_and_a_new_sst_does_not() -> None:
    from slatelib import create_checkpoint
    from slatelib.ops.rescale.balance import same_weights

    store, before, _ = _load(200)
    create_checkpoint("db", store)
    after = ManifestStore(store, "db").read_latest().value
    assert after.checkpoints != before.checkpoints and same_weights(before, after)
    other, _, _ = _load(201)
    assert not same_weights(before, ManifestStore(other, "db").read_latest().value)
    assert not same_weights(before, replace(before, l0=before.l0[:0] + (
        before.compacted[0].views[0],)))
