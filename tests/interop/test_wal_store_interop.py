"""Databases whose WAL lives in a separate object store (official ``with_wal_object_store``).

Each database is written by official 0.17.0 with its WAL in a second local folder (or a
second S3 bucket): L0 flushes, deletes, and rows that are only in the WAL. Then:

- with ``--wal-store`` / ``wal_store=`` every read, the CLI and the writer see exactly what
  the official reader given the same WAL store sees;
- without it every command refuses (exit 5, ``WalStoreMissingError``) naming the WAL ids and
  ``--wal-store``, and writes nothing to either store (official 0.17 reads a partial
  database there, which the tests show too);
- GC collects the WAL store's ``wal/`` exactly as official ``run_gc_once`` given the same WAL
  store (a differential on twin copies), leaving the main store's ``wal/`` alone as 0.17
  does; a clone copies the WAL SSTs inside the WAL store as 0.17's clone does; a hard
  destroy empties both stores, as ``Admin.delete_db`` does.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from slatedb.uniffi import (
    GarbageCollectorDirectoryOptions,
    GarbageCollectorOptions,
    GarbageCollectorScheduleOptions,
)

from slatelib import Db, DbReader, WalStoreMissingError, create_clone, destroy
from slatelib.cli.app import main as slate
from slatelib.config import Settings
from slatelib.objstore import open_store
from slatelib.ops.compaction import run_compaction
from slatelib.ops.gc import collect_garbage, gc_options
from slatelib.store.manifest_store import ManifestStore
from tests.interop.official import (
    CloneSource,
    DbSettings,
    Delete,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    clone,
    read_all,
    run,
    s3_store,
)
from tests.s3_server import ACCESS_KEY, REGION, SECRET_KEY, create_bucket

pytestmark = pytest.mark.interop

DB = "tenants/db"
SETTINGS = DbSettings(extra={"garbage_collector_options": "null"})
"""No embedded GC: only the GCs under test collect."""


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def write_official(main: Any, wal: Any, model: Model, *, path: str = DB, rounds: int = 3,
                   tail: int = 40) -> None:
    """An official database with ``rounds`` L0 flushes (overwrites and deletes among them),
    then ``tail`` rows only in the WAL (a close with a WAL flush)."""
    with OfficialDb.open(main, path, SETTINGS, model=model, wal_store=wal) as db:
        for r in range(rounds):
            for i in range(60):
                db.write([Put(b"k%04d" % (i * 7 % 200), b"r%d-%d" % (r, i))])
                if i % 20 == 19:
                    db.flush_wal()
            db.write([Delete(b"k%04d" % (r * 3))])
            db.flush_memtable()
        for i in range(tail):
            db.write([Put(b"t%04d" % i, b"tail-%d" % i)])
            if i % 10 == 9:
                db.flush_wal()
        db.close("wal")


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Path, Path, Model]:
    main, wal = tmp_path / "main", tmp_path / "wal"
    main.mkdir()
    wal.mkdir()
    model = Model()
    write_official(main, wal, model)
    return main, wal, model


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = slate(["--format", "json", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def scan_lines(text: str) -> list[tuple[bytes, bytes]]:
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [(bytes.fromhex(r["key"]), bytes.fromhex(r["value"])) for r in rows]


def test_the_official_reader_needs_the_wal_store_too(stores: tuple[Path, Path, Model]) -> None:
    main, wal, model = stores
    assert read_all(main, DB, wal_store=wal) == model.items()
    partial = read_all(main, DB)  # what 0.17 answers without it: the WAL-only rows are gone
    assert len(partial) < len(model.items()) and not any(k.startswith(b"t") for k, _ in partial)


def test_every_command_refuses_without_the_wal_store_and_writes_nothing(
        stores: tuple[Path, Path, Model], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    main, wal, _ = stores
    m = ManifestStore(open_store(f"file://{main}"), DB).read_latest().value
    first, last = m.replay_after_wal_id + 1, m.wal_id_last_seen
    assert last >= first  # the close recorded the WAL tail
    before = tree(main), tree(wal)
    base = ["--store", f"file://{main}", "--path", DB]
    commands = [["scan"], ["get", "--key", "t0001"], ["ls"], ["compact", "--policy", "l0"],
                ["gc", "--no-dry-run", "--min-age", "0s", "--force"], ["gc"],
                ["clone", "--parent", DB], ["destroy"], ["destroy", "--hard"]]
    for command in commands:
        target = ["--path", "tenants/copy"] if command[0] == "clone" else ["--path", DB]
        code, out, err = cli(capsys, "--store", f"file://{main}", *target, *command)
        assert code == 5, (command, out, err)
        ids = f"WAL {first}..{last}" if last > first else f"WAL {first}"
        assert ids in err and "--wal-store" in err and "Nothing was written" in err, command
    code, _, err = cli(capsys, *base, "--wal-store", f"file://{tmp_path}/elsewhere", "scan")
    assert code == 5 and f"the WAL store file://{tmp_path}/elsewhere given is not" in err
    assert (tree(main), tree(wal)) == before
    with pytest.raises(WalStoreMissingError):
        DbReader.open(DB, f"file://{main}", mode="latest")
    with pytest.raises(WalStoreMissingError):
        run_compaction(DB, f"file://{main}", policy="l0")
    with pytest.raises(WalStoreMissingError):
        collect_garbage(DB, f"file://{main}", dry_run=False, min_age=0, force=True)
    assert (tree(main), tree(wal)) == before


def test_reads_with_the_wal_store_match_the_official_reader(
        stores: tuple[Path, Path, Model], capsys: pytest.CaptureFixture[str]) -> None:
    main, wal, model = stores
    official = read_all(main, DB, wal_store=wal)
    base = ["--store", f"file://{main}", "--path", DB, "--wal-store", f"file://{wal}"]
    code, out, _ = cli(capsys, *base, "scan")
    assert code == 0 and scan_lines(out) == official == model.items()
    code, out, _ = cli(capsys, *base, "get", "--key", "t0039")
    assert code == 0 and json.loads(out)["value"] == b"tail-39".hex()
    code, out, _ = cli(capsys, *base, "ls")
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[-1]["wal_store"] == f"file://{wal}"
    wal_rows = [x for x in lines[:-1] if x.get("kind") == "wal"]
    assert wal_rows and not [x for x in lines[:-1] if x.get("missing")]
    with DbReader.open(DB, f"file://{main}", wal_store=f"file://{wal}") as r:  # managed
        assert list(r.scan()) == official
    os.environ["SLATELIB_WAL_STORE"] = f"file://{wal}"  # the environment names it too
    try:
        code, out, _ = cli(capsys, "--store", f"file://{main}", "--path", DB, "scan")
    finally:
        del os.environ["SLATELIB_WAL_STORE"]
    assert code == 0 and scan_lines(out) == official


def test_the_writer_refuses_without_it_and_keeps_every_write_with_it(
        stores: tuple[Path, Path, Model]) -> None:
    main, wal, model = stores
    before = tree(main), tree(wal)
    with pytest.raises(WalStoreMissingError, match="--wal-store"):
        Db.open(DB, f"file://{main}")
    assert (tree(main), tree(wal)) == before  # replay_after_wal_id did not move
    with Db.open(DB, f"file://{main}", wal_store=f"file://{wal}") as db:
        assert db.get(b"t0039") == b"tail-39"  # replayed from the WAL store
        for i in range(30):
            db.put(b"s%04d" % i, b"slatelib-%d" % i)
            model.apply([Put(b"s%04d" % i, b"slatelib-%d" % i)])
        db.flush()
        db.put(b"last", b"wal only")
        model.apply([Put(b"last", b"wal only")])
        db.close(flush="wal")
    assert not (main / DB / "wal").exists()  # no WAL object went to the main store
    assert read_all(main, DB, wal_store=wal) == model.items()
    with OfficialDb.open(main, DB, SETTINGS, wal_store=wal) as official:  # and it writes on
        assert official.get(b"last") == b"wal only" and official.get(b"s0003") == b"slatelib-3"


def test_compaction_with_the_wal_store_keeps_what_the_official_reader_reads(
        stores: tuple[Path, Path, Model], capsys: pytest.CaptureFixture[str]) -> None:
    main, wal, model = stores
    code, out, err = cli(capsys, "--store", f"file://{main}", "--path", DB, "--wal-store",
                         f"file://{wal}", "compact", "--policy", "l0", "--takeover")
    assert code == 0, err
    assert json.loads(out)["databases"][0]["outcome"] == "committed"
    assert not OfficialAdmin(main, DB).l0_view_ids()
    assert read_all(main, DB, wal_store=wal) == model.items()


def official_gc(main: Any, wal: Any, path: str = DB) -> None:
    d = GarbageCollectorDirectoryOptions(interval_ms=None, min_age_ms=0, dry_run=False)
    admin = OfficialAdmin(main, path, wal_store=wal).admin
    run(admin.run_gc_once(GarbageCollectorOptions(
        manifest_options=d, wal_options=d, wal_fence_options=d, compacted_options=d,
        compactions_options=d, detach_options=GarbageCollectorScheduleOptions(interval_ms=None))))


def age(root: Path, seconds: float) -> None:
    when = time.time() - seconds
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (when, when))


def gc_state(tmp_path: Path) -> tuple[Path, Path, Model]:
    """A database with WAL garbage in its WAL store, a checkpoint pinning an older WAL range,
    a compaction's replaced SSTs (ours: an official one needs a live writer), and stray
    WAL-named objects in the main store's wal/."""
    main, wal = tmp_path / "main", tmp_path / "wal"
    main.mkdir(parents=True)
    wal.mkdir()
    model = Model()
    write_official(main, wal, model, rounds=2, tail=15)
    OfficialAdmin(main, DB, wal_store=wal).checkpoint("pin", lifetime_ms=3_600_000)
    write_official(main, wal, model, rounds=2, tail=5)
    run_compaction(DB, f"file://{main}", policy="l0", takeover=True, wal_store=f"file://{wal}")
    stray = main / DB / "wal"
    stray.mkdir(parents=True)
    shutil.copy(sorted((wal / DB / "wal").iterdir())[1], stray / "00000000000000000002.sst")
    (stray / "00000000000000000001.sst").write_bytes(b"")
    age(main, 7200)
    age(wal, 7200)
    return main, wal, model


def test_gc_collects_the_wal_store_as_official_gc_given_it(tmp_path: Path) -> None:
    main, wal, model = gc_state(tmp_path / "src")
    twins = {}
    for side in ("official", "ours"):
        shutil.copytree(tmp_path / "src", tmp_path / side)
        twins[side] = (tmp_path / side / "main", tmp_path / side / "wal")
    official_gc(*twins["official"])
    options = gc_options(Settings(), min_age=0, force=True, dry_run=False,
                         dry_runs={"wal_fence": False})  # as official_gc: fences too
    report = collect_garbage(DB, f"file://{twins['ours'][0]}", dry_run=False, options=options,
                             wal_store=f"file://{twins['ours'][1]}")
    assert report.wal_store == f"file://{twins['ours'][1]}" and report.error_count == 0
    assert report.kinds["wal"].deleted > 0 and report.kinds["wal_fence"].deleted > 0
    for i in (0, 1):
        assert tree(twins["ours"][i]) == tree(twins["official"][i]), ("main", "wal")[i]
    assert sorted(tree(twins["ours"][0] / DB / "wal")) == sorted(tree(main / DB / "wal"))
    assert tree(twins["ours"][1]) != tree(wal)  # something was collected
    assert read_all(twins["ours"][0], DB, wal_store=twins["ours"][1]) == model.items()


def test_a_clone_copies_its_wal_inside_the_wal_store_as_0_17_does(
        stores: tuple[Path, Path, Model], tmp_path: Path) -> None:
    main, wal, model = stores
    shutil.copytree(main, tmp_path / "main2")
    shutil.copytree(wal, tmp_path / "wal2")
    report = create_clone("tenants/ours", DB, f"file://{main}", wal_store=f"file://{wal}")
    assert report.created
    clone(tmp_path / "main2", "tenants/ours", [CloneSource(DB)], wal_store=tmp_path / "wal2")
    ours, theirs = tree(wal / "tenants/ours"), tree(tmp_path / "wal2/tenants/ours")
    assert ours and ours == theirs  # the same WAL SSTs, byte for byte, in the WAL store
    assert not (main / "tenants/ours/wal").exists()
    assert read_all(main, "tenants/ours", wal_store=wal) == model.items()


def test_a_hard_destroy_empties_both_stores_as_delete_db(
        stores: tuple[Path, Path, Model], tmp_path: Path) -> None:
    main, wal, _ = stores
    (main / DB / "wal").mkdir()
    (main / DB / "wal" / "00000000000000000001.sst").write_bytes(b"")  # a stray in main
    shutil.copytree(main, tmp_path / "main2")
    shutil.copytree(wal, tmp_path / "wal2")
    destroy(DB, f"file://{main}", soft=False, wal_store=f"file://{wal}")
    run(OfficialAdmin(tmp_path / "main2", DB, wal_store=tmp_path / "wal2").admin.delete_db(True))
    assert tree(main / DB) == tree(tmp_path / "main2" / DB) == {}
    assert tree(wal / DB) == tree(tmp_path / "wal2" / DB) == {}


def test_s3_a_second_bucket_holds_the_wal(moto_endpoint: str,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    a, w = create_bucket(moto_endpoint), create_bucket(moto_endpoint)
    main, wal = s3_store(a.name, endpoint=moto_endpoint), s3_store(w.name, endpoint=moto_endpoint)
    model = Model()
    write_official(main, wal, model, rounds=2, tail=12)
    for name, value in (("SLATELIB_S3_ENDPOINT", moto_endpoint), ("SLATELIB_S3_REGION", REGION),
                        ("SLATELIB_S3_ACCESS_KEY_ID", ACCESS_KEY),
                        ("SLATELIB_S3_SECRET_ACCESS_KEY", SECRET_KEY)):
        monkeypatch.setenv(name, value)
    code, _, err = cli(capsys, "--db", f"{a.url}/{DB}", "scan")
    assert code == 5 and "--wal-store" in err
    code, out, _ = cli(capsys, "--db", f"{a.url}/{DB}", "--wal-store", w.url, "scan")
    assert code == 0 and scan_lines(out) == read_all(main, DB, wal_store=wal) == model.items()
    assert not list(a.open().list(f"{DB}/wal")) and list(w.open().list(f"{DB}/wal"))
    with OfficialReader.open(main, DB, wal_store=wal) as r:
        assert r.get(b"t0011") == b"tail-11"
