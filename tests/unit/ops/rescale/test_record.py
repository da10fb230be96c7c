"""The rescale job record: one job per source, reruns find their own, finished copies."""

from __future__ import annotations

import pytest

from slatelib.core.rescale_plan import plan_merge, plan_split
from slatelib.errors import CommitStateUnknownError, ConflictError, InvalidDbStateError
from slatelib.objstore import ObjectStore
from slatelib.ops.rescale import record
from slatelib.testing.faulty import FlakyObjectStore


def test_one_job_per_source(store: ObjectStore) -> None:
    first = plan_split("j1", "db", "cp", ["a", "b"], None, now_ms=1)
    record.claim(store, first)
    record.claim(store, first)  # a rerun of the same job
    with pytest.raises(InvalidDbStateError, match="j1"):
        record.claim(store, plan_split("j2", "db", "cp", ["c", "d"], None, now_ms=2))
    assert record.read_active(store, "db") == first


def test_a_refused_merge_claim_leaves_no_record_behind(store: ObjectStore) -> None:
    record.claim(store, plan_split("j1", "s1", "cp", ["a", "b"], None, now_ms=1))
    with pytest.raises(InvalidDbStateError):
        record.claim(store, plan_merge("j2", [("s0", "c0"), ("s1", "c1")], "m", now_ms=2))
    assert record.read_active(store, "s0") is None
    assert record.read_active(store, "s1").job_id == "j1"  # type: ignore[union-attr]


def test_a_claim_whose_response_was_lost_is_ours(store: ObjectStore) -> None:
    flaky = FlakyObjectStore(store)
    flaky.fail_after("put_if_absent", path="db/slatelib/rescale/active.json",
                     error=lambda: CommitStateUnknownError("lost"))
    plan = plan_split("j1", "db", "cp", ["a", "b"], None, now_ms=1)
    record.claim(flaky, plan)
    assert record.read_active(store, "db") == plan


def test_finish_keeps_a_copy_with_the_report_and_releases(store: ObjectStore) -> None:
    plan = plan_merge("j1", [("s0", "c0"), ("s1", "c1")], "m", now_ms=1)
    record.claim(store, plan)
    record.finish(store, plan, {"ok": True})
    record.finish(store, plan, {"ok": True})  # idempotent
    for s in ("s0", "s1"):
        assert record.read_active(store, s) is None
        [done] = record.read_finished(store, s)
        assert done.job_id == "j1" and done.status == "done"
    store.put("s0/slatelib/rescale/broken.json", b"{")
    assert [p.job_id for p in record.read_finished(store, "s0")] == ["j1"]


def test_update_refuses_a_record_of_another_job(store: ObjectStore) -> None:
    record.claim(store, plan_split("j1", "db", "cp", ["a", "b"], None, now_ms=1))
    with pytest.raises(ConflictError):
        record.update(store, plan_split("j2", "db", "cp", ["a", "b"], None, now_ms=1))
