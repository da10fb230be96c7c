"""``slate`` consistency: ``--version``, global options after the subcommand, checkpoint ids
by unique prefix, and URLs where a path is taken."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

import slatelib
from slatelib.cli.app import EXIT_OK, EXIT_USAGE, main, package_version, version_text
from slatelib.objstore import open_store
from slatelib.ops.bulk_load import bulk_load
from slatelib.ops.checkpoint import create_checkpoint, list_checkpoints


def slate(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def db(tmp_path: Path) -> str:
    bulk_load("db", open_store(f"file://{tmp_path}"), [(b"\x01", b"a"), (b"\x02", b"b")])
    return f"file://{tmp_path}/db"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = slate(["--version"], capsys)
    assert code == EXIT_OK and out == version_text() + "\n"
    assert out.startswith(f"slate {slatelib.__version__} (SlateDB 0.17 format: ")


def test_the_version_comes_from_one_place() -> None:
    # setuptools reads slatelib.__version__ into the metadata (pyproject: dynamic version)
    assert package_version() == slatelib.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]\d+|rc\d+)?", slatelib.__version__)


def test_version_names_the_format_versions_written_and_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert "writes manifest v2, SST v2, compactions v2; reads manifest v1-v2, SST v1-v2)" in (
        version_text())
    # the text follows the constants, not a copy of them
    monkeypatch.setattr("slatelib.format.sst.SST_FORMAT_VERSION", 3)
    monkeypatch.setattr("slatelib.format.manifest_codec.SUPPORTED_MANIFEST_VERSIONS", (2,))
    assert "SST v3," in version_text() and "reads manifest v2," in version_text()


@pytest.mark.parametrize("argv", [
    ["--db", "DB", "summary"], ["summary", "--db", "DB"],
    ["--db", "DB", "summary", "--db", "DB"], ["-v", "summary", "-v", "--db", "DB"],
])
def test_global_options_before_or_after_the_command(
    db: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = slate([db if a == "DB" else a for a in argv], capsys)
    assert code == EXIT_OK and json.loads(out)["manifest_id"] >= 1


def test_store_and_path_after_the_command(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = slate(["scan", "--store", f"file://{tmp_path}", "--path", "db"], capsys)
    assert code == EXIT_OK and len(out.splitlines()) == 2
    code, out, _ = slate(["scan", "--path", db], capsys)  # --path URL works as --db
    assert code == EXIT_OK and len(out.splitlines()) == 2


def test_conf_adds_up_from_both_places(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text("[gc]\nmin_age = 600\n")
    b.write_text("[gc]\ndb_concurrency = 9\n")
    code, out, _ = slate(["--conf", str(a), "config", "show", "--format", "json",
                          "--conf", str(b)], capsys)
    got = json.loads(out)
    assert code == EXIT_OK and got["conf_files"] == [str(a), str(b)]
    assert (got["settings"]["gc"]["min_age"], got["settings"]["gc"]["db_concurrency"]) == (600, 9)


def test_conflicting_global_option_is_refused(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = slate(["--db", db, "summary", "--db", db + "x"], capsys)
    assert code == EXIT_USAGE and "--db given before and after summary" in err


def _checkpoints(db: str, ids: list[str]) -> None:
    """Create checkpoints of ``db`` with the given ids (chosen ids make prefixes clash)."""
    store = open_store(db.rpartition("/")[0])
    for i in ids:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(uuid, "uuid4", lambda i=i: uuid.UUID(i))
            create_checkpoint("db", store)


A = "abcd1234-0000-4000-8000-000000000001"
B = "abcd5678-0000-4000-8000-000000000002"


def test_delete_checkpoint_by_unique_prefix(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    _checkpoints(db, [A, B])
    code, out, _ = slate(["--db", db, "delete-checkpoint", "--id", "abcd1234"], capsys)
    assert code == EXIT_OK and json.loads(out) == {"id": A, "deleted": True}
    root = db.rpartition("/")[0]
    assert [str(c.id) for c in list_checkpoints("db", open_store(root))] == [B]


@pytest.mark.parametrize("prefix, message", [
    ("abcd", f"'abcd' is ambiguous .* 2 checkpoint ids \\({A}, {B}\\)"),
    ("ffff", f"'ffff' matches no checkpoint of file://.*/db \\(checkpoints: {A}, {B}\\)"),
    ("xyz", "not a UUID or a prefix"),
])
def test_ambiguous_or_unknown_prefix_lists_candidates(
    db: str, prefix: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import re

    _checkpoints(db, [A, B])
    code, _, err = slate(["delete-checkpoint", "--db", db, "--id", prefix], capsys)
    assert code == EXIT_USAGE and re.search(message, err), err


def test_refresh_and_copy_and_read_at_a_prefix(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    _checkpoints(db, [A])
    code, out, _ = slate(["--db", db, "refresh-checkpoint", "--id", "abcd12", "-l", "1h"], capsys)
    assert code == EXIT_OK and json.loads(out)["id"] == A
    code, out, _ = slate(["--db", db, "create-checkpoint", "--source", "abcd"], capsys)
    assert code == EXIT_OK
    code, out, _ = slate(["--db", db, "scan", "--checkpoint", "abcd1234"], capsys)
    assert code == EXIT_OK and len(out.splitlines()) == 2
    code, out, _ = slate(["--db", db, "get", "01", "--checkpoint", "abcd1234"], capsys)
    assert code == EXIT_OK and json.loads(out)["value"] == b"a".hex()


def test_clone_parent_and_source_as_urls(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _checkpoints(db, [A])
    code, out, _ = slate(["--db", f"file://{tmp_path}/c1", "clone", "--parent", db,
                          "--checkpoint", "abcd"], capsys)
    assert code == EXIT_OK, out
    got = json.loads(out)
    assert (got["parent_path"], got["source_checkpoint_id"]) == (str(tmp_path)[1:] + "/db", A)
    code, out, _ = slate(["--store", f"file://{tmp_path}", "--path", "c2", "clone",
                          "--source", f"{db}@abcd1234:..hex:02"], capsys)
    assert code == EXIT_OK, out
    assert json.loads(out)["sources"][0]["checkpoint"] == A


def test_clone_parent_in_another_store_is_refused(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = slate(["--db", f"file://{tmp_path}/c", "clone", "--parent",
                          "memory:///db"], capsys)
    assert code == EXIT_USAGE and "not inside the store 'file:///'" in err
    code, _, err = slate(["--store", f"file://{tmp_path}/sub", "--path", "c", "clone",
                          "--parent", db], capsys)
    assert code == EXIT_USAGE and "same store" in err
