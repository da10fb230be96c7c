"""Destroy (design doc 'checkpoints and clones'): soft fences the writer and marks; hard deletes,
manifest last."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from slatelib import Db, DbReader, create_checkpoint, create_clone, destroy
from slatelib.cli.app import main as slate
from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import GcSettings, Settings
from slatelib.core.checkpoints import is_writer_checkpoint
from slatelib.errors import (
    CorruptObjectError,
    FencedError,
    InvalidDbStateError,
    ManifestMissingError,
)
from slatelib.exit_codes import EXIT_DATA, EXIT_OK
from slatelib.objstore import ObjectStore, open_raw_store, open_store
from slatelib.ops.destroy import DELETING_MARKER
from slatelib.ops.gc import collect_garbage
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash
from tests.unit.store_snapshot import snapshot
from tests.unit.writer.support import writer_settings

NOW_MS = 1_750_000_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW_MS)


@pytest.fixture
def raw() -> ObjectStore:
    return open_raw_store(f"memory://{uuid.uuid4().hex}/")


def make_db(store: ObjectStore, clock: FakeClock, path: str = "db") -> None:
    with Db.open(path, store, writer_settings(), clock=clock) as db:
        db.put(b"k", b"v")
        db.flush()
        db.put(b"w", b"wal")


def objects(store: ObjectStore, prefix: str) -> list[str]:
    return [m.path for m in store.list(prefix)]


def test_soft_destroy_fences_the_writer_and_marks_the_manifest(raw: ObjectStore, clock: FakeClock) -> None:
    db = Db.open("db", raw, writer_settings(), clock=clock)
    db.put(b"k", b"v")
    before = ManifestStore(raw, "db").read_latest().value
    wals_before = len(objects(raw, DbPaths("db").wal_dir))
    report = destroy("db", raw, clock=clock)
    m = ManifestStore(raw, "db").read_latest().value
    assert report.soft and report.destroyed_at_s == m.destroyed_at_s == NOW_MS // 1000
    assert m.writer_epoch == before.writer_epoch + 1
    assert m.compactor_epoch == before.compactor_epoch + 1
    assert not any(is_writer_checkpoint(c) for c in m.checkpoints)
    assert len(objects(raw, DbPaths("db").wal_dir)) == wals_before + 1  # the WAL fence
    with pytest.raises(FencedError):
        db.put(b"k2", b"v")
    db.close()
    ids = ManifestStore(raw, "db").list_ids()
    assert destroy("db", raw, clock=clock).destroyed_at_s == report.destroyed_at_s
    assert ManifestStore(raw, "db").list_ids() == ids  # idempotent: nothing written


def test_hard_destroy_refuses_while_a_checkpoint_is_live(raw: ObjectStore, clock: FakeClock) -> None:
    make_db(raw, clock)
    cp = create_checkpoint("db", raw, lifetime=60, clock=clock)
    with pytest.raises(InvalidDbStateError, match=str(cp.id)):
        destroy("db", raw, soft=False, clock=clock)
    assert ManifestStore(raw, "db").read_latest().value.destroyed_at_s is None
    clock.advance(61)  # expired checkpoints do not block
    report = destroy("db", raw, soft=False, clock=clock)
    assert report.deleted_objects > 0 and objects(raw, "db") == []


def test_hard_destroy_refuses_while_a_writer_holds_its_checkpoint(raw: ObjectStore, clock: FakeClock) -> None:
    # Deleting under a live writer would let its next WAL and manifest writes land on the
    # freed ids: an acknowledged write in a destroyed database, a manifest naming deleted SSTs.
    db = Db.open("db", raw, writer_settings(checkpoint_lifetime=600.0, manifest_poll_interval=60.0),
                 clock=clock)
    db.put(b"k", b"v")
    with pytest.raises(InvalidDbStateError, match="writer checkpoint .* expires 1750000600"):
        destroy("db", raw, soft=False, clock=clock)
    assert db.put(b"k2", b"v") > 0 and ManifestStore(raw, "db").read_latest().value.destroyed_at_s is None
    clock.advance(601)  # a killed writer's checkpoint no longer blocks once it expired
    report = destroy("db", raw, soft=False, clock=clock)
    assert report.deleted_objects > 0 and objects(raw, "db") == []
    db.close(flush=None)


def test_a_soft_destroy_fences_the_writer_and_unblocks_a_hard_destroy(raw: ObjectStore, clock: FakeClock) -> None:
    db = Db.open("db", raw, writer_settings(), clock=clock)
    db.put(b"k", b"v")
    destroy("db", raw, clock=clock)
    with pytest.raises(FencedError):
        db.put(b"k2", b"v")
    assert destroy("db", raw, soft=False, clock=clock).deleted_objects > 0
    db.close()
    assert objects(raw, "db") == []


def test_hard_destroy_deletes_the_current_manifest_last_and_keeps_other_objects(
    raw: ObjectStore, clock: FakeClock
) -> None:
    make_db(raw, clock)
    make_db(raw, clock, "db/nested")  # another database below the path
    latest = ManifestStore(raw, "db").read_latest()
    flaky = FlakyObjectStore(raw)
    report = destroy("db", flaky, soft=False, clock=clock)
    deletes = [(op, p) for op, p in flaky.log if op in ("delete", "delete_many")]
    assert deletes[-2] == ("delete", ManifestStore(raw, "db").path(latest.id + 1))
    assert deletes[-1] == ("delete", f"db/{DELETING_MARKER}")
    assert report.kept_objects and all(p.startswith("db/nested/") for p in report.kept_objects)
    assert objects(raw, "db") == list(report.kept_objects)


def test_a_crashed_hard_destroy_is_finished_by_a_rerun(raw: ObjectStore, clock: FakeClock) -> None:
    make_db(raw, clock)
    flaky = FlakyObjectStore(raw)
    flaky.crash("delete", path="/manifest/")  # dies right after deleting the current manifest
    with pytest.raises(SimulatedCrash):
        destroy("db", flaky, soft=False, clock=clock)
    assert objects(raw, "db") == [f"db/{DELETING_MARKER}"]
    destroy("db", raw, soft=False, clock=clock)
    assert objects(raw, "db") == []
    with pytest.raises(ManifestMissingError):
        destroy("db", raw, soft=False, clock=clock)


def test_hard_destroy_of_a_clone_releases_its_parents(raw: ObjectStore, clock: FakeClock) -> None:
    make_db(raw, clock, "parent")
    create_clone("clone", "parent", raw, clock=clock)
    with pytest.raises(InvalidDbStateError, match="unexpired"):
        destroy("parent", raw, soft=False, clock=clock)  # the clone's final checkpoint
    report = destroy("clone", raw, soft=False, clock=clock)
    assert report.released_parents == ("parent",)
    live = [c for c in ManifestStore(raw, "parent").read_latest().value.checkpoints
            if c.expire_time_s is None]
    assert live == []


def test_paths_that_are_not_databases(raw: ObjectStore, clock: FakeClock) -> None:
    raw.put(DbPaths("junk").wal(1), b"not ours")
    with pytest.raises(InvalidDbStateError, match="not a database"):
        destroy("junk", raw, soft=False, clock=clock)
    assert objects(raw, "junk") == [DbPaths("junk").wal(1)]
    with pytest.raises(ManifestMissingError):
        destroy("empty", raw, soft=False, clock=clock)
    with pytest.raises(ManifestMissingError):
        destroy("empty", raw, clock=clock)


# ------------------------------------------------------------ validated before any write
UNSAFE_PARENT_PATHS = [
    ("../parent", "has a '..' segment"),
    ("/abs/parent", "is absolute"),
    ("clone/inner", "lies inside this database"),
    ("clone", "is this database itself"),
    ("a//b", "empty segment"),
    ("parent/", "not canonical"),
]


def clone_with_external_path(store: ObjectStore, path: str, clock: Clock = SYSTEM_CLOCK) -> int:
    """``parent`` and its clone ``clone``, whose latest manifest (the id returned) names the
    parent as ``path``."""
    with Db.open("parent", store, writer_settings(), clock=clock) as db:
        db.put(b"k", b"v")
        db.flush()
    create_clone("clone", "parent", store, clock=clock)
    ms = ManifestStore(store, "clone")
    cur = ms.read_latest()
    (entry,) = cur.value.external_dbs
    return ms.write(cur.id + 1, replace(cur.value, external_dbs=(replace(entry, path=path),))).id


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("bad, why", UNSAFE_PARENT_PATHS)
def test_destroy_refuses_an_unsafe_external_path_before_any_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, why: str, hard: bool
) -> None:
    url = f"file://{tmp_path}"
    store = open_store(url)
    mid = clone_with_external_path(store, bad)
    before = snapshot(store)
    assert any(p.startswith("clone/") for p in before) and any(p.startswith("parent/") for p in before)
    code = slate(["--store", url, "--path", "clone", "destroy", *(["--hard"] if hard else [])])
    out, err = capsys.readouterr()
    assert code == EXIT_DATA and out == ""
    # the database named as the URL of --store and --path (so is a path that is its own)
    shown = f"{url}/clone" if bad == "clone" else repr(bad)
    assert f"error: database {url}/clone, manifest {mid}: external_dbs[0] path {shown} " in err
    assert why in err
    assert snapshot(store) == before  # byte for byte: no fenced epoch, no marker, no release


def test_after_a_refused_hard_destroy_a_repaired_clone_destroys_and_releases_its_parent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"file://{tmp_path}"
    store = open_store(url)
    clone_with_external_path(store, "../parent")
    assert slate(["--store", url, "--path", "clone", "destroy", "--hard"]) == EXIT_DATA
    ms = ManifestStore(store, "clone")
    cur = ms.read_latest()
    assert cur.value.destroyed_at_s is None
    (entry,) = cur.value.external_dbs
    ms.write(cur.id + 1, replace(cur.value, external_dbs=(replace(entry, path="parent"),)))
    capsys.readouterr()
    assert slate(["--store", url, "--path", "clone", "destroy", "--hard"]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["released_parents"] == ["parent"] and out["missing_parents"] == []
    finals = [c for c in ManifestStore(store, "parent").read_latest().value.checkpoints
              if c.expire_time_s is None]
    assert finals == [] and objects(store, "clone") == []


def test_hard_destroy_refuses_when_a_parent_manifest_does_not_decode(
    raw: ObjectStore, clock: FakeClock
) -> None:
    clone_with_external_path(raw, "parent", clock)
    parent = ManifestStore(raw, "parent")
    raw.put(parent.path(parent.read_latest().id + 1), b"\x00\x02junk")
    before = snapshot(raw)
    with pytest.raises(CorruptObjectError, match="refusing to hard-destroy 'clone' .*'parent' "
                       "holds its final checkpoint .* nothing was changed"):
        destroy("clone", raw, soft=False, clock=clock)
    assert snapshot(raw) == before


def test_hard_destroy_reports_a_parent_that_has_no_manifest(raw: ObjectStore, clock: FakeClock) -> None:
    clone_with_external_path(raw, "elsewhere/parent", clock)
    report = destroy("clone", raw, soft=False, clock=clock)
    assert report.missing_parents == ("elsewhere/parent",) and report.released_parents == ()
    assert objects(raw, "clone") == []


def test_a_chain_of_clones_destroys_and_collects(raw: ObjectStore, clock: FakeClock) -> None:
    make_db(raw, clock, "a")
    for clone, parent in (("b", "a"), ("c", "b"), ("d", "c")):
        create_clone(clone, parent, raw, clock=clock)
        with Db.open(clone, raw, writer_settings(), clock=clock) as db:
            db.put(clone.encode(), b"own")  # an SST of its own, so the next clone pins it
            db.flush()

    def finals(path: str) -> set[uuid.UUID]:
        return {c.id for c in ManifestStore(raw, path).read_latest().value.checkpoints
                if c.expire_time_s is None}

    d = ManifestStore(raw, "d").read_latest().value
    assert [e.path for e in d.external_dbs] == ["a", "b", "c"]
    report = destroy("d", raw, soft=False, clock=clock)  # hard: releases every ancestor
    assert report.released_parents == ("a", "b", "c") and objects(raw, "d") == []
    assert all(e.final_checkpoint_id not in finals(e.path) for e in d.external_dbs)
    c = ManifestStore(raw, "c").read_latest().value
    destroy("c", raw, clock=clock)  # soft; GC deletes it and releases a and b
    later = NOW_MS / 1000 + 3600
    gc = collect_garbage("c", raw, dry_run=False, now=later,
                         settings=Settings(gc=GcSettings(db_delete_grace=0)))
    assert gc.destroy is not None and gc.destroy["completed"] is True, gc.destroy
    assert [p["status"] for p in gc.destroy["parents"]] == ["released", "released"]
    assert objects(raw, "c") == []
    assert all(e.final_checkpoint_id not in finals(e.path) for e in c.external_dbs)
    for path in ("b", "a"):
        assert collect_garbage(path, raw, dry_run=False, now=later).error_count == 0
    with DbReader.open("b", raw, mode="latest") as r:
        assert r.get(b"k") == b"v"
