"""``slate ls``: every object of a database with what keeps it, by 0.17's rules.

Read-only on the golden fixtures (``ls`` writes nothing), so ``fixtures_dir`` is used
directly; the fault cases work on ``fixture_copy``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slatelib.cli.app import main
from slatelib.objstore import open_store
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore


def _ls(root: Path, db: str, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    assert main(["--store", f"file://{root}", "--path", db, "ls"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert "totals" in rows[-1]
    return {r["path"]: r for r in rows[:-1]}


def _wal(db: str, wal_id: int) -> str:
    return f"{db}/wal/{wal_id:020d}.sst"


def test_ls_names_checkpoints_that_pin_wal_ssts_and_the_latest_replay_boundary(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(f"file://{fixtures_dir}")
    ms = ManifestStore(store, "ckpt_src")
    latest = ms.read_latest()
    rows = _ls(fixtures_dir, "ckpt_src", capsys)
    pinned_wal: set[int] = set()
    for cp in latest.value.checkpoints:
        m = ms.read(cp.manifest_id).value
        for wid in range(m.replay_after_wal_id + 1, m.wal_id_last_seen + 1):
            row = rows.get(_wal("ckpt_src", wid))
            if row is None or row["size"] == 0:
                continue
            pinned_wal.add(wid)
            assert any(str(cp.id)[:8] in r for r in row["referenced_by"]), (wid, row)
    assert pinned_wal, "the fixture must have WAL SSTs that only a checkpoint replays"
    boundary = rows[_wal("ckpt_src", latest.value.replay_after_wal_id)]
    assert any("latest" in r for r in boundary["referenced_by"]), boundary
    for path, row in rows.items():
        if "/wal/" in path and row["size"] and row["referenced_by"] == ["unreferenced"]:
            wid = int(path.rsplit("/", 1)[1][:20])
            assert wid < latest.value.replay_after_wal_id and wid not in pinned_wal, row


def test_ls_marks_the_latest_compactions_file_only(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    latest_id = CompactionsStore(open_store(f"file://{fixtures_dir}"), "basic").read_latest().id
    rows = _ls(fixtures_dir, "basic", capsys)
    comps = {p: r for p, r in rows.items() if "/compactions/" in p}
    assert len(comps) > 1
    for path, row in comps.items():
        is_latest = path.endswith(f"{latest_id:020d}.compactions")
        assert (row["referenced_by"] != ["unreferenced"]) == is_latest, row


def test_ls_gives_size_of_external_ssts_of_a_clone(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _ls(fixtures_dir, "ckpt_clone", capsys)
    external = [r for r in rows.values() if r.get("external")]
    assert external
    for row in external:
        assert row["path"].startswith("ckpt_src/compacted/")
        assert row["size"] == (fixtures_dir / row["path"]).stat().st_size
        assert row["referenced_by"] != ["unreferenced"]


def test_ls_reports_referenced_ssts_that_are_missing(
    fixture_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ms = ManifestStore(open_store(f"file://{fixture_copy}"), "ckpt_clone")
    m = ms.read_latest().value
    external = {sid for ext in m.external_dbs for sid in ext.sst_ids}
    own = sorted(m.referenced_sst_ids() - external)
    ext = sorted(external)
    assert own and ext
    gone = [ms.paths.compacted(own[0]), f"ckpt_src/compacted/{_ulid(ext[0])}.sst"]
    for p in gone:
        (fixture_copy / p).unlink()
    rows = _ls(fixture_copy, "ckpt_clone", capsys)
    for p in gone:
        assert rows[p]["missing"] is True and rows[p]["size"] is None, rows[p]
        assert rows[p]["referenced_by"] != ["unreferenced"]


def _ulid(sid: int) -> str:
    from slatelib.ids import ulid_to_str

    return ulid_to_str(sid)
