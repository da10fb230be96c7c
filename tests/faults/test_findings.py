"""Findings of the fault harness in slatelib, reproduced deterministically (regression
tests: both are fixed).

K1 (F09, F12; first seen with seed 21): two slatelib compactions race. The second read the
manifest at compactor epoch E; before it lists the claim records, the first fences E + 1
and pruned every record below E + 1. The second then found no slatelib record for E and
refused with ``CompactorActiveError`` (exit 7, "held by another compactor ... not claimed
by slatelib"), telling the operator to turn off a foreign compactor that does not exist.
Safe (nothing was written), but wrong. Fixed by keeping the records of the last
``CLAIM_EPOCHS_KEPT`` epochs.

K2 (F21; first seen with seed 2, ``--only F21``): a hard destroy of a clone's path while
``create_clone`` is stalled right before its last write (``initialized = true``): the
destroy releases the clone's final checkpoint in the parent and deletes the clone's
objects; the clone then wrote its manifest into the emptied directory and reported
success, an initialized clone whose SSTs nothing pinned in the parent any more (the
parent's GC then deleted them). Fixed: ``create_clone`` checks its final checkpoints after
that write, removes the orphan manifest and fails.

K3 (R01; first seen with seed 4, ``--only R01``): a rescale whose target compaction failed
after its fence (here: the compactions file write) could never finish. The compaction's
fence manifest carries a claim marker checkpoint that lives a day; the failed run's claim
record was already ``claimed``, and the next compaction drops a stale marker only while
the record is ``claiming``. The marker pins the fence manifest, which references the
source's SSTs, so every rerun failed at detach ("targets still attached ... a live
checkpoint of the target still pins a manifest that references the source's SSTs") for a
day. Fixed: detaching a target first drops the markers of compactor claims older than the
target's current compactor epoch.

K4 (R01; first seen with seed 6, ``--only R01``): a merge one of whose sources is empty
(a shard of a split at given keys) could not be resumed once its target's first manifest
was written. A union clone names only the sources that contribute SSTs in its
``external_dbs``, but the job recognised its own target only if it named every source at
the job's checkpoint, so every rerun refused it: "target ... is not a clone made by rescale
job ...". Fixed: the target is the job's when every entry it has for the job's sources
names the job's checkpoint.

K5 (R01; first seen with seeds 5 and 11, ``--only R01``): a target destroyed while the job
was stopped after it had validated the targets. Soft-destroyed: the rerun skipped the
validation (done by an earlier run), detached the destroyed target and reported the job
done, so an operator would go on to destroy the source, and GC would then collect the only
copy of that range. Hard-destroyed: the rerun cloned and compacted it again and reported
it validated by the earlier run, which had checked the database destroyed since. Fixed: a
rerun refuses a destroyed target (``InvalidDbStateError``, saying how to start over; the
job record stays running), and validates again when it cloned a target.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from slatelib import Db
from slatelib.errors import InvalidDbStateError, UnavailableError
from slatelib.objstore import open_store
from slatelib.ops.checkpoint import create_checkpoint
from slatelib.ops.clone import create_clone
from slatelib.ops.compaction import run_compaction
from slatelib.ops.destroy import destroy
from slatelib.ops.rescale import RescaleOptions, merge_databases, split_database
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash
from tests.faults.faults import Gate, arm, gate_layer
from tests.faults.scenarios.common import maint_settings
from tests.faults.writers import slatelib_settings

pytestmark = pytest.mark.integration


def write_l0s(url: str, rounds: int) -> None:
    with Db.open("db", url, slatelib_settings()) as db:
        for r in range(rounds):
            for i in range(20):
                db.put(b"k%02d" % i, b"v%d" % r)
            db.flush()


def test_k1_a_compaction_racing_another_slatelib_compaction_is_not_refused(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    write_l0s(url, 3)
    run_compaction("db", url, settings=maint_settings(), policy="l0")  # epoch 1: slatelib's
    write_l0s(url, 1)
    store = open_store(url)
    raced: list[str] = []

    def other_compaction(_seconds: float) -> None:  # runs while the first lists the claims
        raced.append(run_compaction("db", store, settings=maint_settings(),
                                    policy="full").status)

    racing = FlakyObjectStore(store, sleep=other_compaction)
    racing.delay("list", "slatelib/claims", seconds=1.0, times=1)
    report = run_compaction("db", racing, settings=maint_settings(), policy="full")
    assert raced == ["committed"]  # the race happened: the other one fenced epoch 2
    assert report.status in ("committed", "nothing_to_do")


def test_k2_a_clone_never_ends_initialized_without_its_final_checkpoint(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    store = open_store(url)
    write_l0s(url, 1)
    cp = create_checkpoint("db", store)
    gate = Gate(timeout_s=10)
    layer = gate_layer(store, gate)
    arm(layer, "put_if_absent", "clone/manifest/", skip=1)  # the `initialized` write
    outcome: list[object] = []

    def clone() -> None:
        try:
            outcome.append(create_clone("clone", "db", layer, parent_checkpoint=cp.id))
        except InvalidDbStateError as exc:  # destroyed while being created
            outcome.append(exc)

    t = threading.Thread(target=clone)
    t.start()
    assert gate.wait_reached(10)
    destroy("clone", store, soft=False)
    gate.open()
    t.join(30)
    assert len(outcome) == 1
    stored = ManifestStore(store, "clone").try_read_latest()
    if stored is None or not stored.value.initialized:
        assert isinstance(outcome[0], InvalidDbStateError)  # it failed, and says so
        return
    parent = ManifestStore(store, "db").read_latest().value
    finals = [e.final_checkpoint_id for e in stored.value.external_dbs]
    assert finals and all(f is not None and parent.checkpoint(f) is not None for f in finals)


def test_k3_a_rescale_rerun_after_a_failed_target_compaction_detaches_it(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    store = open_store(url)
    write_l0s(url, 2)
    options = RescaleOptions(fence_source=True)
    flaky = FlakyObjectStore(store)
    flaky.fail_before("put_if_absent", "s-0/compactions/")  # right after the compaction's fence
    with pytest.raises(UnavailableError):
        split_database("db", flaky, ["s-0", "s-1"], at=[b"k10"], settings=maint_settings(),
                       options=options)
    left = ManifestStore(store, "s-0").read_latest().value
    assert left.checkpoints and left.external_dbs  # the failed run's claim marker
    report = split_database("db", store, ["s-0", "s-1"], at=[b"k10"],
                            settings=maint_settings(), options=options)
    assert report.status == "done" and report.resumed
    for shard, keys in (("s-0", range(10)), ("s-1", range(10, 20))):
        m = ManifestStore(store, shard).read_latest().value
        assert m.external_dbs == () and m.checkpoints == ()
        with Db.open(shard, store, slatelib_settings()) as db:
            assert [db.get(b"k%02d" % i) for i in keys] == [b"v1"] * 10
    assert ManifestStore(store, "db").read_latest().value.checkpoints == ()


def test_k4_a_merge_with_an_empty_source_resumes_after_a_crash(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    store = open_store(url)
    write_l0s(url, 1)
    options = RescaleOptions(fence_source=True)
    split_database("db", store, ["a", "b"], at=[b"z"], settings=maint_settings(),
                   options=options)  # b holds nothing
    flaky = FlakyObjectStore(store)
    flaky.crash("put_if_absent", "m/manifest/")  # after the union clone's first manifest
    with pytest.raises(SimulatedCrash):
        merge_databases(["a", "b"], "m", flaky, settings=maint_settings(), options=options)
    first = ManifestStore(store, "m").read_latest().value
    assert [e.path for e in first.external_dbs] == ["a"]  # nothing of b's: no entry
    report = merge_databases(["a", "b"], "m", store, settings=maint_settings(),
                             options=options)
    assert report.status == "done" and report.resumed
    assert ManifestStore(store, "m").read_latest().value.external_dbs == ()
    with Db.open("m", store, slatelib_settings()) as db:
        assert [db.get(b"k%02d" % i) for i in range(20)] == [b"v0"] * 20


@pytest.mark.parametrize("soft", [True, False], ids=["soft", "hard"])
def test_k5_a_target_destroyed_after_validation_is_never_reported_validated(
        tmp_path: Path, soft: bool) -> None:
    url = f"file://{tmp_path}"
    store = open_store(url)
    write_l0s(url, 1)
    options = RescaleOptions(fence_source=True)
    flaky = FlakyObjectStore(store)
    flaky.crash("put", "db/slatelib/rescale/active.json")  # after recording `validated`
    with pytest.raises(SimulatedCrash):
        split_database("db", flaky, ["s-0", "s-1"], at=[b"k10"], settings=maint_settings(),
                       options=options)
    destroy("s-1", store, soft=soft)
    if soft:
        with pytest.raises(InvalidDbStateError, match="destroyed"):
            split_database("db", store, ["s-0", "s-1"], at=[b"k10"],
                           settings=maint_settings(), options=options)
        active = [m.path for m in store.list("db/slatelib/rescale")
                  if m.path.endswith("active.json")]
        assert active  # not reported done
        assert ManifestStore(store, "s-0").read_latest().value.external_dbs  # not released
        return
    report = split_database("db", store, ["s-0", "s-1"], at=[b"k10"],
                            settings=maint_settings(), options=options)
    assert report.status == "done" and report.targets[1]["clone"]["created"]
    assert report.validation["ok"] and "checked_by" not in report.validation
    with Db.open("s-1", store, slatelib_settings()) as db:
        assert [db.get(b"k%02d" % i) for i in range(10, 20)] == [b"v0"] * 10
