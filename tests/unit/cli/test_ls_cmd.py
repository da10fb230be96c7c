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


@pytest.mark.parametrize("native", [True, False])
def test_ls_rows_equal_the_per_object_classification(
    fixture_copy: Path, native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Referenced SSTs of the database are recognised by their exact path (a dict lookup,
    names formatted natively or not); every row equals what classifying each listed object
    gives, also for look-alikes: a lower-case ULID, a nested file, an unreferenced SST."""
    from slatelib.cli.ls_cmd import list_objects
    from slatelib.cli.ls_view import reasons as _reasons
    from slatelib.core.gc_plan import build_rules, referenced_ssts
    from slatelib.core.gc_rules import GcOptions
    from slatelib.format import manifest_native, seam
    from slatelib.ops.gc.state import read_compactions_state

    if not native:
        monkeypatch.setattr(manifest_native, "ext", None)
        monkeypatch.setattr(seam, "_manifest_ext", None)  # names formatted in Python
    store = open_store(f"file://{fixture_copy}")
    ms = ManifestStore(store, "ckpt_clone")
    latest = ms.read_latest()
    own = sorted(latest.value.referenced_sst_ids() - {
        s for e in latest.value.external_dbs for s in e.sst_ids})
    assert own
    name = ms.paths.compacted(own[0])
    lower = name[:-4].lower() + ".sst"
    for extra in (lower, name[:-4] + "/nested.sst", ms.paths.compacted(own[0] + 1)):
        (fixture_copy / extra).parent.mkdir(parents=True, exist_ok=True)
        (fixture_copy / extra).write_bytes(b"x")
    from slatelib.cli.ls_view import live_set as _live_set

    live, _ = _live_set(ms, latest)
    state = read_compactions_state(store, "ckpt_clone")
    rules = build_rules("ckpt_clone", live, state, now_ms=0, options=GcOptions())
    refs = referenced_ssts(live)
    rows = {r["path"]: r for r in list_objects(store, "ckpt_clone", 0)}
    listed = list(store.list("ckpt_clone"))
    assert {lower, name} <= set(rows)
    for meta in listed:
        kind, reasons = _reasons(rules, state.version_id, refs, meta)
        row = rows[meta.path]
        assert (row["kind"], row["referenced_by"]) == (kind, reasons or ["unreferenced"]), row
    assert rows[name]["kind"] == "compacted" and rows[lower]["kind"] == "unknown"
    assert rows[ms.paths.compacted(own[0] + 1)]["referenced_by"] == ["unreferenced"]


def test_ls_json_lines_are_the_encoders_text_for_every_row_shape() -> None:
    import random

    from slatelib.cli.ls_cmd import json_line

    r = random.Random(21)
    alphabet = ['a', '/', '"', '\\', '\n', '\x00', 'é', '\u2028', '😀', ' ']

    def text() -> str:
        return "".join(r.choice(alphabet) for _ in range(r.randint(0, 8)))

    for _ in range(2000):
        row: dict[str, Any] = {
            "path": text(), "kind": r.choice(["compacted", "wal", text()]),
            "size": r.choice([0, 7, 2**40, None]),
            "last_modified_ms": r.choice([0, 1_750_000_000_123, None]),
            "last_modified": r.choice(["2026-11-25T03:14:25Z", None, text()]),
            "referenced_by": [text() for _ in range(r.randint(0, 3))]}
        if r.random() < 0.2:
            row["external"] = True
        if r.random() < 0.1:
            row = dict(reversed(list(row.items())))
        assert json_line(row) == json.JSONEncoder().encode(row)
        assert json.loads(json_line(row)) == row


@pytest.mark.parametrize("enabled", [True, False])
def test_ls_leaves_the_cyclic_collector_as_it_found_it(
    fixtures_dir: Path, enabled: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    import gc

    from slatelib.cli import ls_view

    seen: list[bool] = []
    real = ls_view.build_view

    def spy(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args)

    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("slatelib.cli.ls_cmd.build_view", spy)
            _ls(fixtures_dir, "basic", capsys)
        assert seen == [False] and gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
