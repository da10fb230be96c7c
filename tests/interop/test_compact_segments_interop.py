"""Compaction of segmented databases (SlateDB RFC-0024): slatelib's job against the official
0.17 compactor, on copies of one database written by an official writer with a segment
extractor (``FixedPrefix(4)``).

For each policy the official side gets the same compactions through its own compactor
(``l0``, ``full`` and ``--sources``: ``Admin.submit_compaction`` per segment, in manifest
order; ``size-tiered``: an embedded compactor whose scheduler runs until it has nothing
left to do), and the two manifests must have the same shape: the same segments, each with
the same L0 views, the same sorted run ids holding the same rows, and the same
``last_compacted_l0_sst_view_id``; the top-level tree empty in both. Both copies then
read the same through the official reader. Also: 0.17 keeps an empty run when a bottom
compaction drops every row, in a segment and in the top-level tree.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from slatedb.uniffi import Settings as OfficialSettings

from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.manifest import Manifest
from slatelib.format.sst import parse_sst
from slatelib.ids import ulid_to_str
from slatelib.objstore import open_store
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction
from slatelib.paths import DbPaths
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from tests.interop.official import (
    DbSettings,
    Delete,
    FixedPrefix,
    OfficialAdmin,
    OfficialDb,
    Put,
    read_all,
)

pytestmark = pytest.mark.interop

PATH = "db"
EX = FixedPrefix(4)
BLOCK = 1024


def build(root: Path, seed: int) -> None:
    """Four segments: ``aaa:`` three L0s; ``bbb:`` a run and two L0s; ``ccc:`` two runs
    and an L0 with deletes; ``ddd:`` a put and its tombstone (a full compaction drops
    both); plus a row only in the WAL."""
    rng = random.Random(seed)
    settings = DbSettings(block_size=BLOCK, compactor=True)
    with OfficialDb.open(root, PATH, settings, segment_extractor=EX) as db:
        admin = OfficialAdmin(root, PATH)

        def put(prefix: bytes, n: int, tag: str) -> list[Put]:
            return [Put(prefix + b"%04d" % rng.randrange(400), f"{tag}-{i}".encode() * 5)
                    for i in range(n)]

        db.write(put(b"aaa:", 80, "a1") + put(b"bbb:", 60, "b1") + put(b"ccc:", 60, "c1")
                 + [Put(b"ddd:0001", b"soon gone")])
        db.flush_memtable()
        admin.compact(segment=b"bbb:")
        admin.compact(segment=b"ccc:")
        db.write(put(b"aaa:", 60, "a2") + put(b"ccc:", 50, "c2")
                 + [Delete(b"ddd:0001")])
        db.flush_memtable()
        admin.compact(segment=b"ccc:")
        db.write(put(b"aaa:", 40, "a3") + put(b"bbb:", 40, "b3") + put(b"ccc:", 30, "c3")
                 + [Delete(b"ccc:%04d" % k) for k in range(0, 400, 7)])
        db.flush_memtable()
        db.write(put(b"bbb:", 20, "b4"))
        db.flush_memtable()
        db.write([Put(b"aaa:wal-only", b"w")])
        db.flush_wal()


def copies(tmp_path: Path, seed: int) -> tuple[Path, Path]:
    base = tmp_path / "base"
    base.mkdir()
    build(base, seed)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    shutil.copytree(base, ours)
    shutil.copytree(base, theirs)
    return ours, theirs


def manifest(root: Path) -> Manifest:
    return ManifestStore(open_store(f"file://{root}"), PATH).read_latest().value


def run_rows(root: Path, m: Manifest, views: Any) -> list[tuple[Any, ...]]:
    store = open_store(f"file://{root}")
    out: list[tuple[Any, ...]] = []
    for v in views:
        h = m.sst(v.sst_id)
        out += [r[:5] for r in
                parse_sst(store.get(DbPaths(PATH).compacted(h.id)), info=h.info).rows()]
    return out


def shape(root: Path) -> dict[str, Any]:
    """Per segment: L0 view ids, ``(run id, its rows)`` in order, and the cursor."""
    m = manifest(root)
    assert m.l0 == () and m.compacted == () and m.last_compacted_l0_sst_view_id is None
    return {s.prefix.decode(): {
        "l0": [ulid_to_str(v.id) for v in s.l0],
        "runs": [(r.id, run_rows(root, m, r.views)) for r in s.compacted],
        "cursor": None if s.last_compacted_l0_sst_view_id is None
        else ulid_to_str(s.last_compacted_l0_sst_view_id)} for s in m.segments or ()}


def ours_compact(root: Path, policy: str | None = None, **kw: Any) -> Any:
    settings = Settings(sst=SstSettings(block_size=BLOCK, min_filter_keys=10),
                        compaction=CompactionSettings(min_range_bytes=1, max_sst_size=8192,
                                                      min_compaction_sources=2))
    return run_compaction(PATH, open_store(f"file://{root}"), settings=settings,
                          policy=policy, takeover=True, parallelism=3,
                          runner=ThreadTaskRunner(3), **kw)


def official_writer(root: Path, settings: DbSettings | None = None) -> OfficialDb:
    return OfficialDb.open(root, PATH, settings or DbSettings(block_size=BLOCK),
                           segment_extractor=EX)


def test_l0_policy_matches_official_compactions_per_segment(tmp_path: Path) -> None:
    ours, theirs = copies(tmp_path, 1)
    report = ours_compact(ours, "l0")
    with official_writer(theirs):
        admin = OfficialAdmin(theirs, PATH)
        for seg in manifest(theirs).segments or ():
            if seg.l0:
                admin.compact(segment=seg.prefix)
    assert [c["segment"] for c in report.to_dict()["compactions"]] == ["aaa:", "bbb:", "ccc:",
                                                                       "ddd:"]
    got, want = shape(ours), shape(theirs)
    assert got == want
    assert read_all(ours, PATH, segment_extractor=EX) == read_all(theirs, PATH,
                                                                  segment_extractor=EX)


def test_full_policy_matches_and_keeps_the_empty_run_of_a_segment_left_with_nothing(
        tmp_path: Path) -> None:
    ours, theirs = copies(tmp_path, 2)
    ours_compact(ours, "full")
    with official_writer(theirs):
        admin = OfficialAdmin(theirs, PATH)
        for seg in manifest(theirs).segments or ():
            admin.compact(segment=seg.prefix, runs=len(seg.compacted))
    got, want = shape(ours), shape(theirs)
    assert got == want
    assert [rows for _, rows in got["ddd:"]["runs"]] == [[]]  # an empty run, kept
    assert all(len(s["runs"]) == 1 and not s["l0"] for s in got.values())
    assert read_all(ours, PATH, segment_extractor=EX) == read_all(theirs, PATH,
                                                                  segment_extractor=EX)


def test_explicit_sources_of_one_segment_match_the_official_submission(tmp_path: Path) -> None:
    ours, theirs = copies(tmp_path, 3)
    ccc = next(s for s in manifest(ours).segments or () if s.prefix == b"ccc:")
    sources = [f"l0:{ulid_to_str(ccc.l0[-1].id)}", f"sr:{ccc.compacted[0].id}"]
    ours_compact(ours, sources=sources)
    with official_writer(theirs):
        OfficialAdmin(theirs, PATH).compact(segment=b"ccc:", runs=1)
    assert shape(ours) == shape(theirs)


def size_tiered_compactor() -> DbSettings:
    """An embedded compactor with its own size-tiered scheduler (2 sources suffice)."""
    co = json.loads(OfficialSettings.default().to_json_string())["compactor_options"]
    co["poll_interval"] = "50ms"
    co["scheduler_options"] = {"min_compaction_sources": "2", "max_compaction_sources": "8"}
    co["worker"]["compactions_poll_interval"] = "50ms"
    return DbSettings(block_size=BLOCK, compactor=False,
                      extra={"compactor_options": json.dumps(co)})


def quiet(root: Path, timeout_s: float = 60.0) -> None:
    """Until the compactions file lists nothing active and the manifest stays put."""
    store = open_store(f"file://{root}")
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while time.monotonic() - since < 1.5:
        assert time.monotonic() < deadline, "the official compactor never went quiet"
        cur = CompactionsStore(store, PATH).try_read_latest()
        busy = cur is not None and any(c.status.name in ("SUBMITTED", "SCHEDULED", "RUNNING",
                                                         "COMPACTED")
                                       for c in cur.value.recent_compactions)
        m = ManifestStore(store, PATH).read_latest().value
        now = [(s.prefix, s.l0, s.compacted) for s in m.segments or ()]
        if busy or now != last:
            last, since = now, time.monotonic()
        time.sleep(0.1)


def test_size_tiered_until_quiet_matches_the_official_scheduler(tmp_path: Path) -> None:
    ours, theirs = copies(tmp_path, 4)
    for _ in range(10):
        if ours_compact(ours, "size-tiered").status == "nothing_to_do":
            break
    else:
        pytest.fail("size-tiered kept finding work")
    with official_writer(theirs, size_tiered_compactor()):
        quiet(theirs)
    got, want = shape(ours), shape(theirs)
    outline = {k: (len(v["l0"]), [i for i, _ in v["runs"]]) for k, v in got.items()}
    assert outline == {k: (len(v["l0"]), [i for i, _ in v["runs"]]) for k, v in want.items()}
    assert got == want
    # every segment with two or more L0 views or similar runs was compacted
    assert all(n < 2 for n, _ in outline.values()), outline
    assert outline != {k: (len(v["l0"]), [i for i, _ in v["runs"]])
                       for k, v in shape(tmp_path / "base").items()}


def test_an_empty_output_keeps_an_empty_run_in_the_top_level_tree_too(tmp_path: Path) -> None:
    for side in ("ours", "theirs"):
        root = tmp_path / side
        root.mkdir()
        with OfficialDb.open(root, PATH, DbSettings()) as db:
            db.write([Put(b"k1", b"v")])
            db.flush_memtable()
            db.write([Delete(b"k1")])
            db.flush_memtable()
            if side == "theirs":
                OfficialAdmin(root, PATH).compact()
        if side == "ours":
            ours_compact(root, "l0")
        m = manifest(root)
        assert [(r.id, r.views) for r in m.compacted] == [(0, ())], side
        assert m.l0 == ()


def test_a_live_official_writer_keeps_our_segment_compaction(tmp_path: Path) -> None:
    """Our commit while an official writer (no compactor of its own) keeps flushing: its
    next manifest merges our segments (runs kept, compacted L0s gone by the cursor), and
    it reads everything back."""
    from tests.interop.official import Model

    root = tmp_path / "live"
    root.mkdir()
    model = Model()
    with OfficialDb.open(root, PATH, DbSettings(block_size=BLOCK, compactor=False),
                         model=model, segment_extractor=EX) as db:
        for r in range(3):
            db.write([Put(p + b"%03d" % i, b"%d" % r) for p in (b"aaa:", b"bbb:")
                      for i in range(0, 90, r + 1)])
            db.flush_memtable()
        report = ours_compact(root, "l0")  # while the writer is open
        db.write([Put(b"aaa:new", b"n"), Put(b"ccc:001", b"c"), Delete(b"bbb:000")])
        db.flush_memtable()  # the writer's manifest update must keep our runs
        assert db.scan() == model.items()
    m = manifest(root)
    shape_ = {s.prefix: (len(s.l0), [r.id for r in s.compacted]) for s in m.segments or ()}
    assert shape_ == {b"aaa:": (1, [0]), b"bbb:": (1, [1]), b"ccc:": (1, [])}, shape_
    assert [c["destination"] for c in report.to_dict()["compactions"]] == [0, 1]
    assert read_all(root, PATH, segment_extractor=EX) == model.items()
