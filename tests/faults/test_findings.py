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
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from slatelib import Db
from slatelib.errors import InvalidDbStateError
from slatelib.objstore import open_store
from slatelib.ops.checkpoint import create_checkpoint
from slatelib.ops.clone import create_clone
from slatelib.ops.compaction import run_compaction
from slatelib.ops.destroy import destroy
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.faulty import FlakyObjectStore
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
