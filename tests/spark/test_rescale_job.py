"""``jobs/rescale.py`` end to end on the session's ``local[2]`` Spark: a split whose shard
compactions and their checks run on the executors, then a merge back."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from slatelib import Db, DbReader
from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.jobs.rescale import build_parser, run
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.spark

SETTINGS = Settings(sst=SstSettings(block_size=512, min_filter_keys=10),
                    compaction=CompactionSettings(min_range_bytes=1, max_sst_size=4096))


def _age(root: Path) -> None:
    """Every object an hour old: nothing looks like a live writer."""
    then = time.time() - 3600
    for dirpath, _, files in os.walk(root):
        for f in files:
            os.utime(os.path.join(dirpath, f), (then, then))


def _source(root: Path) -> dict[bytes, bytes]:
    model = {}
    db = Db.open("src", open_store(f"file://{root}"), writer_settings())
    for i in range(240):
        key, value = b"key%04d" % i, b"value-%d" % i * 3
        db.put(key, value)
        model[key] = value
        if i in (80, 160):
            db.flush()
    db.close(flush="wal")  # the last 79 rows only in the WAL
    _age(root)
    return model


def _scan(root: Path, name: str) -> dict[bytes, bytes]:
    with DbReader.open(name, f"file://{root}", mode="latest") as r:
        return dict(r.scan())


def _job(spark: Any, *argv: str) -> tuple[dict[str, Any], int]:
    args = build_parser().parse_args(list(argv))
    return run(spark, SETTINGS, args)


def test_split_and_merge_on_spark(spark: Any, tmp_path: Path) -> None:
    model = _source(tmp_path)
    root = f"file://{tmp_path}"
    report, code = _job(spark, "split", "--db", f"{root}/src", "--into", "3",
                        "--to", f"{root}/shard-{{i}}", "--store-root", root)
    assert code == 0, report
    assert report["outcome"] == "done" and report["validation"]["ok"]
    assert report["sources"][0]["flushed"]["wal_rows"] == 79
    keys = [k.encode() for k in report["split_keys"]]
    bounds = [None, *keys, None]
    for i, t in enumerate(report["targets"]):
        got = _scan(tmp_path, t["path"])
        want = {k: v for k, v in model.items()
                if (bounds[i] is None or k >= bounds[i]) and (bounds[i + 1] is None
                                                                or k < bounds[i + 1])}
        assert got == want and t["keys"] == len(want)
        assert t["compaction"]["outcome"] == "committed" and t["compaction"]["outputs"] >= 1
        assert t["compaction"]["inputs"]["ssts"] >= 1
        assert t["checked_by"] == "compaction tasks"  # the check ran in the executors' tasks
    assert report["validation"]["source_keys"] == len(model)
    # the executors compared rows, not digests
    assert {t["compared"] for t in report["validation"]["targets"]} == {"rows"}
    m = ManifestStore(open_store(root), "src").read_latest().value
    assert m.checkpoints == ()  # every shard detached, the job's checkpoint released
    _age(tmp_path)
    report, code = _job(spark, "merge", *[a for i in range(3) for a in
                                          ("--source", f"{root}/shard-{i}")],
                        "--to", f"{root}/whole", "--store-root", root)
    assert code == 0, report
    assert _scan(tmp_path, "whole") == model
    assert report["targets"][0]["checked_by"] == "compaction tasks"
    assert report["validation"]["target_keys"] == len(model)
