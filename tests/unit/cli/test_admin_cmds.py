"""The admin CLI: create/refresh/delete/list-checkpoints, clone, destroy; JSON out, exit codes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from slatelib import Db, DbReader
from slatelib.cli import main as slate
from slatelib.cli.app import EXIT_DATA, EXIT_OK, EXIT_USAGE
from tests.unit.writer.support import writer_settings


@pytest.fixture
def root(tmp_path: Path) -> Path:
    with Db.open("db", f"file://{tmp_path}", writer_settings()) as db:
        db.put(b"k", b"v")
    return tmp_path


def run(root: Path, capsys: pytest.CaptureFixture[str], *args: str, path: str = "db") -> tuple[int, Any]:
    code = slate(["--store", f"file://{root}", "--path", path, *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else err)


def test_checkpoint_lifecycle_through_the_cli(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, cp = run(root, capsys, "create-checkpoint", "--lifetime", "7days 30min 10s", "--name", "nightly")
    assert code == EXIT_OK and cp["name"] == "nightly"
    assert abs(cp["expire_time_s"] - (time.time() + 7 * 86400 + 1810)) < 60
    code, listed = run(root, capsys, "list-checkpoints", "--name", "nightly")
    assert code == EXIT_OK and [c["id"] for c in listed] == [cp["id"]]
    assert run(root, capsys, "list-checkpoints", "-n", "other") == (EXIT_OK, [])
    code, refreshed = run(root, capsys, "refresh-checkpoint", "--id", cp["id"], "-l", "1h")
    assert code == EXIT_OK and refreshed["manifest_id"] == cp["manifest_id"]
    code, forever = run(root, capsys, "refresh-checkpoint", "-i", cp["id"])
    assert forever["expire_time_s"] is None
    assert run(root, capsys, "delete-checkpoint", "--id", cp["id"]) == (EXIT_OK, {"id": cp["id"], "deleted": True})
    assert run(root, capsys, "delete-checkpoint", "--id", cp["id"])[1]["deleted"] is False


@pytest.mark.parametrize("name", ["", "with space", "ünïcödé ✓", "x" * 300, "a/b:c"])
def test_odd_names_round_trip(root: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, cp = run(root, capsys, "create-checkpoint", "--name", name)
    assert code == EXIT_OK and cp["name"] == name
    _, listed = run(root, capsys, "list-checkpoints", "--name", name)
    assert cp["id"] in [c["id"] for c in listed]


@pytest.mark.parametrize("lifetime, seconds", [("0s", 0), ("1500ms", 1), ("1y", 31557600),
                                               ("2h 3m", 7380), ("45", 45)])
def test_odd_lifetimes(root: Path, capsys: pytest.CaptureFixture[str], lifetime: str, seconds: int) -> None:
    before = int(time.time())
    code, cp = run(root, capsys, "create-checkpoint", "--lifetime", lifetime)
    assert code == EXIT_OK
    assert before + seconds <= cp["expire_time_s"] <= int(time.time()) + seconds + 1


@pytest.mark.parametrize("args", [
    ("create-checkpoint", "--lifetime", "5 parsecs"),
    ("create-checkpoint", "--lifetime=-3s"),
    ("create-checkpoint", "--lifetime", "500years"),
    ("create-checkpoint", "--source", "nope"),
    ("refresh-checkpoint", "--id", "123"),
])
def test_bad_input_exits_2_with_a_message(root: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    code, err = run(root, capsys, *args)
    assert code == EXIT_USAGE and "error" in err


@pytest.mark.parametrize("args, message", [
    (("create-checkpoint", "--lifetime=-1s"), "checkpoint lifetime: must not be negative: '-1s'"),
    (("create-checkpoint", "--lifetime", "-1s"), "checkpoint lifetime: must not be negative: '-1s'"),
    (("refresh-checkpoint", "-i", "01740ee5-6459-44af-9a45-85deb6e468e3", "-l", "-2h"),
     "checkpoint lifetime: must not be negative: '-2h'"),
    (("create-checkpoint", "--lifetime", "abc"), "checkpoint lifetime: cannot parse duration 'abc'"),
    (("create-checkpoint", "--lifetime", "136years"), "checkpoint lifetime 136years puts the expiry"),
    (("refresh-checkpoint", "--id", "01740ee5-6459-44af-9a45-85deb6e468e3", "-l", "99999999999999s"),
     "checkpoint lifetime 99999999999999s puts the expiry"),
    (("create-checkpoint", "--name", "bad\udcff"), "checkpoint name 'bad\\udcff' is not valid UTF-8"),
])
def test_bad_input_names_what_is_wrong(root: Path, capsys: pytest.CaptureFixture[str],
                                       args: tuple[str, ...], message: str) -> None:
    code, err = run(root, capsys, *args)
    assert code == EXIT_USAGE and message in err, err


def test_missing_checkpoints_and_databases_exit_5(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(root, capsys, "refresh-checkpoint", "--id", "01740ee5-6459-44af-9a45-85deb6e468e3")
    assert code == EXIT_DATA and "not found" in err
    code, err = run(root, capsys, "create-checkpoint", "--source", "01740ee5-6459-44af-9a45-85deb6e468e3")
    assert code == EXIT_DATA
    assert run(root, capsys, "list-checkpoints", path="missing")[0] == EXIT_DATA


def test_clone_then_destroy_through_the_cli(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run(root, capsys, "clone", "--parent", "db", path="copy")
    assert code == EXIT_OK and report["created"] is True and report["parent_path"] == "db"
    with DbReader.open("copy", f"file://{root}", mode="latest") as r:
        assert r.get(b"k") == b"v"
    code, err = run(root, capsys, "destroy", "--hard")  # the clone's final checkpoint is live
    assert code == EXIT_DATA and "unexpired checkpoints" in err
    code, gone = run(root, capsys, "destroy", "--hard", path="copy")
    assert code == EXIT_OK and gone["released_parents"] == ["db"] and gone["deleted_objects"] > 0
    code, soft = run(root, capsys, "destroy")
    assert code == EXIT_OK and soft["soft"] is True and soft["destroyed_at_s"] > 0
    assert [p for p in (root / "copy").rglob("*") if p.is_file()] == []


def test_checkpoint_commands_end_with_a_headline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """create/refresh/delete-checkpoint say what they did on stderr; stdout stays JSON."""
    from slatelib.cli.app import main as slate_main
    from slatelib.core.manifest import Manifest
    from slatelib.objstore import open_store
    from slatelib.store.manifest_store import ManifestStore

    ManifestStore(open_store(f"file://{tmp_path}"), "db").write(1, Manifest.initial())
    db = f"file://{tmp_path}/db"
    assert slate_main(["--db", db, "--format", "json", "create-checkpoint"]) == 0
    out, err = capsys.readouterr()
    cid = json.loads(out)["id"]
    assert f"slate create-checkpoint: created checkpoint {cid} pinning manifest 2" in err
    assert slate_main(["--db", db, "--format", "json", "refresh-checkpoint", "--id", cid[:8],
                       "--lifetime", "1h"]) == 0
    assert f"checkpoint {cid} now expires 20" in capsys.readouterr().err
    assert slate_main(["--db", db, "--format", "json", "delete-checkpoint", "--id", cid]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["deleted"] is True and f"deleted checkpoint {cid}" in err
