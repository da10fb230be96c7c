"""``jobs/compact.py`` end to end on the session's ``local[2]`` Spark."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from slatelib import DbReader
from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.row import TOMBSTONE, VALUE
from slatelib.jobs.compact import build_parser, main, run
from slatelib.objstore import open_store
from slatelib.ops.compaction import CompactionTask, TaskOutcome, run_compaction_task
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db

pytestmark = pytest.mark.spark

SETTINGS = Settings(sst=SstSettings(block_size=512, min_filter_keys=10),
                    compaction=CompactionSettings(min_range_bytes=1, max_sst_size=4096))


def make_db(root: Path, name: str, seed: int) -> dict[bytes, bytes]:
    store = open_store(f"file://{root}")
    new_db(store, name)
    rng = random.Random(seed)
    live: dict[bytes, bytes] = {}
    for seq in range(1, 5):
        rows = []
        for k in rng.sample(range(400), 120):
            key = b"key%04d" % k
            if rng.random() < 0.2:
                rows.append((key, seq, TOMBSTONE, b"", None, NOW_MS))
                live.pop(key, None)
            else:
                value = rng.randbytes(24)
                rows.append((key, seq, VALUE, value, None, NOW_MS))
                live[key] = value
        flush_l0(store, name, rows)
    return live


def scan(root: Path, name: str) -> dict[bytes, bytes]:
    with DbReader.open(name, f"file://{root}", mode="latest") as r:
        return dict(r.scan())


def job(spark: Any, *argv: str, task_fn: Any = run_compaction_task) -> tuple[dict[str, Any], int]:
    args = build_parser().parse_args(list(argv))
    return run(spark, SETTINGS, args, task_fn=task_fn)


def test_job_compacts_several_databases_each_isolated(spark: Any, tmp_path: Path) -> None:
    live = make_db(tmp_path, "a", 1)
    make_db(tmp_path, "b", 2)
    sst = next((tmp_path / "b" / "compacted").iterdir())
    data = bytearray(sst.read_bytes())
    data[100] ^= 0xFF  # a damaged block in database b
    sst.write_bytes(bytes(data))
    report, code = job(spark, "--db", f"file://{tmp_path}/a", "--db", f"file://{tmp_path}/b",
                       "--parallelism", "3")
    a, b = report["databases"]
    assert (a["status"], a["outcome"], a["tasks"]) == ("success", "committed", 3)
    assert a["rows_in"] == 480 and a["rows_out"] == len(live)
    assert a["phases_s"]["execute"] > 0 and a["bytes_in"] > 0
    # the input MB per second of execution (a few KB: on a loaded machine it rounds to 0.0)
    assert a["throughput_mb_s"]["execute"] == pytest.approx(
        a["bytes_in"] / 1e6 / a["phases_s"]["execute"], rel=0.05, abs=0.011)
    assert len(a["outputs"]["ssts"]) >= 3 and a["peak_task_rss_bytes"] > 0
    assert (b["status"], b["exit_code"]) == ("data_error", 5)
    assert b["error"]["type"] == "ChecksumMismatchError" and sst.name in b["error"]["message"]
    assert "block 0" in b["error"]["message"]
    assert code == 5 and report["totals"]["failed"] == 1
    assert scan(tmp_path, "a") == live
    m = ManifestStore(open_store(f"file://{tmp_path}"), "b").read_latest().value
    assert len(m.l0) == 4 and m.compacted == ()  # nothing committed for b


def test_task_failing_on_an_executor_is_retried_without_duplicate_outputs(
    spark: Any, tmp_path: Path
) -> None:
    live = make_db(tmp_path, "db", 3)
    marker = tmp_path / "failed-once"

    def flaky_task(task: CompactionTask) -> TaskOutcome:
        out = run_compaction_task(task)
        if task.index == 1 and not marker.exists():
            marker.write_text("x")  # this attempt's SSTs are uploaded, then it "fails"
            from slatelib.errors import UnavailableError
            from slatelib.ops.engine import TaskFailure

            return TaskFailure.of(task.index, UnavailableError("executor lost"))
        return out

    before = {p.name for p in (tmp_path / "db" / "compacted").iterdir()}
    report, code = job(spark, "--db", f"file://{tmp_path}/db", "--parallelism", "2",
                       task_fn=flaky_task)
    [db] = report["databases"]
    assert code == 0 and db["task_runs"] == db["tasks"] + 1
    store = open_store(f"file://{tmp_path}")
    m = ManifestStore(store, "db").read_latest().value
    referenced = {DbPaths("db").compacted(i).rsplit("/", 1)[1] for i in m.referenced_sst_ids()}
    after = {p.name for p in (tmp_path / "db" / "compacted").iterdir()}
    orphans = after - before - referenced
    assert orphans and not orphans & referenced  # the failed attempt's outputs: garbage
    assert len(referenced) == len(db["outputs"]["ssts"])
    assert scan(tmp_path, "db") == live


def test_dry_run_needs_no_spark_writes_nothing_and_reports_to_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_db(tmp_path / "data", "db", 4)
    files = sorted(p for p in (tmp_path / "data").rglob("*") if p.is_file())
    conf = tmp_path / "c.toml"
    conf.write_text('[compaction]\nmin_range_bytes = 1\n')
    out = tmp_path / "report.json"
    code = main(["--db", f"file://{tmp_path}/data/db", "--dry-run", "--parallelism", "2",
                 "--conf", str(conf), "--report", str(out)])
    report = json.loads(out.read_text())
    assert code == 0 and report["databases"][0]["outcome"] == "dry_run"
    assert len(report["databases"][0]["ranges"]) == 2
    assert json.loads(capsys.readouterr().out) == report
    assert sorted(p for p in (tmp_path / "data").rglob("*") if p.is_file()) == files


@pytest.mark.parametrize(("argv", "code"), [
    (["--policy", "leveled"], 2),
    (["--sources", "sr:9"], 2),
    (["--max-sst-size", "0"], 2),
])
def test_invalid_input_exits_2(tmp_path: Path, argv: list[str], code: int) -> None:
    make_db(tmp_path, "db", 5)
    assert main(["--db", f"file://{tmp_path}/db", "--dry-run", *argv]) == code


def test_job_compacts_every_segment_of_a_segmented_database_in_one_spark_job(
        spark: Any, tmp_path: Path) -> None:
    """SlateDB RFC-0024: the key-range tasks of every segment's compaction run on the
    executors together (numbered across the segments), committed with one CAS."""
    from tests.compaction_fixtures import flush_segmented

    store = open_store(f"file://{tmp_path}")
    new_db(store, "seg")
    for seq in range(1, 4):
        flush_segmented(store, "seg", [(p + b"%04d" % k, seq, VALUE, b"v%d" % seq, None,
                                        NOW_MS) for p in (b"aaa:", b"bbb:", b"ccc:")
                                       for k in range(0, 300, seq)])
    live = scan(tmp_path, "seg")
    report, code = job(spark, "--db", f"file://{tmp_path}/seg", "--policy", "l0",
                       "--parallelism", "2")
    [db] = report["databases"]
    assert code == 0 and db["outcome"] == "committed"
    assert [c["segment"] for c in db["compactions"]] == ["aaa:", "bbb:", "ccc:"]
    assert db["tasks"] >= 3 and sorted(t["task"] for t in db["task_metrics"]) == list(
        range(db["tasks"]))
    m = ManifestStore(store, "seg").read_latest().value
    assert [(s.prefix, len(s.l0), [r.id for r in s.compacted]) for s in m.segments or ()] == [
        (b"aaa:", 0, [0]), (b"bbb:", 0, [1]), (b"ccc:", 0, [2])]
    assert scan(tmp_path, "seg") == live
