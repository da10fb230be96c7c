"""Projected and union clones, differential against official 0.17.0
(docs/rfcs/0007-projection-and-union-clones.md).

For the same sources at the same checkpoints, ``slatelib.create_clone_from_sources`` writes
the manifests (1: uninitialized, 2: initialized) that the official clone builder writes,
field by field, apart from the new final checkpoint ids; both add the same final
checkpoints to the sources. Each side reads the other's clones (exactly the projected
keys), and the official writer reopens our clones and writes to them. Both refuse
overlapping ranges and sources with data in the WAL; ours writes nothing then.

The sources are official databases with several L0 SSTs and a sorted run of several SSTs
(official compactor), all flushed to L0 (no data WAL).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from slatelib import DbReader, InvalidArgumentError, InvalidDbStateError
from slatelib.core.clone_plan import CloneSource as Source
from slatelib.core.manifest import Manifest
from slatelib.core.ranges import BytesRange
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.clone import EPHEMERAL_CHECKPOINT_LIFETIME_S, create_clone_from_sources
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
from tests.unit.store_snapshot import snapshot

pytestmark = pytest.mark.interop

Range = tuple[bytes | None, bytes | None]
WHOLE: Range = (None, None)


def official_db(root: Path, path: str, prefix: bytes, seed: int) -> Model:
    """Three L0 flushes, compacted into a run of several SSTs, then two more L0 SSTs."""
    rng = random.Random(seed)
    model = Model()

    def batch(tag: bytes, n: int) -> list[Put]:
        return [Put(prefix + b"k%03d" % rng.randrange(100), tag * 30) for _ in range(n)]

    with OfficialDb.open(root, path, DbSettings(compaction_max_sst_size=1024), model=model) as db:
        for i in range(3):
            db.write(batch(b"v%d" % i, 40))
            db.flush_all()
        OfficialAdmin(root, path).compact()
        for i in range(2):
            db.write(batch(b"w%d" % i, 20))
            db.flush_all()
        db.close(flush="memtable")
    return model


@dataclass
class World:
    root: Path
    store: ObjectStore
    models: dict[str, Model]
    checkpoints: dict[str, str]

    def model(self, path: str, rng: Range = WHOLE) -> Model:
        return self.models[path].projected(*rng)


SHARDS = {"lo": (None, b"k040"), "mid": (b"k040", b"k080"), "hi": (b"k080", None)}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("union")
    models = {"src": official_db(root, "src", b"", 1), "z": official_db(root, "z", b"z", 2)}
    for name, rng in SHARDS.items():  # projected clones of src, made by 0.17
        clone(root, name, [CloneSource("src", start=rng[0], end=rng[1])])
        models[name] = models["src"].projected(*rng)
    m = ManifestStore(open_store(f"file://{root}"), "src").read_latest().value
    assert len(m.l0) >= 2 and any(len(r.views) >= 2 for r in m.compacted)
    checkpoints = {p: OfficialAdmin(root, p).checkpoint().id for p in models}
    return World(root, open_store(f"file://{root}"), models, checkpoints)


def without_finals(m: Manifest) -> Manifest:
    return replace(m, external_dbs=tuple(replace(e, final_checkpoint_id=None)
                                         for e in m.external_dbs))


def check_final_checkpoints(w: World, path: str) -> None:
    """Every external database of ``path`` holds its final checkpoint, never expiring and
    pinning the manifest of the entry's source checkpoint."""
    for e in ManifestStore(w.store, path).read_latest().value.external_dbs:
        owner = ManifestStore(w.store, e.path).read_latest().value
        final, source = owner.checkpoint(e.final_checkpoint_id), owner.checkpoint(  # type: ignore[arg-type]
            e.source_checkpoint_id)
        assert final is not None and final.expire_time_s is None, (path, e.path)
        assert source is not None and final.manifest_id == source.manifest_id


def ours_read(w: World, path: str) -> dict[bytes, bytes]:
    with DbReader.open(path, w.store, mode="latest") as r:
        return dict(r.scan())


def differential(w: World, name: str, sources: Sequence[tuple[str, Range | None]]) -> Model:
    """Clone ``sources`` (path, range or None) both ways at the same checkpoints into
    ``o_<name>`` (0.17) and ``s_<name>`` (slatelib), compare, cross-read; the model."""
    clone(w.root, f"o_{name}", [
        CloneSource(p, w.checkpoints[p], *(rng or WHOLE)) for p, rng in sources])
    report = create_clone_from_sources(f"s_{name}", [
        Source(p, uuid.UUID(w.checkpoints[p]), None if rng is None else BytesRange.half_open(*rng))
        for p, rng in sources], w.store)
    assert report.created
    theirs, ours = ManifestStore(w.store, f"o_{name}"), ManifestStore(w.store, f"s_{name}")
    for mid in (1, 2):
        assert without_finals(ours.read(mid).value) == without_finals(theirs.read(mid).value), mid
    assert ours.read_latest().id == theirs.read_latest().id == 2
    model = Model.union(*(w.model(p, rng or WHOLE) for p, rng in sources))
    for path in (f"o_{name}", f"s_{name}"):
        check_final_checkpoints(w, path)
        assert dict(read_all(w.root, path)) == model.live() == ours_read(w, path), path
    return model


def reopened_by_the_official_writer(w: World, name: str, model: Model) -> None:
    with OfficialDb.open(w.root, f"s_{name}", DbSettings()) as db:
        db.write([Put(b"new-" + name.encode(), b"n")])
        db.flush_memtable()
    expected = {**model.live(), b"new-" + name.encode(): b"n"}
    assert ours_read(w, f"s_{name}") == expected == dict(read_all(w.root, f"s_{name}"))


def test_a_single_projected_source(world: World) -> None:
    model = differential(world, "one", [("src", (b"k020", b"k060"))])
    assert model.live() and all(b"k020" <= k < b"k060" for k in model.live())
    reopened_by_the_official_writer(world, "one", model)
    differential(world, "gap", [("src", (b"k0695", b"k0699"))])  # may fall between two SSTs
    differential(world, "tail", [("src", (b"k090", None))])


def test_unions_of_two_and_three_projected_sources(world: World) -> None:
    model = differential(world, "two", [("mid", (b"k050", b"k060")), ("lo", (b"k010", b"k030"))])
    assert model.live() and all(b"k010" <= k < b"k030" or b"k050" <= k < b"k060"
                                for k in model.live())
    reopened_by_the_official_writer(world, "two", model)
    differential(world, "three", [("hi", (b"k085", None)), ("lo", (None, b"k030")),
                                  ("mid", (b"k045", b"k075"))])


def test_a_union_of_adjacent_ranges(world: World) -> None:
    model = differential(world, "adjacent", [("lo", (b"k010", b"k040")), ("mid", (b"k040", b"k060"))])
    assert model.live() == world.model("src", (b"k010", b"k060")).live()
    differential(world, "whole", [("mid", None), ("hi", None), ("lo", None)])


def test_a_union_of_two_databases(world: World) -> None:
    model = differential(world, "dbs", [("z", None), ("src", None)])
    assert model.live()
    reopened_by_the_official_writer(world, "dbs", model)


def test_a_projection_of_a_clone(world: World) -> None:
    nested = differential(world, "nested", [("mid", (b"k060", b"k075"))])
    assert nested.live() and all(b"k060" <= k < b"k075" for k in nested.live())
    differential(world, "nested_empty", [("mid", (b"k000", b"k010"))])  # keeps no SST
    differential(world, "mixed", [("src", (None, b"k050")), ("mid", (b"k050", None))])


def test_ephemeral_source_checkpoints(world: World) -> None:
    clone(world.root, "o_eph", [CloneSource("z"), CloneSource("src", start=b"k030")])
    create_clone_from_sources("s_eph", [
        Source("z"), Source("src", projection=BytesRange.half_open(b"k030", None))], world.store)

    def shape(m: Manifest) -> Manifest:
        return replace(m, external_dbs=tuple(replace(e, final_checkpoint_id=None,
                                                     source_checkpoint_id=uuid.UUID(int=0))
                                             for e in m.external_dbs))

    ours = ManifestStore(world.store, "s_eph").read_latest().value
    theirs = ManifestStore(world.store, "o_eph").read_latest().value
    assert shape(ours) == shape(theirs)
    for e in ours.external_dbs:
        cp = ManifestStore(world.store, e.path).read_latest().value.checkpoint(e.source_checkpoint_id)
        assert cp is not None and cp.expire_time_s == cp.create_time_s + EPHEMERAL_CHECKPOINT_LIFETIME_S
    check_final_checkpoints(world, "s_eph")


def test_overlapping_ranges_are_refused_by_both(world: World) -> None:
    before = snapshot(world.store)
    cp = world.checkpoints
    with pytest.raises(Exception, match="overlapping key ranges"):
        clone(world.root, "o_overlap", [CloneSource("src", cp["src"], None, b"k050"),
                                        CloneSource("mid", cp["mid"])])
    with pytest.raises(InvalidArgumentError, match="overlapping key ranges"):
        create_clone_from_sources("s_overlap", [
            Source("src", uuid.UUID(cp["src"]), BytesRange.half_open(None, b"k050")),
            Source("mid", uuid.UUID(cp["mid"]))], world.store)
    assert snapshot(world.store) == before


def test_sources_with_data_in_the_wal_are_refused_by_both(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    official_db(tmp_path, "a", b"a", 3)
    with OfficialDb.open(tmp_path, "w", DbSettings()) as db:
        db.write([Put(b"x1", b"1")])
        db.flush_all()
        db.write([Put(b"x2", b"2")])  # only in the WAL
        db.flush_wal()
        db.close(flush=None)
    cps = {p: OfficialAdmin(tmp_path, p).checkpoint().id for p in ("a", "w")}
    m = ManifestStore(store, "w").read_latest().value
    for sources in ([("w", (b"x", None))], [("a", None), ("w", None)]):
        before = snapshot(store)
        with pytest.raises(Exception, match="Projection and/or union with WAL is not supported"):
            clone(tmp_path, "o", [CloneSource(p, cps[p], *(r or WHOLE)) for p, r in sources])
        with pytest.raises(InvalidDbStateError, match=(
                rf"'w' has data in WAL SSTs \[{m.wal_id_last_seen}\]")):
            create_clone_from_sources("s", [
                Source(p, uuid.UUID(cps[p]), None if r is None else BytesRange.half_open(*r))
                for p, r in sources], store)
        assert snapshot(store) == before
    with OfficialReader.open(tmp_path, "w") as r:  # the WAL row is there, just not flushed
        assert r.get(b"x2") == b"2"
