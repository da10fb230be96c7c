"""The pure clone planner: projection, one-source clones and unions, as 0.17 writes them
(docs/rfcs/0007-projection-and-union-clones.md)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import replace

import pytest

from slatelib.core.clone_plan import (
    CloneSource,
    PinnedSource,
    bounding_range,
    owned_sst_ids,
    plan_clone,
    plan_single_clone,
    plan_union_clone,
    project,
    validate_sources,
    wants_empty_wal,
)
from slatelib.core.manifest import (
    EMPTY_SEQUENCE_TRACKER,
    ExternalDb,
    Manifest,
    Segment,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstView,
)
from slatelib.core.ranges import Bound, BytesRange
from slatelib.errors import (
    InvalidArgumentError,
    InvalidDbStateError,
)
from slatelib.ids import Ulid

R = BytesRange.half_open


def sst(n: int, first: bytes, last: bytes) -> SstHandle:
    info = SsTableInfo(first_entry=first, last_entry=last, index_offset=10, index_len=5,
                       filter_offset=10, filter_len=0)
    return SstHandle(Ulid(n), info, 2)


def db(l0: list[SstHandle], runs: list[tuple[int, list[SstHandle]]], **fields: object) -> Manifest:
    m = Manifest().with_trees(
        l0=[SstView.identity(h.id) for h in l0],
        compacted=[SortedRun(i, tuple(SstView.identity(h.id) for h in hs)) for i, hs in runs],
        new_ssts=[*l0, *(h for _, hs in runs for h in hs)])
    return replace(m, **fields)  # type: ignore[arg-type]


def incl(a: bytes, b: bytes) -> BytesRange:
    return BytesRange(Bound.included(a), Bound.included(b))


def counter() -> Callable[[], uuid.UUID]:
    ids = iter(range(1, 1000))
    return lambda: uuid.UUID(int=next(ids))


# ------------------------------------------------------------------------ projection
SRC = db([sst(10, b"k010", b"k089"), sst(11, b"k002", b"k093")],
         [(0, [sst(1, b"k000", b"k069"), sst(2, b"k070", b"k097")])],
         writer_epoch=3, compactor_epoch=2, last_l0_seq=5, replay_after_wal_id=6,
         wal_id_last_seen=6, last_compacted_l0_sst_view_id=Ulid(9))


def visible(m: Manifest) -> tuple[list[BytesRange | None], list[list[BytesRange | None]]]:
    return ([v.visible_range for v in m.l0],
            [[v.visible_range for v in r.views] for r in m.compacted])


def test_l0_views_are_clipped_to_their_data_and_runs_to_the_next_views_start() -> None:
    p = project(SRC, R(b"k050", b"k095"))
    assert visible(p) == (
        [incl(b"k050", b"k089"), incl(b"k050", b"k093")],  # end: the SST's last key, included
        [[R(b"k050", b"k070"), R(b"k070", b"k095")]],      # up to the next SST's first key
    )
    inside = project(SRC, R(b"k020", b"k060"))
    assert visible(inside) == ([R(b"k020", b"k060")] * 2, [[R(b"k020", b"k060")]])
    # everything else stays
    assert (p.writer_epoch, p.last_l0_seq, p.replay_after_wal_id) == (3, 5, 6)
    assert p.last_compacted_l0_sst_view_id == Ulid(9)


def test_views_without_keys_in_range_and_empty_runs_are_dropped() -> None:
    gap = project(SRC, R(b"k0695", b"k0699"))  # between the run's two SSTs
    assert [v.sst_id for v in gap.l0] == [Ulid(10), Ulid(11)] and gap.compacted == ()
    assert {h.id for h in gap.ssts} == {Ulid(10), Ulid(11)}
    high = project(SRC, R(b"k095", None))
    assert high.l0 == () and visible(high)[1] == [[incl(b"k095", b"k097")]]
    nothing = project(SRC, R(b"x", None))
    assert nothing.l0 == () and nothing.compacted == () and nothing.ssts == ()


def test_projecting_a_projection_narrows_it() -> None:
    twice = project(project(SRC, R(b"k050", b"k095")), R(b"k060", b"k080"))
    assert visible(twice) == ([R(b"k060", b"k080")] * 2,
                              [[R(b"k060", b"k070"), R(b"k070", b"k080")]])


def test_projection_prunes_external_sst_ids_and_drops_empty_entries() -> None:
    parent = replace(SRC, external_dbs=(
        ExternalDb("up", uuid.uuid4(), uuid.uuid4(), (Ulid(1), Ulid(2))),
        ExternalDb("old", uuid.uuid4(), uuid.uuid4(), (Ulid(2),))))
    p = project(parent, R(None, b"k005"))
    assert [(e.path, e.sst_ids) for e in p.external_dbs] == [("up", (Ulid(1),))]


@pytest.mark.parametrize("rng, why", [
    (R(b"k", b"k"), "is empty"),
    (BytesRange(Bound.excluded(b"a"), Bound.excluded(b"b")), "excluded key"),
])
def test_bad_projections_are_refused(rng: BytesRange, why: str) -> None:
    with pytest.raises(InvalidArgumentError, match=why):
        project(SRC, rng)


# -------------------------------------------------------------- segments (RFC-0024)
def segdb(trees: dict[bytes, tuple[list[SstHandle], list[tuple[int, list[SstHandle]]]]],
          cursors: dict[bytes, int] | None = None, **fields: object) -> Manifest:
    """A segmented manifest (extractor ``fixed4``): per prefix its L0 SSTs and runs."""
    segs, handles = [], []
    for prefix, (l0, runs) in sorted(trees.items()):
        handles += [*l0, *(h for _, hs in runs for h in hs)]
        cursor = (cursors or {}).get(prefix)
        segs.append(Segment(prefix, None if cursor is None else Ulid(cursor),
                            tuple(SstView.identity(h.id) for h in l0),
                            tuple(SortedRun(i, tuple(SstView.identity(h.id) for h in hs))
                                  for i, hs in runs)))
    m = replace(Manifest(), segments=tuple(segs), segment_extractor_name="fixed4",
                ssts=tuple(sorted(handles, key=lambda h: h.id)))
    return replace(m, **fields)  # type: ignore[arg-type]


SEG = segdb({b"aaa:": ([sst(20, b"aaa:000", b"aaa:009")], [(0, [sst(21, b"aaa:000", b"aaa:009")])]),
             b"bbb:": ([sst(22, b"bbb:000", b"bbb:009"), sst(23, b"bbb:000", b"bbb:009")], []),
             b"zzz:": ([], [])},
            cursors={b"aaa:": 7, b"zzz:": 8}, writer_epoch=2, last_l0_seq=9)


def test_projection_clips_each_segment_and_drops_segments_left_without_views() -> None:
    # 0.17 (docs/rfcs/0018-segments.md): each segment is projected like the top-level
    # tree, keeps its cursor; segments without views go, the drain marker zzz: included
    p = project(SEG, R(b"aaa:005", b"bbb:003"))
    assert [s.prefix for s in p.segments or ()] == [b"aaa:", b"bbb:"]
    a, b = p.segments or ()
    assert [v.visible_range for v in a.l0] == [incl(b"aaa:005", b"aaa:009")]
    assert [v.visible_range for v in a.compacted[0].views] == [incl(b"aaa:005", b"aaa:009")]
    assert [v.visible_range for v in b.l0] == [R(b"bbb:000", b"bbb:003")] * 2
    assert a.last_compacted_l0_sst_view_id == Ulid(7) and b.last_compacted_l0_sst_view_id is None
    assert p.segment_extractor_name == "fixed4" and p.writer_epoch == 2
    only_b = project(SEG, R(b"bbb:", None))
    assert [s.prefix for s in only_b.segments or ()] == [b"bbb:"]
    assert {h.id for h in only_b.ssts} == {Ulid(22), Ulid(23)}


def pinned(path: str, m: Manifest) -> PinnedSource:
    return PinnedSource(path, uuid.UUID(int=hash(path) & 0xFFFF), m)


def test_union_of_segmented_sources_is_built_per_segment_as_0_17_does() -> None:
    # the layout of the official union in docs/rfcs/0018-segments.md: A holds aaa:, ccc:
    # and eee:005-009, B bbb: and eee:000-004; their whole ranges overlap, no segment does
    a = segdb({b"aaa:": ([sst(30, b"aaa:0", b"aaa:4")], [(0, [sst(31, b"aaa:0", b"aaa:4")])]),
               b"ccc:": ([sst(32, b"ccc:0", b"ccc:4")], [(1, [sst(33, b"ccc:0", b"ccc:4")])]),
               b"eee:": ([sst(34, b"eee:5", b"eee:9")], [(2, [sst(35, b"eee:5", b"eee:9")])]),
               b"zzz:": ([], [])}, cursors={b"aaa:": 3, b"zzz:": 4}, last_l0_seq=5)
    b = segdb({b"bbb:": ([sst(40, b"bbb:0", b"bbb:4")], [(0, [sst(41, b"bbb:0", b"bbb:4")])]),
               b"eee:": ([sst(42, b"eee:0", b"eee:4")], [(1, [sst(43, b"eee:0", b"eee:4")])])},
              last_l0_seq=7)
    for order in ([a, b], [b, a]):
        u = plan_union_clone([pinned(n, m) for n, m in zip("AB" if order[0] is a else "BA",
                                                             order, strict=True)],
                             new_id=counter())
        got = [(s.prefix, [v.sst_id for v in s.l0], [(r.id, [v.sst_id for v in r.views])
                                                      for r in s.compacted],
                s.last_compacted_l0_sst_view_id) for s in u.segments or ()]
        assert got == [
            (b"aaa:", [30], [(4, [31])], None),
            (b"bbb:", [40], [(3, [41])], None),
            (b"ccc:", [32], [(2, [33])], None),
            (b"eee:", [42, 34], [(1, [43]), (0, [35])], None),  # B's eee: data comes first
        ]
        assert u.segment_extractor_name == "fixed4" and u.l0 == () and u.compacted == ()
        assert u.last_l0_seq == 7 and not u.initialized
        assert u.referenced_sst_ids() == {h.id for h in u.ssts}


def test_union_refuses_overlap_within_a_segment_and_mixed_extractors() -> None:
    a = segdb({b"bbb:": ([sst(50, b"bbb:0", b"bbb:9")], [])})
    b = segdb({b"bbb:": ([sst(51, b"bbb:5", b"bbb:7")], [])})
    with pytest.raises(InvalidArgumentError, match="in segment 'bbb:'"):
        plan_union_clone([pinned("A", a), pinned("B", b)])
    plain = db([sst(52, b"zz", b"zz")], [])
    with pytest.raises(InvalidArgumentError, match="disagree on the segment extractor"):
        plan_union_clone([pinned("A", a), pinned("P", plain)])
    nested = segdb({b"bb": ([sst(53, b"bb0", b"bb1")], [])})
    with pytest.raises(InvalidArgumentError, match="antichain"):
        plan_union_clone([pinned("A", a), pinned("N", nested)])


# ---------------------------------------------------------------------- single source
def test_one_source_keeps_its_epochs_and_always_names_itself() -> None:
    grand = ExternalDb("g", uuid.uuid4(), uuid.uuid4(), (Ulid(1),))
    empty = ExternalDb("e", uuid.uuid4(), uuid.uuid4(), ())
    src = replace(SRC, external_dbs=(empty, grand), checkpoints=())
    cp = uuid.uuid4()
    m = plan_single_clone(src, "src", cp, new_id=counter())
    assert m.initialized is False and (m.writer_epoch, m.compactor_epoch) == (3, 2)
    assert m.external_dbs == (
        ExternalDb("g", grand.final_checkpoint_id, uuid.UUID(int=1), (Ulid(1),)),  # type: ignore[arg-type]
        ExternalDb("src", cp, uuid.UUID(int=2), (Ulid(10), Ulid(11), Ulid(2))),
    )
    nothing = plan_clone([PinnedSource("src", cp, SRC, R(b"x", None))])
    assert nothing.external_dbs[-1].path == "src" and nothing.external_dbs[-1].sst_ids == ()


def test_an_inherited_entry_without_a_final_checkpoint_is_refused() -> None:
    src = replace(SRC, external_dbs=(ExternalDb("g", uuid.uuid4(), None, (Ulid(1),)),))
    with pytest.raises(InvalidDbStateError, match="no final checkpoint"):
        plan_single_clone(src, "src", uuid.uuid4())


# ------------------------------------------------------------------------------ union
A = db([sst(20, b"a1", b"a9")], [(4, [sst(21, b"a0", b"a5")]), (2, [sst(22, b"a0", b"a9")])],
       last_l0_seq=9, last_l0_clock_tick=100, writer_epoch=7, replay_after_wal_id=3,
       wal_id_last_seen=3, recent_snapshot_min_seq=8, sequence_tracker=b"x" * 29)
B = db([sst(30, b"b1", b"b9")], [(0, [sst(31, b"b0", b"b9")])], last_l0_seq=4,
       last_l0_clock_tick=300)


def test_a_union_is_a_fresh_database_of_the_sources_in_key_order() -> None:
    ca, cb = uuid.UUID(int=100), uuid.UUID(int=200)
    m = plan_union_clone([PinnedSource("b", cb, B), PinnedSource("a", ca, A)],
                         new_id=counter())
    assert [v.sst_id for v in m.l0] == [Ulid(20), Ulid(30)]
    assert [(r.id, r.views[0].sst_id) for r in m.compacted] == [
        (2, Ulid(21)), (1, Ulid(22)), (0, Ulid(31))]  # renumbered n-1 .. 0 in key order
    assert (m.last_l0_seq, m.last_l0_clock_tick) == (9, 300)  # the largest of each
    assert (m.writer_epoch, m.compactor_epoch, m.replay_after_wal_id, m.wal_id_last_seen) == (
        0, 0, 0, 0)
    assert m.recent_snapshot_min_seq == 0 and m.sequence_tracker == EMPTY_SEQUENCE_TRACKER
    assert m.last_compacted_l0_sst_view_id is None and m.initialized is False
    assert [h.id for h in m.ssts] == sorted(h.id for h in m.ssts)
    assert [(e.path, e.source_checkpoint_id, e.sst_ids) for e in m.external_dbs] == [
        ("a", ca, (Ulid(20), Ulid(21), Ulid(22))), ("b", cb, (Ulid(30), Ulid(31)))]


def test_sources_without_data_count_for_seq_and_tick_but_get_no_entry() -> None:
    empty = Manifest(last_l0_seq=50, last_l0_clock_tick=999)
    m = plan_clone([PinnedSource("a", uuid.uuid4(), A), PinnedSource("e", uuid.uuid4(), empty)])
    assert (m.last_l0_seq, m.last_l0_clock_tick) == (50, 999)
    assert [e.path for e in m.external_dbs] == ["a"]


def test_adjacent_ranges_unite_and_overlapping_data_is_refused() -> None:
    # two shards of one database: every SST lives in "src"
    shared = replace(SRC, external_dbs=(ExternalDb("src", uuid.uuid4(), uuid.uuid4(), tuple(
        h.id for h in SRC.ssts)),))
    src = PinnedSource("s", uuid.uuid4(), shared)
    other = PinnedSource("t", uuid.uuid4(), shared)
    ok = plan_clone([replace(src, projection=R(b"k000", b"k040")),
                     replace(other, projection=R(b"k040", b"k080"))])
    assert len(ok.l0) == 4
    with pytest.raises(InvalidArgumentError, match="overlapping key ranges"):
        plan_clone([replace(src, projection=R(b"k000", b"k050")),
                    replace(other, projection=R(b"k040", b"k080"))])
    with pytest.raises(InvalidArgumentError, match="overlapping"):
        plan_clone([src, other])
    # projections overlap, but one source has no data there: 0.17 accepts it
    assert plan_clone([replace(src, projection=R(b"k000", b"k050")),
                       PinnedSource("b", uuid.uuid4(), B, R(b"a", b"c"))]).l0


def test_entries_of_one_ancestor_merge_by_path_and_sst_ids() -> None:
    up = uuid.UUID(int=5)
    shard = replace(SRC, external_dbs=(ExternalDb("src", uuid.uuid4(), up, (
        Ulid(10), Ulid(11), Ulid(1), Ulid(2))),))
    lo = PinnedSource("lo", uuid.uuid4(), shard, R(b"k010", b"k030"))
    hi = PinnedSource("hi", uuid.uuid4(), replace(shard, external_dbs=(
        ExternalDb("src", uuid.uuid4(), uuid.UUID(int=4), (Ulid(10), Ulid(11), Ulid(1), Ulid(2))),
    )), R(b"k050", b"k060"))
    m = plan_clone([hi, lo])
    # both kept SSTs 1, 10, 11 of "src": one entry, the smaller source checkpoint
    assert [(e.path, e.source_checkpoint_id, e.sst_ids) for e in m.external_dbs] == [
        ("src", uuid.UUID(int=4), (Ulid(1), Ulid(10), Ulid(11)))]


def test_the_checkpoint_a_source_was_cloned_from_wins_a_merge() -> None:
    mine = uuid.UUID(int=900)
    direct = PinnedSource("src", mine, SRC, R(None, b"k050"))
    shard = replace(SRC, external_dbs=(
        ExternalDb("src", uuid.uuid4(), uuid.UUID(int=1), (Ulid(10), Ulid(11), Ulid(1), Ulid(2))),))
    # both keep SSTs 1, 10 and 11 of "src"; the smaller id (1) loses to the source's own
    m = plan_clone([direct, PinnedSource("shard", uuid.uuid4(), shard, R(b"k050", b"k060"))])
    assert [(e.path, e.source_checkpoint_id) for e in m.external_dbs] == [("src", mine)]


def test_one_sst_id_in_two_databases_is_refused() -> None:
    clash = db([sst(20, b"z1", b"z2")], [])
    with pytest.raises(InvalidDbStateError, match="stored under both"):
        plan_clone([PinnedSource("a", uuid.uuid4(), A), PinnedSource("z", uuid.uuid4(), clash)])


def test_bounding_range_covers_every_view() -> None:
    assert bounding_range(SRC) == incl(b"k000", b"k097")
    assert bounding_range(Manifest()) is None


# ------------------------------------------------------------------------- validation
def test_sources_are_normalized_and_checked() -> None:
    assert validate_sources("c", [CloneSource("a/"), CloneSource("b")]) == (
        CloneSource("a"), CloneSource("b"))
    for bad, why in [
        ([], "at least one source"),
        ([CloneSource("c/")], "onto itself"),
        ([CloneSource("c/inner")], "inside the clone"),
        ([CloneSource("a"), CloneSource("a/")], "given twice"),
        ([CloneSource("../a")], r"\.\."),
        ([CloneSource("a", projection=R(b"b", b"a"))], "is empty"),
    ]:
        with pytest.raises(InvalidArgumentError, match=why):
            validate_sources("c", bad)


def test_only_projection_and_union_need_an_empty_wal() -> None:
    assert not wants_empty_wal([CloneSource("a")])
    assert wants_empty_wal([CloneSource("a", projection=R(None, None))])
    assert wants_empty_wal([CloneSource("a"), CloneSource("b")])


def _owned_definition(m: Manifest) -> tuple[Ulid, ...]:
    external = {s for e in m.external_dbs for s in e.sst_ids}
    seen: dict[Ulid, None] = {}
    for v in m.all_views():
        if v.sst_id not in external:
            seen.setdefault(v.sst_id, None)
    return tuple(seen)


def test_owned_sst_ids_equals_the_per_view_definition_and_follows_every_change() -> None:
    r = random.Random(3)

    def views() -> tuple[SstView, ...]:
        return tuple(SstView(Ulid(r.randrange(1, 10**6)), Ulid(r.randrange(1, 30)))
                     for _ in range(r.randint(0, 8)))

    for _ in range(200):
        m = Manifest(
            l0=views(), compacted=tuple(SortedRun(i, views()) for i in range(r.randint(0, 3))),
            segments=tuple(Segment(b"p%d" % i, None, views(), (SortedRun(0, views()),))
                           for i in range(r.randint(0, 2))),
            external_dbs=tuple(ExternalDb(f"e{i}", uuid.uuid4(), None, tuple(
                Ulid(r.randrange(1, 30)) for _ in range(r.randint(0, 6))))
                for i in range(r.randint(0, 2))))
        expected = _owned_definition(m)
        assert owned_sst_ids(m) == expected
        assert owned_sst_ids(replace(m, checkpoints=())) == expected  # same trees: memo
        fewer = replace(m, external_dbs=m.external_dbs[1:])  # another tree: recomputed
        assert owned_sst_ids(fewer) == _owned_definition(fewer)
        more = replace(m, l0=(*m.l0, SstView(Ulid(1), Ulid(10**6))))
        assert owned_sst_ids(more) == _owned_definition(more)
