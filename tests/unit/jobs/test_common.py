"""Per-database isolation of the jobs (``jobs/_common.run_isolated``), without Spark."""

from __future__ import annotations

import argparse
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from jobs._common import DbTarget, add_common_args, resolve_targets, run_isolated
from slatelib import DbReader, bulk_load, create_clone
from slatelib.errors import FencedError, InvalidArgumentError, SstMissingError
from slatelib.objstore import open_store

TARGETS = [DbTarget("file:///", f"db{i}", f"file:///db{i}") for i in range(4)]


def test_databases_run_at_once_and_results_keep_the_argument_order() -> None:
    together = threading.Barrier(2, timeout=10)  # breaks (and fails the test) if run one by one

    def fn(t: DbTarget) -> dict[str, Any]:
        if t.path in ("db0", "db1"):
            together.wait()
        if t.path == "db2":
            raise FencedError("another compactor took over")
        if t.path == "db3":
            raise RuntimeError("a bug")
        return {"rows": int(t.path[-1])}

    results, code = run_isolated(TARGETS, fn, concurrency=2)
    assert [r["db"] for r in results] == [t.name for t in TARGETS]
    assert [r["status"] for r in results] == ["success", "success", "fenced", "error"]
    assert [r["exit_code"] for r in results] == [0, 0, 3, 1]
    assert results[0]["rows"] == 0 and results[1]["rows"] == 1
    assert results[3]["error"] == {"type": "RuntimeError", "message": "a bug"}
    assert code == 3  # the first failure in argument order, not in completion order


def test_concurrency_one_runs_the_databases_in_order_on_the_calling_thread() -> None:
    seen: list[tuple[str, int]] = []

    def fn(t: DbTarget) -> dict[str, Any]:
        seen.append((t.path, threading.get_ident()))
        return {}

    results, code = run_isolated(TARGETS, fn)
    assert code == 0 and [r["db"] for r in results] == [t.name for t in TARGETS]
    assert seen == [(t.path, threading.get_ident()) for t in TARGETS]


def test_a_concurrency_below_one_is_refused_with_the_setting_named() -> None:
    with pytest.raises(InvalidArgumentError, match="gc.db_concurrency must be at least 1, got 0"):
        run_isolated(TARGETS, lambda t: {}, concurrency=0, setting="gc.db_concurrency")


# ------------------------------------------------------------------ --store-root


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_common_args(p)
    return p.parse_args(argv)


def test_store_root_splits_database_urls_at_the_root_the_clone_was_created_in(
    tmp_path: Path,
) -> None:
    """A clone made through a store rooted at ``data`` names its parent ``src``: split at
    the filesystem root, the job would look for the parent at ``/src``."""
    data = f"file://{tmp_path}/data"
    store = open_store(data)
    bulk_load("src", store, [(b"k%03d" % i, b"v%d" % i) for i in range(50)])
    create_clone("clone", "src", store)

    plain = resolve_targets(args("--db", f"{data}/clone"))
    [t] = plain
    assert (t.store_url, t.path) == ("file:///", f"{str(tmp_path).lstrip('/')}/data/clone")
    with DbReader.open(t.path, open_store(t.store_url)) as r, pytest.raises(SstMissingError):
        list(r.scan())

    [t] = resolve_targets(args("--store-root", data, "--db", f"{data}/clone"))
    assert (t.store_url, t.path, t.name) == (data, "clone", f"{data}/clone")
    with DbReader.open(t.path, open_store(t.store_url)) as r:
        assert len(list(r.scan())) == 50

    found = resolve_targets(args("--store-root", data, "--discover", data))
    assert sorted(t.path for t in found) == ["clone", "src"]
    assert {t.store_url for t in found} == {data}


@pytest.mark.parametrize("root, url, message", [
    ("file:///data", "file:///database/a", "is not under --store-root"),
    ("file:///data", "file:///other/a", "is not under --store-root"),
    ("s3://b/pfx", "s3://c/pfx/a", "is not under --store-root"),
    ("file:///data", "file:///data", "names the store root"),
    ("file:///data", "file:///data/../etc", "'..' segment"),
])
def test_urls_outside_the_store_root_are_refused(root: str, url: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        resolve_targets(args("--store-root", root, "--db", url))


def test_store_root_with_a_bucket_prefix() -> None:
    [t] = resolve_targets(args("--store-root", "s3://b/pfx", "--db", "s3://b/pfx/tenants/a"))
    assert (t.store_url, t.path) == ("s3://b/pfx", "tenants/a")


# ------------------------------------------------------------- report shape and headlines
def test_every_job_report_has_the_same_top_level_and_a_headline() -> None:
    from jobs import compact, gc, rescale
    from jobs._common import job_report

    db = {"db": "file:///d", "status": "success", "exit_code": 0, "outcome": "committed",
          "inputs": {"l0_views": 5, "sorted_runs": 0}, "outputs": {"count": 1}}
    r = job_report("compact", 0, totals={"bytes_in": 3_900_000, "bytes_out": 1_800_000,
                                         "versions_dropped": 42_772},
                   databases=[db], seconds=1.7, headline=compact.headline, dry_run=False)
    assert list(r)[:4] == ["job", "status", "headline", "seconds"]
    assert list(r)[-2:] == ["totals", "databases"]
    assert r["headline"] == ("compacted 5 L0 (3.9 MB) -> 1 SST (1.8 MB); "
                             "42,772 versions dropped; 1.7 s")
    kinds = {"wal": {"to_delete": 3, "to_delete_bytes": 2000, "kept": 1},
             "compacted": {"to_delete": 0, "to_delete_bytes": 0, "kept": 4}}
    r = job_report("gc", 5, totals={"kinds": kinds},
                   databases=[{"status": "success", "exit_code": 0},
                              {"status": "data_error", "exit_code": 5}],
                   seconds=5.4, headline=gc.headline, dry_run=True)
    assert r["status"] == "data_error"
    assert r["headline"] == ("dry run: would delete 3 objects (2.0 kB): wal 3 (2.0 kB); 5 kept; "
                             "2 databases; nothing deleted; 1 of 2 databases failed "
                             "(data_error); 5.4 s")
    r = job_report("rescale", 0, totals={"targets": 2, "keys": 10, "bytes": 5000},
                   databases=[{"db": "src", "role": "source"}, {"db": "s-0", "role": "target"},
                              {"db": "s-1", "role": "target"}],
                   seconds=0.5, headline=rescale.headline, command="split", outcome="done",
                   validation={"ok": True})
    assert r["headline"] == "split src into 2 databases (10 keys, 5.0 kB); validated; 0.50 s"


def test_progress_line_has_bytes_and_an_eta() -> None:
    from jobs._compact_spark import progress_line

    assert progress_line("compact a", 1, 4, 1_000_000, 4_000_000, 2.0) == (
        "compact a: 1/4 key ranges, 1.0 MB/4.0 MB done, ETA 6 s, 2.0 s")
    assert progress_line("compact a", 0, 4, 0, 4_000_000, 2.0) == (
        "compact a: 0/4 key ranges, 0 B/4.0 MB done, 2.0 s")


def test_the_shipped_log4j_file_is_applied_unless_one_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs import _spark

    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    assert _spark.LOG4J_CONF.is_file()
    text = _spark.LOG4J_CONF.read_text()
    assert "${env:SLATELIB_SPARK_LOG_LEVEL:-WARN}" in text and "SYSTEM_ERR" in text
    assert _spark.log4j_java_option({}) == (
        f"-Dlog4j.configurationFile={_spark.LOG4J_CONF.as_uri()}")
    mine = {"SPARK_SUBMIT_OPTS": "-Xss4m -Dlog4j.configurationFile=/etc/mine.properties"}
    assert _spark.log4j_java_option(mine) is None
    assert _spark.log4j_java_option({"JAVA_TOOL_OPTIONS": "-Dlog4j2.configurationFile=x"}) is None
    # the launch puts it in SPARK_SUBMIT_OPTS (before spark.driver.extraJavaOptions)
    env = _spark.launch_environment([], fallback="local[1]", environ={"SPARK_SUBMIT_OPTS": "-Xss4m"})
    assert env["SPARK_SUBMIT_OPTS"] == f"-Xss4m {_spark.log4j_java_option({})}"
    assert "SPARK_SUBMIT_OPTS" not in _spark.launch_environment([], fallback="x", environ=mine)


# ---------------------------------------------------------------- WAL stores per database
def test_a_database_entry_is_a_url_or_an_object_naming_its_wal_store(tmp_path: Path) -> None:
    from jobs._common import parse_db_entry

    assert parse_db_entry(" s3://b/a ", where="--db") == ("s3://b/a", None)
    assert parse_db_entry('{"db": "s3://b/a", "wal_store": "s3://w"}', where="--db") == (
        "s3://b/a", "s3://w")
    assert parse_db_entry('{"db": "s3://b/a", "wal_store": ""}', where="--db") == ("s3://b/a", "")
    for bad, why in (('{"db": 1}', "needs"), ('{"db": "s3://b/a", "wal": "x"}', "unknown key"),
                     ('{"db": "s3://b/a", "wal_store": 5}', "must be a URL"), ("{oops", "JSON")):
        with pytest.raises(InvalidArgumentError, match=why):
            parse_db_entry(bad, where="--db")


def test_each_target_gets_its_entrys_wal_store_else_the_runs(tmp_path: Path) -> None:
    dbs = tmp_path / "dbs.txt"
    dbs.write_text('# fleet\nfile:///d/plain\n{"db": "file:///d/own", "wal_store": "file:///w2"}\n'
                   '{"db": "file:///d/none", "wal_store": ""}\n')
    got = {t.path: t.wal_store for t in resolve_targets(args("--dbs-file", str(dbs)),
                                                         wal_store="file:///conf")}
    assert got == {"d/plain": "file:///conf", "d/own": "file:///w2", "d/none": ""}
    got = {t.path: t.wal_store for t in resolve_targets(
        args("--wal-store", "file:///flag", "--dbs-file", str(dbs)), wal_store="file:///conf")}
    assert got == {"d/plain": "file:///flag", "d/own": "file:///w2", "d/none": ""}
    [t] = resolve_targets(args("--db", '{"db": "file:///d/x", "wal_store": "memory://w/"}'))
    assert t.open().spec.wal is not None and t.open().spec.wal.url == "memory://w"
    with pytest.raises(InvalidArgumentError, match=r"dbs-file .*line 2"):
        bad = tmp_path / "bad.txt"
        bad.write_text("file:///d/a\n{\n")
        resolve_targets(args("--dbs-file", str(bad)))


def test_a_slatelib_error_raised_in_a_spark_task_keeps_its_kind_and_exit_code() -> None:
    from jobs._common import raised_in_task
    from slatelib.errors import ChecksumMismatchError, MergeOperatorMissingError
    from slatelib.exit_codes import exit_code_for

    text = ("An exception was thrown from the Python worker:\nTraceback (most recent call "
            "last):\n  File \"x.py\", line 1\nslatelib.errors.MergeOperatorMissingError: key "
            "6b (b'k') has merge operands but no merge operator is configured (give ...)\n")
    err = raised_in_task(text)
    assert isinstance(err, MergeOperatorMissingError) and exit_code_for(err) == 2
    assert str(err).startswith("key 6b (b'k') has merge operands")
    err = raised_in_task("...\nslatelib.errors.ChecksumMismatchError: db/x.sst: checksum\n")
    assert isinstance(err, ChecksumMismatchError) and exit_code_for(err) == 5
    assert raised_in_task("ValueError: boom") is None
    assert raised_in_task("slatelib.errors.NoSuchKind: x") is None
