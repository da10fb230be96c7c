"""``slate --wal-store``: before or after the command, from the settings and the
environment, and what ``config show``, ``sst``, ``ls`` and ``destroy`` do with it."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from slatelib import Db
from slatelib.cli.app import main as slate
from slatelib.objstore import open_store
from tests.unit.writer.support import writer_settings


@pytest.fixture
def urls() -> tuple[str, str]:
    """A database whose WAL (with a WAL-only tail) is in a second memory store."""
    main, wal = f"memory://m{uuid.uuid4().hex[:12]}/", f"memory://w{uuid.uuid4().hex[:12]}/"
    db = Db.open("db", main, writer_settings(), wal_store=wal)
    db.put(b"a", b"1")
    db.flush()
    db.put(b"b", b"2")
    db.close(flush="wal")
    return main, wal


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    code = slate(["--format", "json", *argv])
    out = capsys.readouterr()
    return code, [json.loads(x) for x in out.out.splitlines() if x.strip()], out.err


def test_the_option_goes_before_or_after_the_command(
        urls: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    main, wal = urls
    for argv in (["--wal-store", wal, "scan"], ["scan", "--wal-store", wal]):
        code, rows, _ = run(capsys, "--store", main, "--path", "db", *argv)
        assert code == 0 and [r["key"] for r in rows] == [b"a".hex(), b"b".hex()]
    code, _, err = run(capsys, "--store", main, "--path", "db", "scan")
    assert code == 5 and "--wal-store" in err
    with pytest.raises(SystemExit) as info:  # two different WAL stores: refused as parsed
        slate(["--store", main, "--path", "db", "--wal-store", wal, "scan", "--wal-store", main])
    assert info.value.code == 2 and "--wal-store given before and after" in capsys.readouterr().err


def test_the_settings_and_the_environment_name_it_and_config_show_says_where(
        urls: tuple[str, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    main, wal = urls
    conf = tmp_path / "wal.toml"
    conf.write_text(f'[object_store]\nwal_store = "{wal}"\n')
    code, rows, _ = run(capsys, "--conf", str(conf), "--store", main, "--path", "db", "scan")
    assert code == 0 and len(rows) == 2
    code, (shown,), _ = run(capsys, "--conf", str(conf), "config", "show")
    assert shown["object_store"]["wal_store"] == {"value": wal, "from": str(conf)}
    monkeypatch.setenv("SLATELIB_WAL_STORE", "")  # the environment wins: none
    code, _, err = run(capsys, "--conf", str(conf), "--store", main, "--path", "db", "scan")
    assert code == 5 and "--wal-store" in err
    code, rows, _ = run(capsys, "--conf", str(conf), "--store", main, "--path", "db",
                        "--wal-store", wal, "scan")  # the option wins over both
    assert code == 0 and len(rows) == 2
    code, (shown,), _ = run(capsys, "--wal-store", wal, "config", "show")
    assert shown["object_store"]["wal_store"] == {"value": wal, "from": "--wal-store"}


def test_sst_ls_and_destroy_use_the_wal_store(
        urls: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    main, wal = urls
    base = ["--store", main, "--path", "db", "--wal-store", wal]
    code, rows, _ = run(capsys, *base, "ls")
    assert code == 0 and rows[-1]["wal_store"] == wal.rstrip("/")
    wal_ids = [int(r["path"].rsplit("/", 1)[1].split(".")[0]) for r in rows[:-1]
               if r.get("kind") == "wal"]
    code, (sst,), _ = run(capsys, *base, "sst", str(max(wal_ids)))
    assert code == 0 and [r["key"] for r in sst["rows"]] == [b"b".hex()]
    code, _, _ = run(capsys, *base, "destroy", "--hard")
    assert code == 0
    assert not list(open_store(main).list("db")) and not list(open_store(wal).list("db"))
