"""jobs/gc.py on Spark: many databases per run, the same decisions as the single-process
planner, and a 100k-object S3 listing split across executors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from jobs._gc_spark import SparkBackend
from jobs.gc import build_parser, run
from slatelib.clock import SYSTEM_CLOCK
from slatelib.config import GcSettings, Settings, load_settings
from slatelib.core.compactions import CompactionStatus
from slatelib.errors import InvalidArgumentError
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.gc import collect_garbage, gc_options, run_gc
from tests.s3_server import S3Bucket
from tests.unit.gc_support import HOUR, DbWriter, compactions, manifest, ulid_at

pytestmark = pytest.mark.spark

DBS = ["basic", "ckpt_src", "gc_collected"]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def job_args(tmp_path: Path, *argv: str, listing_max: int = 0) -> Any:
    conf = tmp_path / "gc.toml"
    conf.write_text(f"[gc]\ndriver_listing_max = {listing_max}\nlist_partitions = 3\n")
    return build_parser().parse_args([*argv, "--conf", str(conf)])


def test_job_collects_many_databases_like_the_single_process_planner(
    spark: Any, fixture_copy: Path, tmp_path: Path,
) -> None:
    twin = tmp_path / "twin"
    shutil.copytree(fixture_copy, twin)
    args = job_args(tmp_path, *[a for n in DBS for a in ("--db", f"file://{fixture_copy}/{n}")],
                    "--db", f"file://{fixture_copy}/not-a-db",
                    "--db", f"file://{fixture_copy}/ckpt_clone/",  # a prefix spelling: refused
                    "--min-age", "0s", "--force", "--no-dry-run")
    report, code = run(spark, load_settings(args.conf), args)
    assert code == 5
    by_db = {r["db"].rstrip("/").rsplit("/", 1)[1]: r for r in report["databases"]}
    assert by_db["not-a-db"]["status"] == "data_error"
    assert "not a database root" in by_db["not-a-db"]["error"]["message"]
    assert by_db["ckpt_clone"]["status"] == "invalid_input"
    assert "ends with '/': that names a prefix" in by_db["ckpt_clone"]["error"]["message"]
    assert all(by_db[n]["status"] == "success" for n in DBS)
    assert report["totals"]["databases"] == 5 and report["totals"]["failed"] == 2
    assert by_db["basic"]["kinds"]["compacted"]["deleted"] == 3
    local = open_store(f"file://{twin}")
    for n in DBS:
        collect_garbage(n, local, min_age=0, force=True, dry_run=False)
    assert tree(fixture_copy) == tree(twin)


def test_dry_run_prints_every_decision_and_deletes_nothing(
    spark: Any, fixture_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    before = tree(fixture_copy)
    args = job_args(tmp_path, "--discover", f"file://{fixture_copy}/", "--min-age", "0s",
                    "--force", "--dry-run", listing_max=1000)
    report, code = run(spark, load_settings(args.conf), args)
    assert code == 0 and tree(fixture_copy) == before
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(report["databases"]) == 13
    basic = [x for x in lines if x["db"].endswith("/basic")]
    local = collect_garbage(f"{fixture_copy}/basic".lstrip("/"), open_store("file:///"),
                            min_age=0, force=True)
    assert sorted((x["path"], x["action"]) for x in basic) == sorted(
        (d.path, d.action.value) for d in local.decisions)
    assert all(x["reason"].startswith(("kept: ", "delete: ")) for x in lines)


def test_min_age_below_the_floor_refuses_the_whole_job(spark: Any, tmp_path: Path) -> None:
    args = job_args(tmp_path, "--db", f"file://{tmp_path}/db", "--min-age", "1m")
    with pytest.raises(InvalidArgumentError, match="below the safety floor"):
        run(spark, load_settings(args.conf), args)


# ------------------------------------------------------------------ 100k objects on S3
N_WAL, N_SST = 60_000, 45_000


def seed_big_db(bucket: S3Bucket, root: str) -> tuple[ObjectStore, set[str], int]:
    store = bucket.open()
    t0 = SYSTEM_CLOCK.now_ms()
    w = DbWriter(store, root)
    l0 = ulid_at(t0 - HOUR)
    w.sst(l0)
    w.compactions(1, compactions((ulid_at(t0 - HOUR), CompactionStatus.COMPLETED)))
    w.manifests_upto(3, manifest(l0=[l0], replay_after=N_WAL + 1, last_seen=N_WAL + 2))
    w.wal(N_WAL + 1)
    w.wal(N_WAL + 2)
    garbage = [w.paths.wal(i) for i in range(1, N_WAL + 1)]
    garbage += [w.paths.compacted(ulid_at(t0 - 3 * HOUR - i * 1000)) for i in range(N_SST)]
    bucket.seed(garbage, b"x")
    return store, set(garbage), t0


@pytest.mark.integration
def test_100k_objects_on_s3_are_listed_in_ranges_across_executors_and_collected(
    spark: Any, s3_bucket: S3Bucket,
) -> None:
    store, garbage, t0 = seed_big_db(s3_bucket, "tenant/db")
    backend = SparkBackend(spark, list_partitions=8, local_threshold=0)
    options = gc_options(Settings(gc=GcSettings()), min_age=300)
    report = run_gc(store, "tenant/db", options, dry_run=False, backend=backend,
                    clock=_At(t0 + HOUR))
    for directory, n in (("wal", N_WAL + 2), ("compacted", N_SST + 1)):
        split = report.listing[directory]
        assert split["objects"] == n and 4 <= split["ranges"] <= 8, split
        assert split["nonempty_ranges"] >= 4 and split["largest_range"] < n / 2, split
    kinds = report.to_json()["kinds"]
    assert (kinds["wal"]["listed"], kinds["compacted"]["listed"]) == (N_WAL + 2, N_SST + 1)
    assert (kinds["wal"]["deleted"], kinds["compacted"]["deleted"]) == (N_WAL, N_SST)
    left = {m.path for m in store.list("tenant/db")}
    assert not (left & garbage)
    # the L0, compactions 1, manifest 3, two WALs and gc/manifest.boundary
    assert len(left) == 6 and "tenant/db/gc/manifest.boundary" in left


class _At:
    def __init__(self, now_ms: int) -> None:
        self._now = now_ms

    def now_ms(self) -> int:
        return self._now

    def monotonic_s(self) -> float:
        return SYSTEM_CLOCK.monotonic_s()

    def sleep(self, seconds: float) -> None:
        SYSTEM_CLOCK.sleep(seconds)
