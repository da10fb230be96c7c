"""Rescale targets: which database at a target path is the job's, and free paths."""

from __future__ import annotations

import uuid

import pytest

from slatelib import bulk_load
from slatelib.core.manifest import ExternalDb, Manifest
from slatelib.core.rescale_plan import plan_merge, plan_split
from slatelib.errors import InvalidArgumentError
from slatelib.ops.rescale.targets import check_target_free, clone_sources, is_job_target
from tests.unit.writer.support import memory_store

CP = str(uuid.uuid4())


def _entry(path: str, cp: str) -> ExternalDb:
    return ExternalDb(path, uuid.UUID(cp), uuid.uuid4(), ())


def test_a_target_is_the_jobs_when_it_names_its_sources_at_the_jobs_checkpoints() -> None:
    plan = plan_merge("j", [("a", CP), ("b", CP)], "m", now_ms=1)
    t = plan.targets[0]
    assert is_job_target(Manifest(external_dbs=(_entry("a", CP), _entry("b", CP))), plan, t)
    assert is_job_target(Manifest(), plan, t)  # detached already
    other = str(uuid.uuid4())
    assert not is_job_target(Manifest(external_dbs=(_entry("a", other),)), plan, t)


def test_clone_sources_carry_the_checkpoint_and_range() -> None:
    plan = plan_split("j", "db", CP, ["x", "y"], [b"m"], now_ms=1)
    [src] = clone_sources(plan, plan.targets[1])
    assert (src.path, str(src.checkpoint)) == ("db", CP)
    assert src.projection is not None and src.projection.contains(b"m")


def test_a_target_path_must_be_free() -> None:
    store = memory_store()
    check_target_free(store, "t")
    store.put("u/wal/00000000000000000001.sst", b"")
    with pytest.raises(InvalidArgumentError, match="holds 1 objects"):
        check_target_free(store, "u")
    bulk_load("v", store, [(b"k", b"v")])
    with pytest.raises(InvalidArgumentError, match="already exists"):
        check_target_free(store, "v")
