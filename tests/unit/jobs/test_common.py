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
