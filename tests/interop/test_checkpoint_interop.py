"""Checkpoints between slatelib and official 0.17.0, and the reader protocol next to an
official writer and compactor.

- Checkpoints made by ``slate create-checkpoint`` show up in the official
  ``Admin.list_checkpoints`` with the same id, name, expiry, creation time and manifest id;
  checkpoints the official ``Admin`` makes, refreshes and deletes show up the same in
  ``slatelib.list_checkpoints``; official readers read through slatelib's checkpoints and
  the other way round.
- A slatelib ``DbReader`` keeps serving correct reads while an official writer flushes and
  its compactor commits; its checkpoint moves forward and the old ones are removed.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from slatelib import Db, DbReader, delete_checkpoint, list_checkpoints, refresh_checkpoint
from slatelib.cli import main as slate
from tests.interop.official import (
    DbSettings,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    run,
)
from tests.interop.workload import key_pool, random_ops
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.interop

PATH = "db"


def official_checkpoints(root: Path, name: str | None = None) -> dict[str, Any]:
    admin = OfficialAdmin(root, PATH)
    return {c.id: c for c in run(admin.admin.list_checkpoints(name))}


def cli(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert slate(["--store", f"file://{root}", "--path", PATH, *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    with Db.open(PATH, f"file://{tmp_path}", writer_settings()) as db:
        db.put(b"before", b"1")
        db.flush()
    return tmp_path


def test_cli_checkpoints_are_official_checkpoints(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    made = cli(root, capsys, "create-checkpoint", "--lifetime", "7days 30min 10s", "--name", "nightly")
    forever = cli(root, capsys, "create-checkpoint", "--name", "keep")
    copy = cli(root, capsys, "create-checkpoint", "--source", made["id"], "--lifetime", "1h")
    theirs = official_checkpoints(root)
    for ours in (made, forever, copy):
        c = theirs[ours["id"]]
        assert (c.name, c.manifest_id, c.expire_time_secs, c.create_time_secs) == (
            ours["name"], ours["manifest_id"], ours["expire_time_s"], ours["create_time_s"])
    assert list(official_checkpoints(root, "nightly")) == [made["id"]]
    with Db.open(PATH, f"file://{root}", writer_settings()) as db:
        db.put(b"after", b"2")
    with OfficialReader.open(root, PATH, checkpoint=made["id"]) as r:
        assert r.scan() == [(b"before", b"1")]
    cli(root, capsys, "refresh-checkpoint", "--id", made["id"])  # no lifetime: never expires
    cli(root, capsys, "delete-checkpoint", "--id", forever["id"])
    theirs = official_checkpoints(root)
    assert theirs[made["id"]].expire_time_secs is None and forever["id"] not in theirs


def test_official_checkpoints_are_slatelib_checkpoints(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    admin = OfficialAdmin(root, PATH)
    made = admin.checkpoint("weekly", lifetime_ms=3_600_000)
    plain = admin.checkpoint()
    ours = {str(c.id): c for c in list_checkpoints(PATH, f"file://{root}")}
    theirs = official_checkpoints(root)
    for cid in (made.id, plain.id):
        c, o = theirs[cid], ours[cid]
        assert (o.name, o.manifest_id, o.expire_time_s, o.create_time_s) == (
            c.name, c.manifest_id, c.expire_time_secs, c.create_time_secs)
    listed = cli(root, capsys, "list-checkpoints", "--name", "weekly")
    assert [c["id"] for c in listed] == [made.id]
    run(admin.admin.refresh_checkpoint(made.id, 7_200_000))
    [refreshed] = list_checkpoints(PATH, f"file://{root}", name="weekly")
    assert abs(refreshed.expire_time_s - (time.time() + 7200)) < 60  # type: ignore[operator]
    run(admin.admin.delete_checkpoint(plain.id))
    assert plain.id not in {str(c.id) for c in list_checkpoints(PATH, f"file://{root}")}
    refresh_checkpoint(PATH, f"file://{root}", made.id, lifetime="2h")
    delete_checkpoint(PATH, f"file://{root}", made.id)
    assert official_checkpoints(root) == {}
    with DbReader.open(PATH, f"file://{root}", checkpoint=admin.checkpoint().id) as r:
        assert r.get(b"before") == b"1"


def test_a_reader_follows_an_official_writer_and_compactor(tmp_path: Path) -> None:
    rng = random.Random(11)
    keys = key_pool(rng, 30)
    model = Model()
    url = f"file://{tmp_path}"
    with OfficialDb.open(tmp_path, PATH, DbSettings(), model=model) as db:
        db.write(random_ops(rng, keys, 20, block_size=1024))
        db.flush_memtable()
        reader = DbReader.open(PATH, url, settings=writer_settings(), auto_refresh=False)
        seen = [reader.checkpoint]
        admin = OfficialAdmin(tmp_path, PATH)
        for step in range(4):
            db.write(random_ops(rng, keys, 15, block_size=1024))
            db.flush_memtable()
            db.write([Put(b"wal/%d" % step, b"x")])
            db.flush_wal()
            if step % 2 == 1:
                admin.compact()
            reader.refresh()
            assert dict(reader.scan()) == model.live(), f"step {step}"
            assert all(reader.get(k) == model.get(k) for k in keys)
            seen.append(reader.checkpoint)
            ids = {c.id for c in admin.manifest().checkpoints}
            assert str(reader.checkpoint.id) in ids  # type: ignore[union-attr]
            assert not ids & {str(c.id) for c in seen[:-1]}  # old ones are gone
        assert len({c.id for c in seen}) == len(seen)  # it moved forward at every step
        assert len(reader.manifest.compacted) >= 1
        reader.close()
        assert {c.id for c in admin.manifest().checkpoints}.isdisjoint({str(c.id) for c in seen})
