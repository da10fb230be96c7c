"""Clones between slatelib and official 0.17.0, nested clones included.

- Clones made by ``slatelib.create_clone`` (and ``slate clone``) open in the official
  ``DbReader`` and ``Db``, which write to them without touching the parent.
- Clones made by the official package open in slatelib's reader and writer.
- Mixed chains: a slatelib clone of an official clone of a slatelib clone, and the reverse.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from slatelib import Db, DbReader, create_clone
from slatelib.cli import main as slate
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from tests.interop.official import (
    CloneSource,
    DbSettings,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    clone,
    read_all,
)
from tests.interop.workload import key_pool, random_ops
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.interop


def official_parent(root: Path, path: str, seed: int) -> Model:
    """L0, a sorted run and WAL-only rows, written by the official package."""
    rng = random.Random(seed)
    keys = key_pool(rng, 30)
    model = Model()
    with OfficialDb.open(root, path, DbSettings(), model=model) as db:
        db.write(random_ops(rng, keys, 20, block_size=1024))
        db.flush_memtable()
        OfficialAdmin(root, path).compact()
        db.write(random_ops(rng, keys, 10, block_size=1024))
        db.flush_memtable()
        db.write([Put(b"wal-only", b"w")])
        db.flush_wal()
    return model


def slatelib_parent(root: Path, path: str) -> Model:
    model = Model()
    with Db.open(path, f"file://{root}", writer_settings()) as db:
        for i in range(20):
            db.put(b"k%02d" % i, b"v%d" % i)
        model.apply([Put(b"k%02d" % i, b"v%d" % i) for i in range(20)])
        db.flush()
        db.put(b"wal-only", b"s")
        model.apply([Put(b"wal-only", b"s")])
        db.close(flush=None)
    # an official reader raises nothing; a slatelib managed reader raises wal_id_last_seen,
    # so the clone's source checkpoint includes the WAL-only row
    DbReader.open(path, f"file://{root}", settings=writer_settings(), auto_refresh=False).close()
    return model


def ours(root: Path, path: str) -> dict[bytes, bytes]:
    with DbReader.open(path, f"file://{root}", mode="latest") as r:
        return dict(r.scan())


def test_slatelib_clones_open_in_official_slatedb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parent = official_parent(tmp_path, "parent", 1)
    report = create_clone("clone", "parent", f"file://{tmp_path}")
    assert report.created and report.wal_ssts_copied >= 1
    assert dict(read_all(tmp_path, "clone")) == parent.live() == ours(tmp_path, "clone")
    assert slate(["--store", f"file://{tmp_path}", "--path", "nested", "clone", "--parent", "clone"]) == 0
    capsys.readouterr()
    nested = ManifestStore(open_store(f"file://{tmp_path}"), "nested").read_latest().value
    assert [e.path for e in nested.external_dbs] == ["parent", "clone"]
    assert dict(read_all(tmp_path, "nested")) == parent.live()
    with OfficialDb.open(tmp_path, "nested", DbSettings()) as db:
        db.write([Put(b"nested-only", b"n")])
        db.flush_memtable()
        assert db.get(b"wal-only") == b"w"
    assert ours(tmp_path, "nested")[b"nested-only"] == b"n"
    assert b"nested-only" not in ours(tmp_path, "clone") and ours(tmp_path, "parent") == parent.live()


def test_official_clones_open_in_slatelib(tmp_path: Path) -> None:
    parent = official_parent(tmp_path, "parent", 2)
    clone(tmp_path, "clone", [CloneSource("parent")])
    clone(tmp_path, "nested", [CloneSource("clone")])
    for path in ("clone", "nested"):
        assert ours(tmp_path, path) == parent.live()
    with Db.open("nested", f"file://{tmp_path}", writer_settings()) as db:
        assert dict(db.scan()) == parent.live()
        db.put(b"ours", b"1")
        db.flush()
    with OfficialReader.open(tmp_path, "nested") as r:
        assert dict(r.scan()) == {**parent.live(), b"ours": b"1"}
    assert ours(tmp_path, "parent") == parent.live()


def test_mixed_chains_of_clones(tmp_path: Path) -> None:
    root_model = slatelib_parent(tmp_path, "a")
    clone(tmp_path, "b", [CloneSource("a")])          # official clone of a slatelib db
    create_clone("c", "b", f"file://{tmp_path}")        # slatelib clone of that
    clone(tmp_path, "d", [CloneSource("c")])          # and official again
    for path in "bcd":
        assert ours(tmp_path, path) == root_model.live()
        assert dict(read_all(tmp_path, path)) == root_model.live()
    with Db.open("d", f"file://{tmp_path}", writer_settings()) as db:
        db.put(b"d-only", b"1")
    assert dict(read_all(tmp_path, "d"))[b"d-only"] == b"1"
    m = ManifestStore(open_store(f"file://{tmp_path}"), "d").read_latest().value
    for e in m.external_dbs:  # every ancestor holds the final checkpoint of d
        owner = ManifestStore(open_store(f"file://{tmp_path}"), e.path).read_latest().value
        assert owner.checkpoint(e.final_checkpoint_id) is not None, e.path  # type: ignore[arg-type]
