"""Rescaling segmented databases (SlateDB RFC-0024) written by official 0.17.

- A split cuts at segment boundaries only (docs/rfcs/0018-segments.md): each shard holds
  whole segments, each compacted into one sorted run of its own, and the official reader
  (with the extractor) reads exactly the shard's range of the source; an official writer
  reopens a shard and keeps writing into its segments.
- The shards merge back (0.17's union, per segment) into one database equal to the source
  plus those writes; two shards that both hold part of one segment merge when their keys
  in it are disjoint, and are refused when they overlap there.
- Refused before any write: an explicit split key inside a segment, more shards than
  segments, rows only in the WAL (slatelib's writer cannot route them to segments), and
  ``--fence-source``. A WAL SST whose rows an L0 holds already (what 0.17 leaves after a
  memtable flush) is moved past without a writer.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from slatelib.errors import InvalidArgumentError, UnsupportedFeatureError
from slatelib.objstore import open_store
from slatelib.ops.rescale import RescaleOptions, merge_databases, split_database
from slatelib.store.manifest_store import ManifestStore
from tests.interop.official import (
    DbSettings,
    Delete,
    FixedPrefix,
    Model,
    OfficialAdmin,
    OfficialDb,
    Put,
    read_all,
)
from tests.unit.store_snapshot import snapshot

pytestmark = pytest.mark.interop

EX = FixedPrefix(4)
PREFIXES = (b"aaa:", b"bbb:", b"ccc:", b"ddd:")
QUIET = RescaleOptions(live_window_s=0)


def _age(root: Path, seconds: float = 3600) -> None:
    then = time.time() - seconds
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (then, then))


def official_source(root: Path, path: str = "src", *, close: str = "memtable") -> Model:
    """Four segments of different sizes, L0s and runs (official compactor), deletes."""
    model = Model()
    with OfficialDb.open(root, path, DbSettings(block_size=1024), model=model,
                         segment_extractor=EX) as db:
        admin = OfficialAdmin(root, path)
        for r in range(3):
            db.write([Put(p + b"%04d" % i, b"%s%d-%d" % (p, r, i) * 4)
                      for n, p in zip((120, 40, 80, 20), PREFIXES, strict=True)
                      for i in range(0, n, r + 1)])
            db.flush_memtable()
            if r == 1:
                admin.compact(segment=b"aaa:")
                admin.compact(segment=b"ccc:", l0=1)
        db.write([Delete(b"bbb:%04d" % i) for i in range(0, 40, 5)])
        db.close(flush=close)
    _age(root)
    return model


def shard_bounds(keys: list[str]) -> list[tuple[bytes | None, bytes | None]]:
    cuts = [None, *(k.encode() for k in keys), None]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def test_split_at_segment_boundaries_keep_writing_and_merge_back(tmp_path: Path) -> None:
    model = official_source(tmp_path)
    store = open_store(f"file://{tmp_path}")
    report = split_database("src", store, ["s-0", "s-1"], options=QUIET).to_dict()
    assert report["status"] == "done" and report["validation"]["ok"]
    assert set(report["split_keys"]) <= {p.decode() for p in PREFIXES}
    assert all(t["checked_by"] == "scan" for t in report["targets"])
    bounds = shard_bounds(report["split_keys"])
    models = [model.projected(lo, hi) for lo, hi in bounds]
    for shard, sm, (lo, hi) in zip(("s-0", "s-1"), models, bounds, strict=True):
        assert read_all(tmp_path, shard, segment_extractor=EX) == sm.items()
        m = ManifestStore(store, shard).read_latest().value
        assert m.segment_extractor_name == "fixed4" and m.l0 == () and m.compacted == ()
        assert m.external_dbs == ()  # detached
        assert m.segments
        for s in m.segments:  # whole segments, each one run
            assert not s.l0 and len(s.compacted) == 1, (shard, s.prefix)
            assert (lo is None or s.prefix >= lo) and (hi is None or s.prefix < hi)
    # an official writer reopens a shard and writes into one of its segments
    seg = (ManifestStore(store, "s-1").read_latest().value.segments or ())[0].prefix
    with OfficialDb.open(tmp_path, "s-1", DbSettings(compactor=False), model=models[1],
                         segment_extractor=EX) as db:
        db.write([Put(seg + b"new", b"after the split")])
        db.flush_memtable()
    _age(tmp_path)
    merged = merge_databases(["s-0", "s-1"], "back", store, options=QUIET).to_dict()
    assert merged["status"] == "done" and merged["validation"]["ok"]
    assert read_all(tmp_path, "back", segment_extractor=EX) == \
        Model.union(models[0], models[1]).items()
    back = ManifestStore(store, "back").read_latest().value
    assert [s.prefix for s in back.segments or ()] == list(PREFIXES)
    assert all(len(s.compacted) == 1 and not s.l0 for s in back.segments or ())


def test_shards_of_one_segment_merge_when_disjoint_in_it(tmp_path: Path) -> None:
    """Two databases that both hold keys of ``ccc:`` (disjoint there) and overlap as
    wholes: 0.17's union accepts them (per segment), and so does the merge."""
    for path, lo, hi in (("x", 0, 40), ("y", 40, 80)):
        with OfficialDb.open(tmp_path, path, DbSettings(), segment_extractor=EX) as db:
            db.write([Put(b"ccc:%04d" % i, b"c") for i in range(lo, hi)]
                     + [Put((b"aaa:" if path == "x" else b"ddd:") + b"1", path.encode())])
            db.flush_all()
            db.close(flush="memtable")
    _age(tmp_path)
    store = open_store(f"file://{tmp_path}")
    report = merge_databases(["x", "y"], "xy", store, options=QUIET).to_dict()
    assert report["status"] == "done" and report["validation"]["ok"]
    keys = [k for k, _ in read_all(tmp_path, "xy", segment_extractor=EX)]
    assert keys == [b"aaa:1", *(b"ccc:%04d" % i for i in range(80)), b"ddd:1"]
    with OfficialDb.open(tmp_path, "z", DbSettings(), segment_extractor=EX) as db:
        db.write([Put(b"ccc:0039", b"overlaps x"), Put(b"ccc:0041", b"and y")])
        db.close(flush="memtable")
    _age(tmp_path)
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError, match="in segment 'ccc:'"):
        merge_databases(["x", "z"], "xz", store, options=QUIET)
    assert snapshot(store) == before


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"at": [b"bbb:0010"]}, InvalidArgumentError, "inside segment 'bbb:'"),
    ({"into": 5}, InvalidArgumentError, "only 4 segments hold data"),
    ({"options": RescaleOptions(live_window_s=0, fence_source=True)},
     UnsupportedFeatureError, "--fence-source"),
])
def test_refused_before_any_write(tmp_path: Path, kwargs: dict[str, object],
                                  error: type[Exception], match: str) -> None:
    official_source(tmp_path)
    store = open_store(f"file://{tmp_path}")
    before = snapshot(store)
    into = int(kwargs.pop("into", 2))  # type: ignore[call-overload]
    with pytest.raises(error, match=match):
        split_database("src", store, [f"s-{i}" for i in range(into)],
                       **{"options": QUIET, **kwargs})  # type: ignore[arg-type]
    assert snapshot(store) == before


def test_wal_rows_are_refused_and_a_settled_wal_is_moved_past(tmp_path: Path) -> None:
    official_source(tmp_path, close="wal")  # the last batch only in the WAL
    store = open_store(f"file://{tmp_path}")
    before = snapshot(store)
    with pytest.raises(UnsupportedFeatureError, match="only in its WAL"):
        split_database("src", store, ["s-0", "s-1"], options=QUIET)
    assert snapshot(store) == before
    # flushed by the official writer: a memtable flush leaves the WAL SST it wrote first
    # above replay_after_wal_id, with rows an L0 holds already (format §5.5.4)
    with OfficialDb.open(tmp_path, "src", DbSettings(compactor=False), segment_extractor=EX) as db:
        db.write([Put(b"ddd:9999", b"flushed")])
        db.flush_memtable()
        db.close(flush=None)
    m = ManifestStore(store, "src").read_latest().value
    _age(tmp_path)
    assert m.replay_after_wal_id < m.wal_id_last_seen
    report = split_database("src", store, ["s-0", "s-1"], options=QUIET).to_dict()
    assert report["status"] == "done" and report["validation"]["ok"]
    assert report["sources"][0]["needs_wal_flush"] and report["sources"][0]["wal_rows"] == 0
    settled = ManifestStore(store, "src").read_latest().value
    assert settled.writer_epoch == m.writer_epoch  # no writer was opened
    assert settled.replay_after_wal_id > m.replay_after_wal_id
