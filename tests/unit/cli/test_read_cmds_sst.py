"""``slate sst``: SSTs by ULID, WAL id or path, and what it says about broken objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slatelib.cli.app import EXIT_DATA, main


def _sst(root: Path, db: str, obj: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--store", f"file://{root}", "--path", db, "sst", obj, "--limit", "2"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_zero_byte_wal_object_is_shown_as_a_fence(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _sst(fixtures_dir, "basic", "1", capsys)
    assert code == 0
    assert json.loads(out) == {"path": "basic/wal/00000000000000000001.sst", "size": 0, "fence": True}


def test_zero_byte_compacted_sst_is_a_data_error_not_a_fence(
    fixture_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sst = sorted((fixture_copy / "basic" / "compacted").iterdir())[0]
    sst.write_bytes(b"")
    code, out, err = _sst(fixture_copy, "basic", sst.stem, capsys)
    assert code == EXIT_DATA and out == ""
    assert f"basic/compacted/{sst.name}" in err and "empty" in err


def test_external_sst_of_a_clone_is_found_under_its_source_by_ulid(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from slatelib.objstore import open_store
    from slatelib.store.manifest_store import ManifestStore

    m = ManifestStore(open_store(f"file://{fixtures_dir}"), "ckpt_clone").read_latest().value
    ext = m.external_dbs[0]
    from slatelib.ids import ulid_to_str

    name = ulid_to_str(ext.sst_ids[0])
    code, out, _ = _sst(fixtures_dir, "ckpt_clone", name, capsys)
    got = json.loads(out)
    assert code == 0
    assert got["path"] == f"{ext.path}/compacted/{name}.sst"
    assert got["manifest_info_matches_footer"] is True
    assert got["num_rows"] > 0 and len(got["rows"]) == 2


def test_list_manifests_lists_versions_latest_and_checkpoint_pins(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``list-manifests``: one entry per version, the latest marked, and which checkpoints
    pin which version; ``--limit`` keeps the newest."""
    from slatelib.cli.app import main as slate_main
    from slatelib.core.manifest import Manifest
    from slatelib.objstore import open_store
    from slatelib.store.manifest_store import ManifestStore

    store = open_store(f"file://{tmp_path}")
    ms = ManifestStore(store, "db")
    ms.write(1, Manifest.initial())
    ms.write(2, Manifest.initial())
    db = f"file://{tmp_path}/db"
    assert slate_main(["--db", db, "create-checkpoint"]) == 0
    capsys.readouterr()
    assert slate_main(["--db", db, "--format", "json", "list-manifests"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [1, 2, 3]
    assert [r["latest"] for r in rows] == [False, False, True]
    # 0.17 pins the version that adds the checkpoint
    assert [bool(r["pinned_by"]) for r in rows] == [False, False, True]
    assert all(r["bytes"] > 0 and r["last_modified"].endswith("Z") for r in rows)
    assert slate_main(["--db", db, "list-manifests", "--limit", "1", "--format", "json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [3]
    assert slate_main(["--db", db, "--format", "table", "list-manifests"]) == 0
    assert "3 manifest version(s)" in capsys.readouterr().out
