"""``jobs/compact.py --worker`` on the session's ``local[2]`` Spark: the driver claims the
compactions a coordinator scheduled in two databases, runs their ranges on the executors,
and reports them Compacted; a stand-in coordinator then commits, and every key reads the
same. The flags of one-shot runs are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slatelib.core.compactions import CompactionStatus
from slatelib.errors import InvalidArgumentError
from slatelib.jobs.compact import build_parser, run
from slatelib.objstore import open_store
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from tests.compaction_fixtures import commit_reported, compaction_entry, schedule_compaction
from tests.spark.test_compact_job import SETTINGS, make_db, scan

pytestmark = pytest.mark.spark


def job(spark: Any, *argv: str) -> tuple[dict[str, Any], int]:
    return run(spark, SETTINGS, build_parser().parse_args(list(argv)))


def test_worker_executes_scheduled_compactions_of_two_databases(
        spark: Any, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    live = {name: make_db(tmp_path, name, seed) for name, seed in (("a", 1), ("b", 2))}
    ids = {name: schedule_compaction(store, name) for name in live}
    epochs = {n: CompactionsStore(store, n).read_latest().value.compactor_epoch for n in live}
    manifests = {n: ManifestStore(store, n).read_latest().id for n in live}
    report, code = job(spark, "--worker", "--until-idle", "--db", f"file://{tmp_path}/a",
                       "--db", f"file://{tmp_path}/b", "--parallelism", "3")
    assert code == 0 and report["mode"] == "worker"
    assert report["totals"]["compacted"] == 2 and report["totals"]["failed"] == 0
    for name in live:
        c = compaction_entry(store, name, ids[name])
        assert c.status == CompactionStatus.COMPACTED
        assert c.worker.worker_id == report["worker_id"]
        assert len(c.output_ssts) >= 2
        # a worker never writes the manifest nor the compactor epoch
        assert ManifestStore(store, name).read_latest().id == manifests[name]
        assert CompactionsStore(store, name).read_latest().value.compactor_epoch == epochs[name]
        commit_reported(store, name, ids[name])
        assert scan(tmp_path, name) == live[name]
        m = ManifestStore(store, name).read_latest().value
        assert not m.l0 and len(m.compacted) == 1


@pytest.mark.parametrize(("flags", "match"), [
    (["--policy", "full"], "--policy"),
    (["--dry-run"], "--dry-run"),
    (["--takeover"], "--takeover"),
    (["--max-concurrent", "0"], "--max-concurrent"),
    (["--run-for", "soon"], "--run-for"),
])
def test_worker_refuses_flags_that_do_not_apply(tmp_path: Path, flags: list[str],
                                                 match: str) -> None:
    make_db(tmp_path, "db", 3)
    with pytest.raises(InvalidArgumentError, match=match):
        job(None, "--worker", "--db", f"file://{tmp_path}/db", *flags)
