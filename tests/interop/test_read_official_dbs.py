"""slatelib reads databases that the official 0.17.0 package writes in the test itself.

Seeded random workloads (the seed is in each test id): random binary keys with 0x00/0xFF
bytes and 1-byte keys, empty values, values longer than a block and than 64 KiB, every
codec and several block sizes, several L0s and sorted runs (compactions into different
destination runs, with and without an existing run among the sources), deletes,
overwrites, merge operands, TTL rows, WAL-only rows, and clones (full, projected, union of
two projected sources, clone of a clone). For each database, slatelib's full scan, range
scans with random bounds and gets of present and absent keys must equal the official
``DbReader``'s, and both must equal the :class:`~tests.interop.official.Model`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from slatedb.uniffi import FilterPolicy

from tests.interop.compare import assert_reads_match
from tests.interop.official import (
    CODECS,
    CloneSource,
    Concat,
    DbSettings,
    Delete,
    FixedPrefix,
    Merge,
    Model,
    OfficialAdmin,
    OfficialDb,
    Put,
    bloom_policy,
    clone,
)
from tests.interop.workload import (
    BIG_RUN_KEY,
    BIG_VALUE_LEN,
    BIG_WAL_KEY,
    EDGE_KEYS,
    absent_keys,
    key_pool,
    random_bounds,
    random_ops,
    write_layered,
)

pytestmark = pytest.mark.interop

BLOCK_SIZES = (1024, 4096, 65536)


def _url(root: Path) -> str:
    return f"file://{root}"


def _probe_keys(rng: random.Random, model: Model, extra: list[bytes] | None = None) -> list[bytes]:
    """Every key ever written (live, deleted, expired) plus absent ones."""
    written = model.keys() + (extra or [])
    return sorted(set(written) | set(absent_keys(rng, written, 40)) | set(EDGE_KEYS))


# ------------------------------------------------------------------ layered, every codec
@pytest.mark.parametrize("block_size", BLOCK_SIZES, ids=lambda b: f"block{b // 1024}k")
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_layered_db_of_every_codec_and_block_size_reads_like_official(
    tmp_path: Path, codec: str | None, block_size: int
) -> None:
    seed = CODECS.index(codec) * 10 + BLOCK_SIZES.index(block_size)
    rng = random.Random(seed)
    keys = key_pool(rng, 260)
    ttl_keys = [b"\x7fttl" + bytes([i]) for i in range(12)]
    model = Model()
    settings = DbSettings(codec=codec, block_size=block_size,
                          compaction_max_sst_size=max(8192, 2 * block_size))
    with OfficialDb.open(tmp_path, "db", settings, model=model, merge_operator=Concat()) as db:
        shape = write_layered(db, OfficialAdmin(tmp_path, "db"), rng, keys,
                              block_size=block_size, merges=True, ttl_keys=ttl_keys)
    # the official package did build the layout this test is about
    assert shape.l0_views == 2
    assert shape.sorted_runs == (6, 2)
    m = OfficialAdmin(tmp_path, "db").manifest()
    assert all(len(sr.sst_views) >= 2 for sr in m.compacted), "runs should span several SSTs"
    assert m.next_wal_sst_id - 1 > m.replay_after_wal_id, "WAL-only rows expected"
    assert len(model.live()[BIG_RUN_KEY]) > BIG_VALUE_LEN
    assert len(model.live()[BIG_WAL_KEY]) > BIG_VALUE_LEN
    assert b"" in model.live().values()
    # TTL: expired rows flushed to L0 read as deleted; expired rows still in the WAL and
    # rows expiring in 2100 read as live (0.17.0 applies TTL only when rewriting rows)
    half = len(ttl_keys) // 2
    assert model.expired == set(ttl_keys[:half:2])
    assert set(ttl_keys[1:half:2]) | set(ttl_keys[half:]) <= model.live().keys()

    probe = _probe_keys(rng, model, ttl_keys)
    assert_reads_match(
        tmp_path, _url(tmp_path), "db", probe, random_bounds(rng, probe, 25),
        expected=model.live(), merge_operator="concat",
        official_kwargs={"merge_operator": Concat()},
    )


# ------------------------------------------------------------------ special shapes
def test_wal_only_db_with_multi_block_wal_ssts_reads_like_official(tmp_path: Path) -> None:
    rng = random.Random(101)
    keys = key_pool(rng, 150)
    model = Model()
    with OfficialDb.open(tmp_path, "db", DbSettings(codec="Zstd"), model=model) as db:
        for n in range(4):
            ops = random_ops(rng, keys, 60, block_size=4096)
            if n == 1:  # two values of > 64 KiB: a WAL SST with several 64 KiB blocks
                ops += [Put(keys[0], rng.randbytes(BIG_VALUE_LEN)),
                        Put(keys[1], rng.randbytes(BIG_VALUE_LEN))]
            db.write(ops)
            db.flush_wal()
    m = OfficialAdmin(tmp_path, "db").manifest()
    assert not m.l0 and not m.compacted, "everything must still be in the WAL"
    probe = _probe_keys(rng, model)
    assert_reads_match(tmp_path, _url(tmp_path), "db", probe, random_bounds(rng, probe, 12),
                       expected=model.live())


def test_empty_db_reads_like_official(tmp_path: Path) -> None:
    OfficialDb.open(tmp_path, "db").close()
    reads = assert_reads_match(tmp_path, _url(tmp_path), "db", list(EDGE_KEYS),
                               [(None, None), (b"\x00", b"\xff")], expected={})
    assert reads.scan == []


def test_rewritten_key_in_every_layer_reads_newest_version(tmp_path: Path) -> None:
    """One key with a version in run 1, run 0, an L0 and the WAL, plus a tombstone over a
    run value and a merge chain across all layers: the newest version wins everywhere."""
    model = Model()
    k, d, m = b"\x00k", b"\xffdel", b"\x00\xffm"
    settings = DbSettings(block_size=1024)
    with OfficialDb.open(tmp_path, "db", settings, model=model, merge_operator=Concat()) as db:
        admin = OfficialAdmin(tmp_path, "db")
        db.write([Put(k, b"run0"), Put(d, b"in run 0"), Put(m, b"base")])
        db.flush_memtable()
        admin.compact(destination=0)
        db.write([Put(k, b"run1"), Merge(m, b"+1")])
        db.flush_memtable()
        admin.compact(destination=1)
        db.write([Put(k, b"l0"), Delete(d), Merge(m, b"+2")])
        db.flush_memtable()
        db.write([Put(k, b""), Merge(m, b"+3")])   # empty value in the WAL
        db.flush_wal()
    assert model.live() == {k: b"", m: b"base+1+2+3"}
    assert OfficialAdmin(tmp_path, "db").sorted_run_ids() == [1, 0]
    probe = [k, d, m, b"\x00", b"\xff"]
    assert_reads_match(tmp_path, _url(tmp_path), "db", probe, [(None, None), (b"\x00", b"\x01")],
                       expected=model.live(), merge_operator="concat",
                       official_kwargs={"merge_operator": Concat()})


def test_relative_ttls_and_caller_sequence_numbers_read_like_official(tmp_path: Path) -> None:
    """Rows with a relative TTL (EXPIRE_AFTER, live for a day) and batches written with
    caller-chosen sequence numbers far above the oracle's, across WAL, L0 and a run."""
    rng = random.Random(404)
    keys = key_pool(rng, 80)
    model = Model()
    with OfficialDb.open(tmp_path, "db", DbSettings(codec="Lz4"), model=model) as db:
        day = 86_400_000
        assert db.write([Put(k, rng.randbytes(9), ttl_ms=day) for k in keys[:40]]) >= 1
        assert db.write(random_ops(rng, keys, 50, block_size=4096), seqnum=1_000_000) == 1_000_000
        db.flush_memtable()
        OfficialAdmin(tmp_path, "db").compact(destination=0)
        assert db.write([Put(k, b"late", ttl_ms=day) for k in keys[30:50]],
                        seqnum=5_000_000_000) == 5_000_000_000
        db.flush_memtable()
        db.write(random_ops(rng, keys, 20, block_size=4096, deletes=0.5))
        db.flush_wal()
    assert OfficialAdmin(tmp_path, "db").manifest().last_l0_seq == 5_000_000_000
    probe = _probe_keys(rng, model)
    assert_reads_match(tmp_path, _url(tmp_path), "db", probe, random_bounds(rng, probe, 8),
                       expected=model.live())


FILTER_CASES: dict[str, Callable[[], list[FilterPolicy]]] = {
    "bloom16": lambda: [bloom_policy(16)],
    "bloom2": lambda: [bloom_policy(2)],
    "no_filters": lambda: [],
    "prefix_only": lambda: [bloom_policy(8, prefix=FixedPrefix(2), whole_keys=False)],
    "prefix_and_whole": lambda: [bloom_policy(12, prefix=FixedPrefix(1))],
    "two_policies": lambda: [bloom_policy(7, prefix=FixedPrefix(2), whole_keys=False),
                             bloom_policy(5)],
}


@pytest.mark.parametrize("case", sorted(FILTER_CASES))
def test_filter_policies_other_than_the_default_read_like_official(
    tmp_path: Path, case: str
) -> None:
    """Bloom filters with other bits per key, prefix filters (named ``_bf:p=...``), several
    policies in one composite block, or none: no point read may be answered wrongly."""
    rng = random.Random(500 + sorted(FILTER_CASES).index(case))
    keys = key_pool(rng, 300)
    model = Model()
    with OfficialDb.open(tmp_path, "db", DbSettings(block_size=1024), model=model,
                         filter_policies=FILTER_CASES[case]()) as db:
        for _ in range(2):
            db.write(random_ops(rng, keys, 200, block_size=1024))
            db.flush_memtable()
        OfficialAdmin(tmp_path, "db").compact(l0=1)
        db.write(random_ops(rng, keys, 50, block_size=1024))
        db.flush_wal()
    m = OfficialAdmin(tmp_path, "db").manifest()
    filters = {v.sst.info.filter_len > 0 for v in m.l0}
    assert filters == ({False} if case == "no_filters" else {True})
    probe = _probe_keys(rng, model)
    assert_reads_match(tmp_path, _url(tmp_path), "db", probe, random_bounds(rng, probe, 6),
                       expected=model.live(),
                       official_kwargs={"filter_policies": FILTER_CASES[case]()})


def test_segmented_db_with_sorted_runs_and_binary_keys_reads_like_official(
    tmp_path: Path,
) -> None:
    """Segments (SlateDB RFC-0024) keyed by the first byte, each with its own L0s and sorted runs
    (per-segment compactions, one of them including an existing run), plus WAL rows."""
    rng = random.Random(202)
    heads = (b"\x00", b"\x7f", b"\xff")
    keys = sorted({rng.choice(heads) + k for k in key_pool(rng, 150)})
    model = Model()
    with OfficialDb.open(tmp_path, "db", DbSettings(block_size=1024), model=model,
                         segment_extractor=FixedPrefix(1), merge_operator=Concat()) as db:
        admin = OfficialAdmin(tmp_path, "db")
        for _ in range(2):
            db.write(random_ops(rng, keys, 100, block_size=1024, merges=0.1))
            db.flush_memtable()
        for head in heads[:2]:
            admin.compact(segment=head)
        db.write(random_ops(rng, keys, 80, block_size=1024, merges=0.1))
        db.flush_memtable()
        admin.compact(segment=heads[0], l0=1, runs=1)
        db.write(random_ops(rng, keys, 40, block_size=1024, deletes=0.5))
        db.flush_wal()
    m = OfficialAdmin(tmp_path, "db").manifest()
    assert {s.prefix for s in m.segments} == set(heads) and not m.l0 and not m.compacted
    segs = {s.prefix: s for s in m.segments}
    assert len(segs[heads[0]].compacted) == 1 and not segs[heads[0]].l0
    assert len(segs[heads[1]].compacted) == 1 and len(segs[heads[1]].l0) == 1
    assert not segs[heads[2]].compacted and len(segs[heads[2]].l0) == 3
    probe = _probe_keys(rng, model)
    assert_reads_match(tmp_path, _url(tmp_path), "db", probe, random_bounds(rng, probe, 12),
                       expected=model.live(), merge_operator="concat",
                       official_kwargs={"segment_extractor": FixedPrefix(1),
                                        "merge_operator": Concat()})


# ------------------------------------------------------------------ clones
SPLIT = b"\x80"
"""Union clone: keys below come from ``src``, keys at or above from ``src2``."""
PROJ = (b"\x20", b"\xe0")
"""Projection of the projected clone."""


@dataclass
class CloneFamily:
    root: Path
    models: dict[str, Model]
    probe: list[bytes]
    bounds: list[tuple[bytes | None, bytes | None]]


@pytest.fixture(scope="module")
def clone_family(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CloneFamily]:
    """Databases side by side in one store root (clones reference their sources by path):

    - ``src``: layered (L0s, two runs, WAL-only rows), checkpoint ``cp1`` taken with data
      in the WAL; then more writes, flushed to L0, and checkpoint ``cp2`` with no data WAL;
    - ``full``: full clone of ``src@cp1`` (copies the WAL), then its own L0 and WAL rows;
    - ``proj``: clone of ``src@cp2`` projected to ``[0x20, 0xe0)``;
    - ``src2``: another database (an L0 and a run), checkpointed with no data WAL;
    - ``union``: union of ``src@cp2`` projected to ``[-, 0x80)`` and ``src2`` to ``[0x80, -)``;
    - ``cc``: full clone of ``full`` at a checkpoint (a clone of a clone).
    """
    root = tmp_path_factory.mktemp("clones")
    rng = random.Random(303)
    keys = key_pool(rng, 220)
    st = DbSettings(codec="Snappy", block_size=1024, compaction_max_sst_size=8192)
    concat = Concat()
    models: dict[str, Model] = {}

    src = Model()
    with OfficialDb.open(root, "src", st, model=src, merge_operator=concat) as db:
        write_layered(db, OfficialAdmin(root, "src"), rng, keys, block_size=1024, merges=True,
                      ttl_keys=[b"\x10ttl" + bytes([i]) for i in range(6)])
    cp1 = OfficialAdmin(root, "src").checkpoint("cp1")
    at_cp1 = src.copy()

    clone(root, "full", [CloneSource("src", cp1.id)])
    full = at_cp1.copy()
    with OfficialDb.open(root, "full", st, model=full, merge_operator=concat) as db:
        db.write(random_ops(rng, keys + [b"\x00own"], 80, block_size=1024, deletes=0.3))
        db.flush_memtable()
        db.write(random_ops(rng, keys, 30, block_size=1024, deletes=0.3))
        db.flush_wal()

    with OfficialDb.open(root, "src", st, model=src, merge_operator=concat) as db:
        db.write(random_ops(rng, keys, 80, block_size=1024))
        db.flush_all()
        db.close(flush=None)
    cp2 = OfficialAdmin(root, "src").checkpoint("cp2")
    at_cp2 = src.copy()
    with OfficialDb.open(root, "src", st, model=src, merge_operator=concat) as db:
        db.write(random_ops(rng, keys, 40, block_size=1024))   # after cp2: not in clones

    clone(root, "proj", [CloneSource("src", cp2.id, *PROJ)])

    src2 = Model()
    keys2 = key_pool(random.Random(304), 150)
    with OfficialDb.open(root, "src2", st, model=src2, merge_operator=concat) as db:
        db.write(random_ops(rng, keys2, 100, block_size=1024, deletes=0.0))
        db.flush_memtable()
        OfficialAdmin(root, "src2").compact(destination=0)
        db.write(random_ops(rng, keys2, 60, block_size=1024))
        db.flush_all()
        db.close(flush=None)
    cp3 = OfficialAdmin(root, "src2").checkpoint("cp3")
    clone(root, "union", [CloneSource("src", cp2.id, None, SPLIT),
                          CloneSource("src2", cp3.id, SPLIT, None)])

    cp4 = OfficialAdmin(root, "full").checkpoint("cp4")
    clone(root, "cc", [CloneSource("full", cp4.id)])

    models.update(
        src=src, src2=src2, full=full, cc=full.copy(),
        proj=at_cp2.projected(*PROJ),
        union=Model.union(at_cp2.projected(None, SPLIT), src2.projected(SPLIT, None)),
    )
    everything = sorted(set(keys) | set(keys2) | {b"\x00own"})
    probe = sorted(set(everything) | set(absent_keys(rng, everything, 50)) | set(EDGE_KEYS))
    yield CloneFamily(root, models, probe, random_bounds(rng, probe, 20))


@pytest.mark.parametrize("db", ["src", "src2", "full", "proj", "union", "cc"])
def test_clone_family_member_reads_like_official(clone_family: CloneFamily, db: str) -> None:
    fam = clone_family
    assert_reads_match(
        fam.root, _url(fam.root), db, fam.probe, fam.bounds,
        expected=fam.models[db].live(), merge_operator="concat",
        official_kwargs={"merge_operator": Concat()},
    )


def test_clone_family_has_the_shapes_under_test(clone_family: CloneFamily) -> None:
    """Guards the test above: each clone really is the kind it is named for."""
    root = clone_family.root
    full = OfficialAdmin(root, "full").manifest()
    assert [e.path for e in full.external_dbs] == ["src"]
    assert full.l0 and any(e.sst_ids for e in full.external_dbs)
    assert any((root / "full" / "wal").iterdir())
    proj = OfficialAdmin(root, "proj").manifest()
    views = list(proj.l0) + [v for sr in proj.compacted for v in sr.sst_views]
    assert views and all(v.visible_range is not None for v in views)
    union = OfficialAdmin(root, "union").manifest()
    assert sorted(e.path for e in union.external_dbs) == ["src", "src2"]
    cc = OfficialAdmin(root, "cc").manifest()
    assert {e.path for e in cc.external_dbs} == {"src", "full"}
    # the clones see the source as it was at their checkpoint, not its later writes
    models = clone_family.models
    assert models["src"].live() != models["full"].live()
    assert models["proj"].live() and all(PROJ[0] <= k < PROJ[1] for k in models["proj"].live())
    # src was written after cp2 inside the projection: a clone that leaked the source's
    # later state would fail the member test
    assert models["src"].projected(*PROJ).live() != models["proj"].live()
    assert models["src"].projected(None, SPLIT).live() != models["union"].projected(
        None, SPLIT).live()
