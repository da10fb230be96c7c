"""``jobs/rescale.py`` without Spark (threads run the compactions and scans): arguments,
templates, stores, the report and its exit codes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from slatelib import Db, DbReader
from slatelib.config import Settings
from slatelib.exit_codes import EXIT_DATA, EXIT_OK, EXIT_USAGE
from slatelib.jobs import rescale as job
from slatelib.objstore import open_store
from tests.unit.writer.support import writer_settings


def _age(root: Path, seconds: float = 3600) -> None:
    """Make every object under ``root`` look ``seconds`` old (nothing looks live)."""
    then = time.time() - seconds
    for dirpath, _, files in os.walk(root):
        for f in files:
            os.utime(os.path.join(dirpath, f), (then, then))


def _source(root: Path, path: str = "src", prefix: bytes = b"k", n: int = 60,
            ) -> dict[bytes, bytes]:
    model = {}
    db = Db.open(path, open_store(f"file://{root}"), writer_settings())
    for i in range(n):
        model[prefix + b"%03d" % i] = b"v%d" % i
        db.put(prefix + b"%03d" % i, b"v%d" % i)
        if i == n // 2:
            db.flush()
    db.close(flush="wal")
    _age(root)
    return model


def _run(argv: list[str]) -> tuple[dict[str, Any], int]:
    args = job.build_parser().parse_args(argv)
    return job.run(None, Settings(), args)


def _read(root: Path, path: str) -> dict[bytes, bytes]:
    with DbReader.open(path, open_store(f"file://{root}"), mode="latest") as r:
        return dict(r.scan())


def _tree(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            out[p] = Path(p).read_bytes()
    return out


def test_split_then_merge_through_the_job(tmp_path: Path) -> None:
    model = _source(tmp_path)
    report, code = _run(["split", "--db", f"file://{tmp_path}/src", "--into", "3",
                         "--to", f"file://{tmp_path}/shard-{{i}}",
                         "--store-root", f"file://{tmp_path}"])
    assert code == EXIT_OK, report
    assert report["job"] == "rescale" and report["status"] == "success"
    assert report["outcome"] == "done" and report["validation"]["ok"]
    assert [t["path"] for t in report["targets"]] == ["shard-0", "shard-1", "shard-2"]
    merged: dict[bytes, bytes] = {}
    for i in range(3):
        merged |= _read(tmp_path, f"shard-{i}")
    assert merged == model
    _age(tmp_path)
    report, code = _run(["merge", "--source", f"file://{tmp_path}/shard-0",
                         "--source", f"file://{tmp_path}/shard-1",
                         "--source", f"file://{tmp_path}/shard-2",
                         "--to", f"file://{tmp_path}/whole",
                         "--store-root", f"file://{tmp_path}"])
    assert code == EXIT_OK, report
    assert _read(tmp_path, "whole") == model


def test_dry_run_main_prints_the_plan_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _source(tmp_path)
    before = _tree(tmp_path)
    code = job.main(["split", "--db", f"file://{tmp_path}/src", "--into", "2", "--at", "k030",
                     "--to", f"file://{tmp_path}/s-{{i}}", "--store-root", f"file://{tmp_path}",
                     "--dry-run", "--report", str(tmp_path.parent / "report.json")])
    assert code == EXIT_OK
    printed = json.loads(capsys.readouterr().out)
    assert printed["outcome"] == "dry_run" and printed["split_keys"] == ["k030"]
    assert [t["estimated_bytes"] > 0 for t in printed["targets"]] == [True, True]
    assert printed["objects_to_write"]
    assert _tree(tmp_path) == before
    assert json.loads((tmp_path.parent / "report.json").read_text()) == printed


@pytest.mark.parametrize("extra, message", [
    (["--into", "1", "--to", "{root}/s-{{i}}"], "at least 2 shards"),
    (["--into", "0", "--to", "{root}/s-{{i}}"], "at least 2 shards"),
    (["--into", "3", "--to", "{root}/s-{{i}}", "--at", "k2,k1"], "out of order"),
    (["--into", "3", "--to", "{root}/s-{{i}}", "--at", "k1,k1"], "twice"),
    (["--into", "2", "--to", "{root}/same"], "no {{i}} field"),
    (["--into", "2", "--to", "file:///elsewhere/s-{{i}}"], "not under --store-root"),
    (["--into", "2", "--to", "{root}/src/s-{{i}}"], "inside source"),
    (["--into", "2", "--to", "{root}/s-{{i}}", "--live-window", "1y"], "may have a live"),
])
def test_bad_arguments_are_reported_and_write_nothing(
        tmp_path: Path, extra: list[str], message: str) -> None:
    _source(tmp_path)
    before = _tree(tmp_path)
    root = f"file://{tmp_path}"
    argv = ["split", "--db", f"{root}/src", "--store-root", root,
            *[a.format(root=root) for a in extra]]
    report, code = _run(argv)
    assert code in (EXIT_USAGE, EXIT_DATA), report
    assert message.replace("{{", "{").replace("}}", "}") in report["error"]["message"]
    assert _tree(tmp_path) == before


def test_a_likely_live_source_is_a_data_error_named_writer_active(tmp_path: Path) -> None:
    _source(tmp_path)
    root = f"file://{tmp_path}"
    report, code = _run(["split", "--db", f"{root}/src", "--store-root", root, "--into", "2",
                         "--to", f"{root}/s-{{i}}", "--live-window", "1y"])
    assert code == EXIT_DATA
    assert report["status"] == "data_error" and report["error"]["type"] == "WriterActiveError"


def test_fence_and_allow_flags_exclude_each_other() -> None:
    with pytest.raises(SystemExit) as exc:
        job.build_parser().parse_args(["split", "--db", "file:///a", "--into", "2", "--to",
                                       "file:///b-{i}", "--fence-source",
                                       "--allow-live-source"])
    assert exc.value.code == 2


def test_databases_in_different_stores_are_refused(tmp_path: Path) -> None:
    report, code = _run(["merge", "--source", "s3://one/a", "--source", "s3://two/b",
                         "--to", "s3://one/c"])
    assert code == EXIT_USAGE and "source's store" in report["error"]["message"]
