"""Projections and unions of segmented databases (SlateDB RFC-0024), differential against
official 0.17 (docs/rfcs/0018-segments.md).

For the same sources at the same checkpoints, ``create_clone_from_sources`` writes the
manifests 1 and 2 the official clone builder writes, field by field apart from the new
final checkpoint ids: each segment projected (views clipped, segments left without views
dropped, a drain marker included, cursors kept), unions built per segment (ordered and
checked disjoint per segment, runs renumbered across segments, cursors reset). Both sides
read the same. Both refuse a union whose sources overlap inside one segment, or mix a
segmented source with an unsegmented one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from slatedb.uniffi import CompactionSpec, SourceId

from slatelib import DbReader, InvalidArgumentError
from slatelib.core.clone_plan import CloneSource as Source
from slatelib.core.manifest import Manifest
from slatelib.core.ranges import BytesRange
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.clone import create_clone_from_sources
from slatelib.store.manifest_store import ManifestStore
from tests.interop.official import (
    CloneSource,
    DbSettings,
    FixedPrefix,
    OfficialAdmin,
    OfficialDb,
    Put,
    clone,
    read_all,
    run,
)

pytestmark = pytest.mark.interop

EX = FixedPrefix(4)
Range = tuple[bytes | None, bytes | None]


def segmented_db(root: Path, path: str, spec: Sequence[tuple[bytes, int, int]], *,
                 drain: bytes | None = None) -> str:
    """Per ``(prefix, lo, hi)``: keys ``prefix + lo..hi-1``, two flushes, the oldest L0
    compacted into a run (official compactor), one L0 left; ``drain``: a segment drained
    (a drain marker, which the writer's next manifest prunes). Returns the id of a
    checkpoint taken last while the writer is open (after the drain: with the marker)."""
    with OfficialDb.open(root, path, DbSettings(compaction_max_sst_size=1024),
                         segment_extractor=EX) as db:
        for i in range(2):
            db.write([Put(p + b"%03d" % j, b"%s-%d-%d" % (path.encode(), i, j) * 8)
                      for p, lo, hi in spec for j in range(lo, hi)])
            db.flush_all()
        admin = OfficialAdmin(root, path)
        for p, _, _ in spec:
            admin.compact(segment=p, l0=1)
        if drain is not None:
            l0, runs = OfficialAdmin.tree(admin.manifest(), drain)
            c = run(admin.admin.submit_compaction(CompactionSpec.DRAIN_SEGMENT(
                segment=drain, sources=[SourceId.SST_VIEW(v.id) for v in l0]
                + [SourceId.SORTED_RUN(r.id) for r in runs])))
            while (got := run(admin.admin.read_compaction(c.id, None))) is None or got.active:
                time.sleep(0.05)
        checkpoint = admin.checkpoint().id
        db.close(flush=None)
    return checkpoint


@dataclass
class World:
    root: Path
    store: ObjectStore
    checkpoints: dict[str, str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("segclone")
    checkpoints = {
        "a": segmented_db(root, "a", [(b"aaa:", 0, 40), (b"ccc:", 0, 40), (b"ddd:", 0, 5),
                                      (b"eee:", 50, 90)], drain=b"ddd:"),
        "b": segmented_db(root, "b", [(b"bbb:", 0, 40), (b"eee:", 0, 60)])}
    with OfficialDb.open(root, "plain", DbSettings()) as db:
        db.write([Put(b"zzz:001", b"p")])
        db.flush_all()
    checkpoints["plain"] = OfficialAdmin(root, "plain").checkpoint().id
    return World(root, open_store(f"file://{root}"), checkpoints)


def without_finals(m: Manifest) -> Manifest:
    return replace(m, external_dbs=tuple(replace(e, final_checkpoint_id=None)
                                         for e in m.external_dbs))


def differential(w: World, name: str, sources: Sequence[tuple[str, Range | None]]) -> Manifest:
    clone(w.root, f"o_{name}", [CloneSource(p, w.checkpoints[p], *(rng or (None, None)))
                                for p, rng in sources])
    create_clone_from_sources(f"s_{name}", [
        Source(p, uuid.UUID(w.checkpoints[p]),
               None if rng is None else BytesRange.half_open(*rng)) for p, rng in sources],
        w.store)
    theirs, ours = ManifestStore(w.store, f"o_{name}"), ManifestStore(w.store, f"s_{name}")
    for mid in (1, 2):
        assert without_finals(ours.read(mid).value) == without_finals(theirs.read(mid).value), mid
    with DbReader.open(f"s_{name}", w.store, mode="latest") as r:
        mine = list(r.scan())
    assert read_all(w.root, f"o_{name}", segment_extractor=EX) == mine == \
        read_all(w.root, f"s_{name}", segment_extractor=EX)
    assert mine
    return ours.read_latest().value


def prefixes(m: Manifest) -> list[bytes]:
    return [s.prefix for s in m.segments or ()]


def test_a_full_clone_keeps_every_segment_and_the_drain_marker(world: World) -> None:
    m = differential(world, "full", [("a", None)])
    assert prefixes(m) == [b"aaa:", b"ccc:", b"ddd:", b"eee:"]


def test_projections_clip_each_segment_and_drop_empty_ones(world: World) -> None:
    m = differential(world, "proj", [("a", (b"aaa:020", b"ccc:010"))])
    assert prefixes(m) == [b"aaa:", b"ccc:"]  # the marker and eee: hold nothing in range
    assert all(s.last_compacted_l0_sst_view_id is not None for s in m.segments or ())
    differential(world, "proj_one", [("a", (b"eee:", None))])


def test_unions_are_built_per_segment(world: World) -> None:
    # a and b overlap as wholes ([aaa:, eee:089] and [bbb:, eee:049]) but in no segment
    m = differential(world, "ab", [("b", (None, b"eee:050")), ("a", None)])
    assert prefixes(m) == [b"aaa:", b"bbb:", b"ccc:", b"eee:"]
    ids = [r.id for s in m.segments or () for r in s.compacted]
    assert ids == sorted(ids, reverse=True) and set(ids) == set(range(len(ids)))
    assert all(s.last_compacted_l0_sst_view_id is None for s in m.segments or ())
    differential(world, "ab_proj", [("a", (b"ccc:", b"eee:070")), ("b", (b"eee:020", b"eee:050"))])


def test_overlap_inside_a_segment_and_mixed_extractors_are_refused_by_both(
        world: World) -> None:
    for name, sources in (("overlap", [("a", (b"eee:", None)), ("b", (b"eee:030", None))]),  # 050-059
                          ("mixed", [("a", None), ("plain", None)])):
        with pytest.raises(Exception, match="overlapping|disagree"):
            clone(world.root, f"o_{name}", [CloneSource(p, world.checkpoints[p],
                                                        *(rng or (None, None)))
                                            for p, rng in sources])
        with pytest.raises(InvalidArgumentError, match="overlapping key ranges in segment "
                                                       "'eee:'|disagree on the segment"):
            create_clone_from_sources(f"s_{name}", [
                Source(p, uuid.UUID(world.checkpoints[p]),
                       None if rng is None else BytesRange.half_open(*rng))
                for p, rng in sources], world.store)
        assert not (world.root / f"s_{name}").exists()  # ours wrote nothing
