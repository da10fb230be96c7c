"""``slate cas status|recover|collect`` on a local store with two-phase CAS (SQLite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slatelib.cli.app import main
from slatelib.objstore import open_store
from slatelib.objstore.two_phase import TwoPhaseObjectStore, is_temporary
from slatelib.testing.faulty import SimulatedCrash

P = "db/manifest/00000000000000000001.manifest"


def last_json(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    out = capsys.readouterr().out.strip().splitlines()
    return dict(json.loads(out[-1]))


def test_status_recover_and_collect(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cas = f"sqlite://{tmp_path}/cas.db"
    monkeypatch.setenv("SLATELIB_CAS_URL", cas)
    url = f"file://{tmp_path}/root"
    store = open_store(url, conditional_writes=False)
    assert isinstance(store, TwoPhaseObjectStore)
    store.put_if_absent("db/wal/00000000000000000001.sst", b"w")

    def crash(phase: str, path: str) -> None:
        if phase == "recorded":
            raise SimulatedCrash(path)

    store.on_phase = crash
    with pytest.raises(SimulatedCrash):
        store.put_if_absent(P, b"m")
    db = ["--db", f"{url}/db", "--format", "json", "cas"]
    assert main([*db, "status"]) == 0
    status = last_json(capsys)
    assert status["committed"] == 1 and len(status["incomplete"]) == 1  # type: ignore[arg-type]
    assert main([*db, "recover"]) == 0
    assert last_json(capsys)["incomplete_left"] == 0
    assert (tmp_path / "root" / P).read_bytes() == b"m"
    # A temporary object nobody names (a crash right after step 1), and a record whose
    # object was deleted behind two-phase CAS's back.
    (tmp_path / "root" / "db" / "wal" / f"00000000000000000002.sst.{'a' * 32}.0000beef"
     ).write_bytes(b"x")
    (tmp_path / "root" / "db" / "wal" / "00000000000000000001.sst").unlink()
    assert main([*db, "collect", "--min-age", "0s"]) == 0
    report = last_json(capsys)
    assert (report["records_deleted"], report["temps_deleted"]) == (1, 1)
    assert not any(is_temporary(p.name) for p in (tmp_path / "root").rglob("*"))


def test_a_store_without_cas_is_refused(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", f"file://{tmp_path}/db", "cas", "status"]) == 2
    assert "no cas store configured" in capsys.readouterr().err
