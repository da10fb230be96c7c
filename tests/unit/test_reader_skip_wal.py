"""``DbReader(skip_wal_replay=True)`` and ``slate scan/get --skip-wal-replay``: L0 and the
sorted runs only, as 0.17's ``ReaderOptions.skip_wal_replay`` (the official reader's answer
is checked in tests/interop/test_db_shapes_interop.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slatelib import Db, DbReader
from slatelib.cli import main as slate
from slatelib.objstore import open_store
from tests.unit.writer.support import writer_settings


def write(root: Path) -> None:
    with Db.open("db", open_store(f"file://{root}"), writer_settings()) as db:
        db.put(b"flushed", b"1")
        db.flush()
        db.put(b"flushed", b"2")  # a newer version, only in the WAL
        db.put(b"wal", b"only")
        db.flush("wal")
        db.close(flush=None)


@pytest.mark.parametrize("mode", ["latest", "managed"])
def test_skipping_the_wal_reads_l0_and_runs_only(tmp_path: Path, mode: str) -> None:
    write(tmp_path)
    url = f"file://{tmp_path}"
    with DbReader.open("db", url, mode=mode, skip_wal_replay=True, auto_refresh=False) as r:
        assert list(r.scan()) == [(b"flushed", b"1")]
        assert r.get(b"wal") is None
        r.refresh()
        assert r.get(b"flushed") == b"1"
    with DbReader.open("db", url, mode=mode, auto_refresh=False) as r:
        assert list(r.scan()) == [(b"flushed", b"2"), (b"wal", b"only")]


def test_the_cli_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path)
    db = f"file://{tmp_path}/db"
    assert slate(["--db", db, "scan", "--skip-wal-replay"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [bytes.fromhex(r["key"]) for r in rows] == [b"flushed"]
    assert slate(["--db", db, "get", "--key", "wal", "--skip-wal-replay"]) == 0
    assert json.loads(capsys.readouterr().out) == {"key": b"wal".hex(), "value": None}
    assert slate(["--db", db, "get", "--key", "wal"]) == 0
    assert json.loads(capsys.readouterr().out) == {"key": b"wal".hex(), "value": b"only".hex()}
