"""``jobs/compact.py --service`` without Spark: the arguments it refuses, and a run over
discovered databases (key ranges on threads when there is no SparkSession)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from slatelib.config import CompactionSettings, ServiceSettings, Settings, SstSettings
from slatelib.core.row import VALUE
from slatelib.errors import InvalidArgumentError
from slatelib.jobs.compact import build_parser, run
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db

SETTINGS = Settings(sst=SstSettings(block_size=256, min_filter_keys=4),
                    compaction=CompactionSettings(min_range_bytes=1),
                    service=ServiceSettings(poll_interval=0.01, status_interval=0.01))


def make_db(root: Path, name: str, l0s: int) -> None:
    store = open_store(f"file://{root}")
    new_db(store, name)
    rng = random.Random(l0s)
    for seq in range(1, l0s + 1):
        flush_l0(store, name, [(b"k%03d" % k, seq, VALUE, b"v", None, NOW_MS)
                               for k in rng.sample(range(100), 30)])


@pytest.mark.parametrize(("extra", "message"), [
    (["--policy", "l0"], "size-tiered rules"),
    (["--policy", "full"], "size-tiered rules"),
    (["--takeover"], "--takeover does not apply"),
    (["--dry-run"], "--dry-run does not apply"),
    (["--sources", "sr:0"], "--sources does not apply"),
    (["--max-concurrent", "0"], "--max-concurrent must be positive"),
    (["--run-for", "soon"], "--run-for"),
    (["--status-file", "s3://bucket/status.json"], "only local paths"),
])
def test_service_refuses_what_it_cannot_do(tmp_path: Path, extra: list[str],
                                           message: str) -> None:
    make_db(tmp_path, "db", 1)
    args = build_parser().parse_args(["--service", "--db", f"file://{tmp_path}/db", *extra])
    with pytest.raises(InvalidArgumentError, match=message):
        run(None, SETTINGS, args)


def test_service_until_idle_over_discovered_databases(tmp_path: Path) -> None:
    for name, l0s in (("tenants/a", 4), ("tenants/b", 5), ("tenants/c", 2)):
        make_db(tmp_path, name, l0s)
    status = tmp_path / "run" / "status.json"
    args = build_parser().parse_args([
        "--service", "--discover", f"file://{tmp_path}/tenants/", "--until-idle",
        "--max-concurrent", "2", "--policy", "size-tiered", "--status-file", str(status)])
    report, code = run(None, SETTINGS, args)
    assert (code, report["mode"], report["stop_reason"]) == (0, "service", "until_idle")
    assert report["store_requests"]["requests"]["list"] >= 1  # polled and discovered
    assert [(d["db"].rsplit("/", 1)[1], d["compactions"]) for d in report["databases"]] == \
        [("a", 1), ("b", 1), ("c", 0)]
    store = open_store(f"file://{tmp_path}")
    shapes = {n: ManifestStore(store, f"tenants/{n}").read_latest().value for n in "abc"}
    assert {n: (len(m.l0), len(m.compacted)) for n, m in shapes.items()} == \
        {"a": (0, 1), "b": (0, 1), "c": (2, 0)}
    assert json.loads(status.read_text())["state"] == "stopped"


def test_service_options_are_refused_on_a_one_shot_run(tmp_path: Path) -> None:
    args = build_parser().parse_args(["--db", f"file://{tmp_path}/db", "--until-idle"])
    with pytest.raises(InvalidArgumentError, match="--until-idle only apply"):
        run(None, SETTINGS, args)
