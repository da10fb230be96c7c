"""Fencing checks and the invariants every manifest update keeps (slatelib/core/invariants.py),
and that the one CAS loop enforces them."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from slatelib.core.compactions import Compactions
from slatelib.core.invariants import (
    check_compactions_claimable,
    check_compactions_epoch,
    check_compactor_epoch,
    check_manifest_successor,
    check_writer_epoch,
)
from slatelib.core.manifest import Manifest
from slatelib.errors import FencedError, InternalError, InvalidDbStateError
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from slatelib.txn import update_versioned

M = replace(Manifest.initial(), writer_epoch=3, compactor_epoch=2, replay_after_wal_id=5,
            wal_id_last_seen=7, last_l0_seq=100)


def test_epoch_checks_fence_older_parties_and_refuse_state_going_backwards() -> None:
    check_writer_epoch(M, 3)
    check_writer_epoch(M, 4)  # a newer writer's own claim is not fenced
    with pytest.raises(FencedError, match="writer epoch 3"):
        check_writer_epoch(M, 2)
    check_compactor_epoch(M, 2)
    with pytest.raises(FencedError, match="compactor epoch 2"):
        check_compactor_epoch(M, 1)
    with pytest.raises(InvalidDbStateError, match="backwards"):
        check_compactor_epoch(M, 3)
    c = Compactions(compactor_epoch=4)
    check_compactions_epoch(c, 4)
    with pytest.raises(FencedError):
        check_compactions_epoch(c, 3)
    with pytest.raises(InvalidDbStateError):
        check_compactions_epoch(c, 5)
    check_compactions_claimable(c, 5)
    with pytest.raises(FencedError, match="not below ours"):
        check_compactions_claimable(c, 4)


@pytest.mark.parametrize("field", ["writer_epoch", "compactor_epoch", "replay_after_wal_id",
                                   "wal_id_last_seen", "last_l0_seq"])
def test_a_growing_field_may_not_shrink(field: str) -> None:
    check_manifest_successor(M, replace(M, **{field: getattr(M, field) + 1}))
    with pytest.raises(InternalError, match=f"{field} backwards"):
        check_manifest_successor(M, replace(M, **{field: getattr(M, field) - 1}))


def test_initialized_and_destroyed_databases_stay_so() -> None:
    with pytest.raises(InternalError, match="un-initialize"):
        check_manifest_successor(M, replace(M, initialized=False))
    gone = replace(M, destroyed_at_s=10)
    check_manifest_successor(M, gone)
    with pytest.raises(InternalError, match="destruction"):
        check_manifest_successor(gone, M)


def test_the_cas_loop_writes_nothing_that_breaks_an_invariant() -> None:
    store = open_store(f"memory://{uuid.uuid4().hex}/")
    ms = ManifestStore(store, "db")
    ms.write(1, M)
    with pytest.raises(InternalError):
        update_versioned(ms, lambda cur: replace(cur.value, writer_epoch=1))
    assert ms.list_ids() == [1]
    update_versioned(ms, lambda cur: replace(cur.value, writer_epoch=4))
    assert ms.read_latest().value.writer_epoch == 4
