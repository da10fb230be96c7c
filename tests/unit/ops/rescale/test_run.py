"""Split and merge end to end in one process (threads for the compactions and the scans):
the WAL tail, balanced and given keys, dry runs, refusals that write nothing, live
writers, reruns after a crash anywhere."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from slatelib import Db, DbReader, create_checkpoint, destroy
from slatelib.core.rescale_plan import RescalePlan
from slatelib.errors import (
    DataError,
    FencedError,
    InvalidArgumentError,
    InvalidDbStateError,
    NotADatabaseRootError,
    WriterActiveError,
)
from slatelib.objstore import ObjectStore
from slatelib.ops.gc import collect_garbage
from slatelib.ops.rescale import RescaleOptions, merge_databases, split_database
from slatelib.ops.rescale.record import active_path
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash
from tests.unit.ops.rescale.support import in_range, make_source, read
from tests.unit.store_snapshot import snapshot
from tests.unit.writer.support import writer_settings

SHARDS = ["s-0", "s-1", "s-2"]


def _check_shards(store: ObjectStore, model: dict[bytes, bytes], keys: list[bytes],
                  shards: list[str] = SHARDS) -> None:
    bounds = [None, *keys, None]
    for i, shard in enumerate(shards):
        assert read(store, shard) == in_range(model, bounds[i], bounds[i + 1]), shard
        m = ManifestStore(store, shard).read_latest().value
        assert m.external_dbs == () and m.checkpoints == ()


def _source_released(store: ObjectStore, source: str = "src") -> None:
    m = ManifestStore(store, source).read_latest().value
    assert m.checkpoints == ()
    assert [p.path for p in store.list(f"{source}/slatelib/rescale")
            if p.path.endswith("active.json")] == []


# ------------------------------------------------------------------------------ split
def test_split_flushes_the_wal_tail_and_every_shard_holds_exactly_its_range(
        store: ObjectStore, clock: FakeClock) -> None:
    model = make_source(store, clock)
    report = split_database("src", store, SHARDS, clock=clock).to_dict()
    assert report["status"] == "done"
    keys = [k.encode() for k in report["split_keys"]]
    assert len(keys) == 2
    _check_shards(store, model, keys)
    _source_released(store)
    src = report["sources"][0]
    assert src["needs_wal_flush"] and src["flushed"]["wal_rows"] == 21  # the tail and a delete
    m = ManifestStore(store, "src").read_latest().value
    assert m.replay_after_wal_id == m.wal_id_last_seen
    assert report["validation"]["ok"] and report["validation"]["tiling"].startswith("ok")
    assert report["validation"]["source_keys"] == len(model) == sum(
        t["keys"] for t in report["targets"])
    counts = [t["keys"] for t in report["targets"]]
    assert max(counts) - min(counts) < len(model) / 3, counts  # balanced by bytes
    assert set(report["phases_s"]) >= {"plan", "flush", "checkpoint", "clone", "compact",
                                       "validate", "detach", "release", "total"}
    for t in report["targets"]:
        assert t["compaction"]["outcome"] == "committed"
        assert [d["status"] for d in t["detach"]] == ["detached"]


def test_split_at_given_keys(store: ObjectStore, clock: FakeClock) -> None:
    model = make_source(store, clock, wal_tail=0)
    keys = [b"k00050", b"kw"]
    report = split_database("src", store, SHARDS, at=keys, clock=clock).to_dict()
    assert report["split_keys"] == ["k00050", "kw"]
    _check_shards(store, model, keys)
    assert report["targets"][2]["keys"] == 0
    assert "flushed" not in report["sources"][0]


def test_the_source_can_be_destroyed_and_collected_afterwards(
        store: ObjectStore, clock: FakeClock) -> None:
    model = make_source(store, clock)
    keys = [k.encode() for k in split_database("src", store, SHARDS, clock=clock)
            .to_dict()["split_keys"]]
    clock.advance(3600)
    collect_garbage("src", store, dry_run=False, clock=clock)
    destroy("src", store, soft=False, clock=clock)
    assert [m.path for m in store.list("src/compacted")] == []
    _check_shards(store, model, keys)
    for shard in SHARDS:
        with Db.open(shard, store, writer_settings(), clock=clock) as db:
            db.put(b"new-" + shard.encode(), b"1")
        assert read(store, shard)[b"new-" + shard.encode()] == b"1"


def test_dry_run_reports_the_plan_and_writes_nothing(store: ObjectStore, clock: FakeClock,
                                                     ) -> None:
    make_source(store, clock)
    before = snapshot(store)
    report = split_database("src", store, SHARDS, clock=clock,
                            options=RescaleOptions(dry_run=True)).to_dict()
    assert snapshot(store) == before
    assert report["status"] == "dry_run" and len(report["split_keys"]) == 2
    est = [t["estimated_bytes"] for t in report["targets"]]
    assert all(e > 0 for e in est) and max(est) < 2 * min(est)
    assert sum(t["estimated_rows"] for t in report["targets"]) >= 299
    assert any("src/slatelib/rescale/active.json" in o for o in report["objects_to_write"])
    assert any(o.startswith("s-2/compacted/") for o in report["objects_to_write"])


@pytest.mark.parametrize("targets, at, error, message", [
    (["s-0"], None, InvalidArgumentError, "at least 2 shards"),
    ([], None, InvalidArgumentError, "at least 2 shards"),
    (SHARDS, [b"m", b"c"], InvalidArgumentError, "out of order"),
    (SHARDS, [b"c", b"c"], InvalidArgumentError, "twice"),
    (SHARDS, [b"c"], InvalidArgumentError, "needs 2 split keys"),
    (["s-0", "s-0"], None, InvalidArgumentError, "repeated"),
    (["src", "s-1"], None, InvalidArgumentError, "source"),
    (["src/shard", "s-1"], None, InvalidArgumentError, "source"),
    (["s-0", "../x"], None, InvalidArgumentError, "'..'"),
    (["taken", "s-1"], None, InvalidArgumentError, "already exists"),
])
def test_bad_input_is_refused_before_any_write(
        store: ObjectStore, clock: FakeClock, targets: list[str], at: list[bytes] | None,
        error: type[Exception], message: str) -> None:
    make_source(store, clock)
    with Db.open("taken", store, writer_settings(), clock=clock) as db:
        db.put(b"x", b"1")
    before = snapshot(store)
    with pytest.raises(error, match=message):
        split_database("src", store, targets, at=at, clock=clock)
    assert snapshot(store) == before


def test_a_missing_source_is_not_a_database_root(store: ObjectStore, clock: FakeClock) -> None:
    with pytest.raises(NotADatabaseRootError):
        split_database("nothing", store, SHARDS, clock=clock)
    assert snapshot(store) == {}


def test_too_little_data_for_balanced_keys_asks_for_at(store: ObjectStore, clock: FakeClock,
                                                       ) -> None:
    with Db.open("src", store, writer_settings(), clock=clock) as db:
        db.put(b"only", b"1")
    clock.advance(3600)
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError, match="--at"):
        split_database("src", store, SHARDS, clock=clock)
    assert snapshot(store) == before


# ------------------------------------------------------------------- live sources
def test_a_live_writer_is_refused_then_fenced_on_request(store: ObjectStore, clock: FakeClock,
                                                         ) -> None:
    model = make_source(store, clock)
    clock.advance(-7200)  # the source's writes are recent again
    writer = Db.open("src", store, writer_settings(), clock=clock)
    writer.put(b"k00007", b"acknowledged")
    model[b"k00007"] = b"acknowledged"
    before = snapshot(store)
    with pytest.raises(WriterActiveError, match="--fence-source") as err:
        split_database("src", store, SHARDS, clock=clock)
    assert "writer checkpoint" in str(err.value) and "written" in str(err.value)
    assert snapshot(store) == before
    report = split_database("src", store, SHARDS, clock=clock,
                            options=RescaleOptions(fence_source=True)).to_dict()
    with pytest.raises(FencedError):
        writer.put(b"k00008", b"lost")
    writer.close()
    _check_shards(store, dict(sorted(model.items())),
                  [k.encode() for k in report["split_keys"]])


def test_allow_live_source_clones_what_is_flushed(store: ObjectStore, clock: FakeClock) -> None:
    model = make_source(store, clock, wal_tail=0)
    clock.advance(-7200)
    writer = Db.open("src", store, writer_settings(), clock=clock)
    report = split_database("src", store, SHARDS, clock=clock,
                            options=RescaleOptions(allow_live_source=True)).to_dict()
    writer.put(b"k00009", b"after the checkpoint")  # not fenced, not in the shards
    writer.close()
    _check_shards(store, model, [k.encode() for k in report["split_keys"]])


def test_allow_live_source_still_refuses_to_fence_for_a_wal_tail(
        store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock)
    clock.advance(-7200)
    before = snapshot(store)
    with pytest.raises(WriterActiveError, match="pass --fence-source"):
        split_database("src", store, SHARDS, clock=clock,
                       options=RescaleOptions(allow_live_source=True))
    assert snapshot(store) == before


def test_the_live_window_is_configurable(store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock, wal_tail=0)
    with pytest.raises(WriterActiveError):
        split_database("src", store, SHARDS, clock=clock,
                       options=RescaleOptions(live_window_s=7200, dry_run=True))


# ------------------------------------------------------------------ jobs and reruns
def test_a_second_job_on_the_source_is_refused(store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock)
    flaky = FlakyObjectStore(store)
    flaky.crash("put_if_absent", path="s-0/manifest/")
    with pytest.raises(SimulatedCrash):
        split_database("src", flaky, SHARDS, clock=clock)
    before = snapshot(store)
    with pytest.raises(InvalidDbStateError, match="running rescale job .*targets"):
        split_database("src", store, ["x-0", "x-1"], clock=clock)
    with pytest.raises(InvalidDbStateError, match="split keys"):
        split_database("src", store, SHARDS, at=[b"a", b"b"], clock=clock)
    assert snapshot(store) == before


def test_a_rerun_of_a_finished_job_reports_it(store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock)
    first = split_database("src", store, SHARDS, clock=clock).to_dict()
    before = snapshot(store)
    again = split_database("src", store, SHARDS, clock=clock).to_dict()
    assert again["status"] == "already_done" and again["job_id"] == first["job_id"]
    assert again["recorded"]["validation"]["ok"]
    assert snapshot(store) == before
    record = [m.path for m in store.list("src/slatelib/rescale")]
    assert record == [f"src/slatelib/rescale/{first['job_id']}.json"]
    assert json.loads(store.get(record[0]))["status"] == "done"


CRASH_POINTS = [
    ("put_if_absent", "src/slatelib/rescale/active.json", 0),
    ("put_if_absent", "src/wal/", 0),
    ("put_if_absent", "src/compacted/", 0),
    ("put_if_absent", "src/manifest/", 1),   # the flush
    ("put_if_absent", "src/manifest/", 3),   # the job's checkpoint
    ("put", "src/slatelib/rescale/active.json", 0),  # the chosen keys
    ("put_if_absent", "s-0/manifest/", 0),   # the first clone, uninitialized
    ("put_if_absent", "src/manifest/", 5),   # a final checkpoint
    ("put_if_absent", "s-1/manifest/", 2),   # the compaction's fence
    ("put_if_absent", "s-2/manifest/", 3),   # a compaction commit
    ("put", "src/slatelib/rescale/active.json", 1),  # validated
    ("put_if_absent", "s-0/manifest/", 4),   # expired checkpoints removed
    ("put_if_absent", "src/manifest/", 8),   # a final checkpoint released
    ("put_if_absent", "src/manifest/", 10),  # the job's checkpoint deleted
    ("put", re.compile(r"src/slatelib/rescale/\d{8}T"), 0),  # the finished record
    ("delete", "src/slatelib/rescale/active.json", 0),
]


@pytest.mark.parametrize("op, path, skip", CRASH_POINTS,
                         ids=[f"{op}-{getattr(p, 'pattern', p)}-{s}" for op, p, s in
                              CRASH_POINTS])
def test_a_rerun_after_a_crash_finishes_the_job(
        store: ObjectStore, clock: FakeClock, op: str, path: str | re.Pattern[str],
        skip: int) -> None:
    model = make_source(store, clock)
    flaky = FlakyObjectStore(store)
    rule = flaky.crash(op, path=path, skip=skip)  # type: ignore[arg-type]
    # (a crash in the flushing writer's background thread stops that writer instead)
    with pytest.raises((SimulatedCrash, InvalidDbStateError)):
        split_database("src", flaky, SHARDS, clock=clock)
    assert rule.fired == 1
    clock.advance(60)
    report = split_database("src", store, SHARDS, clock=clock).to_dict()
    assert report["status"] in ("done", "already_done")
    keys = report["split_keys"] if report["status"] == "done" else \
        report["recorded"]["split_keys"]
    _check_shards(store, model, [k.encode() for k in keys])
    _source_released(store)


def test_a_shard_that_differs_from_its_range_is_not_released(
        store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock)
    flaky = FlakyObjectStore(store)
    flaky.crash("put_if_absent", path="s-2/manifest/", skip=3)  # right after its commit
    with pytest.raises(SimulatedCrash):
        split_database("src", flaky, SHARDS, clock=clock)
    with Db.open("s-1", store, writer_settings(), clock=clock) as db:
        db.put(b"k00150x", b"not in the source")
    with pytest.raises(DataError, match="s-1: holds"):
        split_database("src", store, SHARDS, clock=clock)
    m = ManifestStore(store, "src").read_latest().value
    assert len(m.checkpoints) == 4  # the job's and every shard's final checkpoint
    plan = RescalePlan.from_json(store.get(active_path("src")))
    assert plan.status == "running"


# ------------------------------------------------------------------------------ merge
def test_merge_puts_the_shards_back_together(store: ObjectStore, clock: FakeClock) -> None:
    model = make_source(store, clock)
    split_database("src", store, SHARDS, clock=clock)
    report = merge_databases(SHARDS, "merged", store, clock=clock).to_dict()
    assert report["status"] == "done"
    assert read(store, "merged") == model
    assert report["validation"]["target_keys"] == len(model)
    assert [d["status"] for d in report["targets"][0]["detach"]] == ["detached"] * 3
    for shard in SHARDS:
        _source_released(store, shard)
    m = ManifestStore(store, "merged").read_latest().value
    assert m.external_dbs == ()


def test_merge_moves_each_sources_wal_tail(store: ObjectStore, clock: FakeClock) -> None:
    a = make_source(store, clock, "a", keys=30, wal_tail=5, prefix=b"a")
    b = make_source(store, clock, "b", keys=30, wal_tail=5, prefix=b"b")
    report = merge_databases(["a", "b"], "ab", store, clock=clock).to_dict()
    assert [s.get("flushed", {}).get("wal_rows") for s in report["sources"]] == [6, 6]  # 5 puts and a delete each
    assert read(store, "ab") == {**a, **b}


def test_merge_refuses_overlapping_sources_before_any_write(
        store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock, "a", keys=30, wal_tail=0, prefix=b"a")
    make_source(store, clock, "b", keys=30, wal_tail=3, prefix=b"a0001")
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError, match="overlapping"):
        merge_databases(["a", "b"], "ab", store, clock=clock)
    assert snapshot(store) == before


def test_merge_needs_two_distinct_sources(store: ObjectStore, clock: FakeClock) -> None:
    with pytest.raises(InvalidArgumentError, match="at least 2"):
        merge_databases(["a"], "ab", store, clock=clock)
    with pytest.raises(InvalidArgumentError, match="twice"):
        merge_databases(["a", "a"], "ab", store, clock=clock)


def test_merge_dry_run_writes_nothing(store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock, "a", keys=30, prefix=b"a")
    make_source(store, clock, "b", keys=30, prefix=b"b")
    before = snapshot(store)
    report = merge_databases(["a", "b"], "ab", store, clock=clock,
                             options=RescaleOptions(dry_run=True)).to_dict()
    assert snapshot(store) == before
    assert report["status"] == "dry_run" and report["targets"][0]["estimated_bytes"] > 0
    assert str(uuid.UUID(int=0)) not in json.dumps(report)


def test_a_merge_killed_while_claiming_its_sources_resumes(store: ObjectStore,
                                                           clock: FakeClock) -> None:
    a = make_source(store, clock, "a", keys=30, wal_tail=2, prefix=b"a")
    b = make_source(store, clock, "b", keys=30, wal_tail=2, prefix=b"b")
    flaky = FlakyObjectStore(store)
    flaky.crash("put_if_absent", path="b/slatelib/rescale/active.json", when="before")
    with pytest.raises(SimulatedCrash):
        merge_databases(["a", "b"], "ab", flaky, clock=clock)
    assert [m.path for m in store.list("b/slatelib/rescale")] == []
    report = merge_databases(["a", "b"], "ab", store, clock=clock).to_dict()
    assert report["status"] == "done" and report["resumed"]
    assert read(store, "ab") == {**a, **b}
    _source_released(store, "a")
    _source_released(store, "b")


def test_a_split_from_a_given_checkpoint_leaves_it_in_place(store: ObjectStore,
                                                           clock: FakeClock) -> None:
    model = make_source(store, clock, wal_tail=0)
    cp = create_checkpoint("src", store, clock=clock)
    with Db.open("src", store, writer_settings(), clock=clock) as db:
        db.put(b"k00003", b"after the checkpoint")
    clock.advance(3600)
    report = split_database("src", store, SHARDS, checkpoint=cp.id, clock=clock).to_dict()
    _check_shards(store, model, [k.encode() for k in report["split_keys"]])
    m = ManifestStore(store, "src").read_latest().value
    assert [c.id for c in m.checkpoints] == [cp.id]
    assert report["sources"][0]["checkpoint"] == "given"


def test_an_unknown_checkpoint_is_refused_before_any_write(store: ObjectStore,
                                                          clock: FakeClock) -> None:
    make_source(store, clock, wal_tail=0)
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError, match="is unknown"):
        split_database("src", store, SHARDS, checkpoint=uuid.uuid4(), clock=clock)
    with pytest.raises(InvalidArgumentError, match="UUID"):
        split_database("src", store, SHARDS, checkpoint="not-a-uuid", clock=clock)
    assert snapshot(store) == before


def test_a_checkpoint_with_wal_data_is_refused(store: ObjectStore, clock: FakeClock) -> None:
    make_source(store, clock)
    DbReader.open("src", store, settings=writer_settings(), clock=clock,
                  auto_refresh=False).close()  # raises wal_id_last_seen over the tail
    cp = create_checkpoint("src", store, clock=clock)
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError, match="WAL data"):
        split_database("src", store, SHARDS, checkpoint=cp.id, clock=clock)
    assert snapshot(store) == before


# ------------------------------------------------------------------ fixed costs
def test_a_split_runs_one_compaction_batch_and_one_check_call(
        store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.ops.engine import ThreadTaskRunner
    from slatelib.ops.rescale import job as job_module
    from slatelib.ops.rescale.validate import ChunkTask

    model = make_source(store, clock)
    ranges: list[int | None] = []
    real_compact = job_module.compact_target

    def compact(*args: Any, **kwargs: Any) -> dict[str, Any]:
        ranges.append(kwargs["parallelism"])
        return real_compact(*args, **kwargs)

    monkeypatch.setattr(job_module, "compact_target", compact)
    batches: list[set[str]] = []

    def batch(tasks: Any) -> Any:
        batches.append({t.db_path for t in tasks})
        return ThreadTaskRunner(2)(tasks)

    calls: list[list[str]] = []

    def mapper(fn: Any, items: Any) -> list[Any]:
        assert all(isinstance(c, ChunkTask) for c in items)
        targets = [s.path for c in items for s in c.scans if s.side == "target"]
        for path in set(targets):  # every target is compacted before it is checked
            m = ManifestStore(store, path).read_latest().value
            assert not any(e.sst_ids for e in m.external_dbs), path
        calls.append(targets)
        return [fn(c) for c in items]

    report = split_database("src", store, SHARDS, clock=clock, mapper=mapper,
                            batch_runner=batch,
                            options=RescaleOptions(slots=2, check_in_tasks=False)).to_dict()
    assert batches == [set(SHARDS)]  # every shard's ranges in one batch
    assert ranges == [2, 2, 2]  # 4 tasks per step on 2 slots, shared by the 3 targets
    assert len(calls) == 1 and sorted(set(calls[0])) == SHARDS  # one call, every target
    assert report["validation"]["ok"]
    _check_shards(store, model, [k.encode() for k in report["split_keys"]])


def test_a_runner_factory_still_gives_each_target_its_own_runner(
        store: ObjectStore, clock: FakeClock) -> None:
    from slatelib.ops.engine import ThreadTaskRunner

    model = make_source(store, clock)
    labels: list[str] = []

    def factory(label: str) -> ThreadTaskRunner:
        labels.append(label)
        return ThreadTaskRunner(2)

    report = split_database("src", store, SHARDS, clock=clock,
                            runner_factory=factory).to_dict()
    assert sorted(labels) == [f"rescale {s}" for s in SHARDS]
    _check_shards(store, model, [k.encode() for k in report["split_keys"]])


def test_the_split_keys_are_chosen_once_when_the_checkpoint_pins_the_planned_manifest(
        store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.ops.rescale import balance
    from slatelib.ops.rescale import job as job_module
    from slatelib.ops.rescale import run as run_module

    make_source(store, clock, wal_tail=0)
    chosen: list[int] = []
    real = balance.plan_weights

    def counting(*args: Any, **kwargs: Any) -> Any:
        chosen.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_module, "plan_weights", counting)
    monkeypatch.setattr(job_module, "plan_weights", counting)
    first = split_database("src", store, SHARDS, clock=clock).to_dict()
    assert len(chosen) == 1
    # with a WAL tail, the checkpoint pins the flushed manifest: chosen again, from it
    make_source(store, clock, "tail")
    chosen.clear()
    again = split_database("tail", store, ["t-0", "t-1", "t-2"], clock=clock).to_dict()
    assert len(chosen) == 2 and again["status"] == first["status"] == "done"
