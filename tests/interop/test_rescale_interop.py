"""Rescaling official 0.17.0 databases: split, keep writing, merge back, collect the parent.

- A source written by the official package (several L0s, sorted runs, a writer closed with
  a WAL-only flush, its embedded compactor on) is split 3 ways: the official reader reads
  exactly its range of the source from every shard, and an official writer reopens a shard
  and keeps writing.
- The shards merged back equal the source plus those writes.
- The parent, collected by the official ``run_gc_once`` and by ours and then destroyed,
  takes no key of any shard with it.
- A live official writer is refused; fenced on request, its next write fails and every
  write it acknowledged is in the shards.
- A driver killed at several points, rerun, finishes the job.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from slatelib import delete_checkpoint, destroy
from slatelib.errors import InvalidDbStateError, WriterActiveError
from slatelib.objstore import open_store
from slatelib.ops.gc import collect_garbage
from slatelib.ops.rescale import RescaleOptions, merge_databases, split_database
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash
from tests.interop.official import (
    DbSettings,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    read_all,
)
from tests.interop.test_gc_differential import official_gc
from tests.interop.workload import key_pool, random_ops, write_layered

pytestmark = pytest.mark.interop

SHARDS = ["s-0", "s-1", "s-2"]
BLOCK = 1024


def _age(root: Path, seconds: float = 3600) -> None:
    then = time.time() - seconds
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (then, then))


def official_source(root: Path, seed: int = 7) -> Model:
    """Layered data (L0s, runs, WAL-only batches) plus rows the writer only wrote to the WAL
    when it closed (``close(flush="wal")``)."""
    rng = random.Random(seed)
    keys = key_pool(rng, 120)
    model = Model()
    db = OfficialDb.open(root, "src", DbSettings(block_size=BLOCK), model=model)
    shape = write_layered(db, OfficialAdmin(root, "src"), rng, keys, block_size=BLOCK)
    assert shape.l0_views >= 2 and len(shape.sorted_runs) >= 2
    db.write(random_ops(rng, keys, 30, block_size=BLOCK))
    db.write([Put(b"written-before-close", b"only in the WAL")])
    db.close(flush="wal")
    m = OfficialAdmin(root, "src").manifest()
    assert m.replay_after_wal_id < m.next_wal_sst_id - 1  # WAL data after the last L0
    _age(root)
    return model


def _checkpoints(root: Path, path: str = "src") -> set[str]:
    return {c.id for c in OfficialAdmin(root, path).manifest().checkpoints}


def _bounds(keys: list[str]) -> list[tuple[bytes | None, bytes | None]]:
    cuts = [None, *(bytes.fromhex(k[4:]) if k.startswith("hex:") else k.encode()
                    for k in keys), None]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def test_split_keep_writing_merge_back_and_collect_the_parent(tmp_path: Path) -> None:
    model = official_source(tmp_path)
    store = open_store(f"file://{tmp_path}")
    before = _checkpoints(tmp_path)  # the official compactor's (15 minutes)
    report = split_database("src", store, SHARDS).to_dict()
    assert report["status"] == "done" and report["validation"]["ok"]
    assert report["sources"][0]["flushed"]["wal_rows"] > 30
    bounds = _bounds(report["split_keys"])
    shard_models = [model.projected(lo, hi) for lo, hi in bounds]
    for shard, sm in zip(SHARDS, shard_models, strict=True):
        assert read_all(tmp_path, shard) == sm.items(), shard
        with OfficialReader.open(tmp_path, shard) as r:  # nothing outside its range
            lo, hi = bounds[SHARDS.index(shard)]
            assert r.scan(None, lo) == [] if lo is not None else True
            assert r.scan(hi, None) == [] if hi is not None else True
    # the source is detached from every shard, and keeps no checkpoint of ours
    assert _checkpoints(tmp_path) == before
    # an official writer reopens a shard and keeps writing
    lo, hi = bounds[1]
    new_key = (lo or b"") + b"\x00new"
    with OfficialDb.open(tmp_path, "s-1", DbSettings(compactor=False, block_size=BLOCK),
                         model=shard_models[1]) as db:
        db.write([Put(new_key, b"written to the shard")])
        db.flush_memtable()
    assert read_all(tmp_path, "s-1") == shard_models[1].items()
    # the parent goes: official GC, ours, then (once the official compactor's
    # checkpoints expired, here: deleted) a hard destroy
    for cp in before:
        delete_checkpoint("src", store, cp)
    official_gc(tmp_path, "src", 0)
    collect_garbage("src", store, min_age=0, force=True, dry_run=False)
    destroy("src", store, soft=False)
    assert not (tmp_path / "src" / "compacted").exists() or \
        list((tmp_path / "src" / "compacted").iterdir()) == []
    for shard, sm in zip(SHARDS, shard_models, strict=True):
        official_gc(tmp_path, shard, 0)
        collect_garbage(shard, store, min_age=0, force=True, dry_run=False)
        assert read_all(tmp_path, shard) == sm.items(), shard
    # merged back: the source and the shard's new write
    _age(tmp_path)
    merged = merge_databases(SHARDS, "whole", store).to_dict()
    assert merged["status"] == "done" and merged["validation"]["ok"]
    assert read_all(tmp_path, "whole") == Model.union(*shard_models).items()
    with OfficialDb.open(tmp_path, "whole", DbSettings(compactor=False)) as db:
        db.write([Put(b"after-merge", b"1")])
    assert dict(read_all(tmp_path, "whole"))[b"after-merge"] == b"1"


def test_a_live_official_writer_is_refused_then_fenced(tmp_path: Path) -> None:
    model = Model()
    db = OfficialDb.open(tmp_path, "src", DbSettings(compactor=False, block_size=BLOCK),
                         model=model)
    for i in range(60):
        db.write([Put(b"key%03d" % i, b"v%d" % i)])
        if i % 20 == 19:
            db.flush_memtable()
    db.write([Put(b"acknowledged", b"in the WAL")])
    db.flush_wal()
    store = open_store(f"file://{tmp_path}")
    with pytest.raises(WriterActiveError):
        split_database("src", store, SHARDS)
    report = split_database("src", store, SHARDS,
                            options=RescaleOptions(fence_source=True)).to_dict()
    acknowledged = dict(model.items())
    with pytest.raises(Exception, match="(?i)fenc|closed"):  # noqa: B017 - the official error
        db.write([Put(b"lost", b"after the fence")])  # buffered; its WAL write is fenced
        db.flush_wal()
    db.close(flush=None)
    shards = {k: v for s in SHARDS for k, v in read_all(tmp_path, s)}
    assert shards == acknowledged and b"lost" not in shards
    assert report["sources"][0]["flushed"]["writer_epoch"] >= 2


@pytest.mark.parametrize("op, path, skip", [
    ("put_if_absent", "src/compacted/", 0),        # the WAL tail's L0
    ("put_if_absent", "s-1/manifest/", 0),         # a clone, uninitialized
    ("put_if_absent", "s-2/manifest/", 3),         # a compaction commit
    ("put_if_absent", "src/manifest/", 9),         # a release during detach
    ("delete", "src/slatelib/rescale/active.json", 0),
])
def test_a_killed_driver_reruns_to_the_end(tmp_path: Path, op: str, path: str,
                                           skip: int) -> None:
    model = official_source(tmp_path, seed=11)
    store = open_store(f"file://{tmp_path}")
    before = _checkpoints(tmp_path)
    flaky = FlakyObjectStore(store)
    rule = flaky.crash(op, path=path, skip=skip)  # type: ignore[arg-type]
    with pytest.raises((SimulatedCrash, InvalidDbStateError)):
        split_database("src", flaky, SHARDS)
    assert rule.fired == 1
    report = split_database("src", store, SHARDS).to_dict()
    assert report["status"] in ("done", "already_done")
    keys = report.get("split_keys") or report["recorded"]["split_keys"]
    for shard, (lo, hi) in zip(SHARDS, _bounds(keys), strict=True):
        assert read_all(tmp_path, shard) == model.projected(lo, hi).items(), shard
        m = ManifestStore(store, shard).read_latest().value
        assert m.external_dbs == ()
    assert _checkpoints(tmp_path) == before
