"""Rescale of a source that keeps its WAL in a separate store, the guard, and what a failure
after the job's record says about what was written."""

from __future__ import annotations

import pytest

from slatelib.errors import InvalidDbStateError, WalStoreMissingError
from slatelib.objstore import ObjectStore, with_wal_store
from slatelib.ops.rescale import RescaleOptions, merge_databases, split_database
from slatelib.ops.rescale import job as job_module
from slatelib.ops.rescale.record import active_path, failed_after_record
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from tests.unit.ops.rescale.support import in_range, make_source, read
from tests.unit.store_snapshot import snapshot
from tests.unit.writer.support import memory_store

SHARDS = ["s-0", "s-1"]


def test_a_source_with_a_wal_store_splits_with_it_and_is_refused_without_it(
        store: ObjectStore, clock: FakeClock) -> None:
    wal = memory_store()
    model = make_source(with_wal_store(store, wal), clock)
    assert not list(store.list("src/wal"))  # the WAL tail is only in the WAL store
    before = snapshot(store), snapshot(wal)
    with pytest.raises(WalStoreMissingError, match="--wal-store"):
        split_database("src", store, SHARDS, clock=clock)
    assert (snapshot(store), snapshot(wal)) == before  # refused before any write
    report = split_database("src", store, SHARDS, clock=clock, wal_store=wal).to_dict()
    assert report["status"] == "done" and report["sources"][0]["flushed"]["wal_rows"] == 21  # the tail and a delete
    keys = [k.encode() for k in report["split_keys"]]
    bounds = [None, *keys, None]
    routed = with_wal_store(store, wal)
    for i, shard in enumerate(SHARDS):
        assert read(routed, shard) == in_range(model, bounds[i], bounds[i + 1])
    m = ManifestStore(store, "src").read_latest().value
    assert m.replay_after_wal_id == m.wal_id_last_seen  # the tail went into an L0
    clock.advance(3600)
    merged = merge_databases(SHARDS, "whole", store, clock=clock, wal_store=wal,
                             options=RescaleOptions(live_window_s=0)).to_dict()
    assert merged["status"] == "done" and read(routed, "whole") == model


def test_a_failure_after_the_record_says_what_the_job_wrote(
        store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    make_source(store, clock)

    def refuse(*_: object) -> None:
        raise InvalidDbStateError("projection is not supported: 'src' is missing WAL SSTs "
                                  "[7]; nothing was written")

    monkeypatch.setattr(job_module, "ensure_clone", refuse)
    with pytest.raises(InvalidDbStateError) as info:
        split_database("src", store, SHARDS, clock=clock)
    text = str(info.value)
    assert "nothing was written" not in text
    assert "missing WAL SSTs [7]" in text and active_path("src") in text
    m = ManifestStore(store, "src").read_latest().value
    [cp] = m.checkpoints
    assert f"checkpoint {cp.id} of 'src'" in text and "rerun the same command" in text


def test_failed_after_record_drops_only_the_false_claim() -> None:
    assert failed_after_record("x refused; nothing else was written", "J", ["a", "b"]) == (
        "x refused. Rescale job J had already written a, b: rerun the same command once this "
        "is fixed to resume the job, or delete the records (and the checkpoints: `slate "
        "--path SOURCE delete-checkpoint --id ID`) to abandon it")
