"""The jobs' common options and database selection (``slatelib/jobs/_common.py``), without Spark."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest

from slatelib import DbReader, bulk_load, create_clone
from slatelib.errors import InvalidArgumentError, SstMissingError
from slatelib.jobs._common import add_common_args, resolve_targets, settings_from
from slatelib.objstore import open_store
from slatelib.objstore.registry import set_store_defaults, store_defaults

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
    from slatelib.jobs import compact, gc, rescale
    from slatelib.ops.job_report import job_report

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


# ---------------------------------------------------------------- WAL stores per database
def test_a_database_entry_is_a_url_or_an_object_naming_its_wal_store(tmp_path: Path) -> None:
    from slatelib.jobs._common import parse_db_entry

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


def test_jobs_load_env_files_before_settings_and_register_store_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / "job.env"
    env_file.write_text("SLATELIB_GC__MIN_AGE=10min\n")
    conf = tmp_path / "c.toml"
    conf.write_text('[object_store]\nregion = "eu-west-1"\n')
    p = argparse.ArgumentParser()
    add_common_args(p)
    args = p.parse_args(["--db", "file:///tmp/x", "--env-file", str(env_file),
                         "--conf", str(conf)])
    monkeypatch.delenv("SLATELIB_GC__MIN_AGE", raising=False)
    try:
        settings = settings_from(args)
        assert settings.gc.min_age == 600.0
        assert store_defaults("s3") == {"region": "eu-west-1"}
    finally:
        set_store_defaults(None)
        os.environ.pop("SLATELIB_GC__MIN_AGE", None)
