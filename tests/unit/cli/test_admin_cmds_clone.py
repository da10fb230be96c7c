"""``slate clone`` with ``--source PATH[@CHECKPOINT][:START..END]``: the spec, unions,
``--dry-run``, and usage errors (exit 2, nothing written)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from slatelib import Db, DbReader
from slatelib.cli import main as slate
from slatelib.cli.admin_cmds import parse_key, parse_source_spec
from slatelib.cli.app import EXIT_OK, EXIT_USAGE
from slatelib.core.clone_plan import CloneSource
from slatelib.core.ranges import BytesRange
from slatelib.errors import InvalidArgumentError
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from tests.unit.store_snapshot import snapshot
from tests.unit.writer.support import writer_settings

CP = "01740ee5-6459-44af-9a45-85deb6e468e3"
half = BytesRange.half_open


@pytest.mark.parametrize("spec, expected", [
    ("db", CloneSource("db")),
    ("t/db@" + CP, CloneSource("t/db", uuid.UUID(CP))),
    ("db:a..m", CloneSource("db", None, half(b"a", b"m"))),
    ("db:..m", CloneSource("db", None, half(None, b"m"))),
    ("db:m..", CloneSource("db", None, half(b"m", None))),
    ("db:..", CloneSource("db", None, half(None, None))),
    (f"db@{CP}:hex:00ff..hex:0100", CloneSource("db", uuid.UUID(CP), half(b"\x00\xff", b"\x01\x00"))),
    ("db:user 1..user 2", CloneSource("db", None, half(b"user 1", b"user 2"))),
    ("db:caf\u00e9..", CloneSource("db", None, half("caf\u00e9".encode(), None))),
    ("a@b@", CloneSource("a@b")),
])
def test_source_specs(spec: str, expected: CloneSource) -> None:
    assert parse_source_spec(spec) == expected


@pytest.mark.parametrize("spec, why", [
    ("db:a", "exactly one '..'"),
    ("db:a...b", "exactly one '..'"),
    ("db:hex:zz..", "not hex digits"),
    ("db:hex:..b", "is empty"),
    ("db@not-a-uuid", "UUID"),
    ("@" + CP, "no path"),
])
def test_bad_source_specs(spec: str, why: str) -> None:
    with pytest.raises(InvalidArgumentError, match=why):
        parse_source_spec(spec)


def test_keys_are_text_or_hex() -> None:
    assert parse_key("abc") == b"abc" and parse_key("hex:6162") == b"ab"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for path, keys in (("a", [b"a1", b"a2", b"a3"]), ("b", [b"b1", b"b2"])):
        with Db.open(path, f"file://{tmp_path}", writer_settings()) as db:
            for k in keys:
                db.put(k, b"v")
            db.flush()
    return tmp_path


def run(root: Path, capsys: pytest.CaptureFixture[str], *args: str, path: str = "u") -> tuple[int, Any]:
    try:
        code = slate(["--store", f"file://{root}", "--path", path, *args])
    except SystemExit as exc:  # argparse refusals
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else err)


def test_a_union_through_the_cli(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run(root, capsys, "clone", "--source", "a:a2..", "--source", "b:..b2")
    assert code == EXIT_OK and report["created"] is True
    assert [s["path"] for s in report["sources"]] == ["a", "b"]
    assert report["sources"][0]["projection"]["start"] == {"type": "included", "key": b"a2".hex()}
    with DbReader.open("u", f"file://{root}", mode="latest") as r:
        assert [k for k, _ in r.scan()] == [b"a2", b"a3", b"b1"]
    code, again = run(root, capsys, "clone", "--source", "a:a2..", "--source", "b:..b2")
    assert code == EXIT_OK and again["created"] is False


def test_dry_run_prints_the_manifest_and_writes_nothing(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(f"file://{root}")
    before = snapshot(store)
    code, planned = run(root, capsys, "clone", "--source", "a:hex:6132..", "--source", "b",
                        "--dry-run")
    assert code == EXIT_OK and snapshot(store) == before
    assert planned["id"] == 1 and planned["initialized"] is False
    assert [e["path"] for e in planned["external_dbs"]] == ["a", "b"]
    assert {e["source_checkpoint_id"] for e in planned["external_dbs"]} == {str(uuid.UUID(int=0))}
    code, parent = run(root, capsys, "clone", "--parent", "a", "--dry-run", path="full")
    assert code == EXIT_OK and parent["external_dbs"][0]["path"] == "a"
    assert snapshot(store) == before
    assert run(root, capsys, "clone", "--source", "a:hex:6132..", "--source", "b")[0] == EXIT_OK
    first = ManifestStore(store, "u").read(1).value
    assert first.l0 and len(planned["l0"]) == len(first.l0)


@pytest.mark.parametrize("args, why", [
    (["--parent", "a", "--source", "b"], "not allowed with"),
    (["--source", "a", "--checkpoint", CP], "goes with --parent"),
    ([], "--parent PATH or one or more --source"),
    (["--source", "a:x"], "exactly one '..'"),
    (["--source", "a", "--source", "a/"], "given twice"),
])
def test_usage_errors_exit_2_and_write_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], args: list[str], why: str
) -> None:
    store = open_store(f"file://{root}")
    before = snapshot(store)
    code, err = run(root, capsys, "clone", *args)
    assert code == EXIT_USAGE and why in err
    assert snapshot(store) == before
