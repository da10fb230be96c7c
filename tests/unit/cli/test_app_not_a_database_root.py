"""Every ``slate`` command that takes a database answers a path that is a file (or lies
below one, or a store root that is a file) and a directory without a manifest alike:
exit code 5, "not a database root" naming the path, and nothing written."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from slatelib.cli.app import EXIT_DATA, build_parser, main
from slatelib.objstore import open_store
from slatelib.ops.bulk_load import bulk_load

CHECKPOINT = "00000000-0000-0000-0000-000000000001"

# Every command, and the arguments that make it reach the database.
COMMANDS: dict[str, list[list[str]]] = {
    "manifest": [[], ["--id", "1"]],
    "summary": [[]],
    "list-manifests": [[], ["--limit", "2"]],
    "scan": [[]],
    "get": [["00"]],
    "sst": [["1"], ["01ARZ3NDEKTSV4RRFFQ69G5FAV"], ["manifest/00000000000000000001.manifest"]],
    "ls": [[]],
    "load": [["ROWS"]],
    "create-checkpoint": [[]],
    "refresh-checkpoint": [["--id", CHECKPOINT]],
    "delete-checkpoint": [["--id", CHECKPOINT]],
    "list-checkpoints": [[]],
    "clone": [["--parent", "parent"]],
    "destroy": [[], ["--hard"]],
    "gc": [[], ["--no-dry-run"]],
    "compact": [[], ["--dry-run"]],
    "health": [[]],
}
REPORTS = {"health"}  # its JSON report names the unreadable database on stdout too
NO_DATABASE = {"config",  # `config show` describes the store of --db without reading it
               "cas"}  # `cas` reads the records of the cas store, not the database
CREATES = {"load", "clone"}  # an empty or missing directory is where they create one

CASES = [(name, argv) for name, variants in COMMANDS.items() for argv in variants]


def no_output(case: tuple[str, list[str]], out: str) -> str:
    """What a case's stdout must equal: nothing, or for a command in REPORTS its report's
    output (checked here to be a data_error report of one unreadable database)."""
    if case[0] not in REPORTS:
        return ""
    report = json.loads(out)
    assert report["status"] == "data_error" and report["totals"]["errors"] == 1, report
    return out


def _ids(case: tuple[str, list[str]]) -> str:
    return " ".join([case[0], *case[1]])


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "afile").write_bytes(b"not a database")
    (tmp_path / "empty").mkdir()
    (tmp_path / "rows.jsonl").write_text('{"key": "01", "value": "aa"}\n')
    bulk_load("parent", open_store(f"file://{tmp_path}"), [(b"k", b"v")])
    return tmp_path


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"/"
            for p in sorted(root.rglob("*"))}


def run(tmp: Path, location: list[str], case: tuple[str, list[str]],
        capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    name, argv = case
    argv = [str(tmp / "rows.jsonl") if a == "ROWS" else a for a in argv]
    before = tree(tmp)
    code = main([*location, name, *argv])
    out = capsys.readouterr()
    assert tree(tmp) == before, "nothing may be written on the way"
    return code, out.out, out.err


def test_every_command_is_covered() -> None:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(COMMANDS) | NO_DATABASE


@pytest.mark.parametrize("case", CASES, ids=_ids)
@pytest.mark.parametrize("spelling", ["--db", "--store/--path"])
def test_a_database_path_that_is_a_file(
    tmp: Path, case: tuple[str, list[str]], spelling: str, capsys: pytest.CaptureFixture[str]
) -> None:
    location = ([f"--db=file://{tmp}/afile"] if spelling == "--db"
                else ["--store", f"file://{tmp}", "--path", "afile"])
    code, out, err = run(tmp, location, case, capsys)
    assert (code, out) == (EXIT_DATA, no_output(case, out))
    # the path as the URL the user typed, not its path in the store (a report's entry
    # names the database's URL first, then its own error)
    afile = f"'{tmp}/afile'".replace("'/", "'") if spelling == "--db" else "'afile'"
    typed = f"file://{tmp}/afile"
    assert (f"{typed}: {afile} is a file" in err if case[0] in REPORTS else
            f"{typed} is a file, not a database root" in err), err
    assert "Generic" not in err and "os error" not in err


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_a_database_path_below_a_file(
    tmp: Path, case: tuple[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(tmp, ["--store", f"file://{tmp}", "--path", "afile/db"], case, capsys)
    assert (code, out) == (EXIT_DATA, no_output(case, out))
    assert ("'afile/db' is not a database root" in err if case[0] in REPORTS else
            f"file://{tmp}/afile/db is not a database root" in err), err
    assert "'afile' is a file, not a directory" in err


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_a_store_root_that_is_a_file(
    tmp: Path, case: tuple[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(tmp, ["--store", f"file://{tmp}/afile", "--path", "db"], case, capsys)
    assert (code, out) == (EXIT_DATA, no_output(case, out))
    if case[0] in REPORTS:  # each database's entry names its store's failure
        assert f"the store root '{tmp}/afile' is a file, not a directory" in err
    else:
        assert (f"file://{tmp}/afile/db is not a database root: '{tmp}/afile' is a file, "
                "not a directory") in err


@pytest.mark.parametrize("case", [c for c in CASES if c[0] not in CREATES], ids=_ids)
@pytest.mark.parametrize("path", ["empty", "missing"])
def test_a_directory_without_manifest(
    tmp: Path, case: tuple[str, list[str]], path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(tmp, ["--store", f"file://{tmp}", "--path", path], case, capsys)
    assert (code, out) == (EXIT_DATA, no_output(case, out))
    if case == ("destroy", ["--hard"]):  # slatelib/ops/destroy.py words it itself
        assert f"no database at file://{tmp}/{path}" in err
    elif case[0] in REPORTS:
        assert f"no manifest under '{path}': not a database root" in err
    else:
        assert f"no manifest under file://{tmp}/{path}: not a database root" in err


def test_the_installed_command_exits_5_for_a_file(tmp: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "slatelib.cli.app", "--db", f"file://{tmp}/afile", "gc",
         "--no-dry-run"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == EXIT_DATA, proc.stderr
    assert proc.stderr.strip().endswith("is a file, not a database root")
