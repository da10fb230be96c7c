"""GC planning (slatelib.core.gc_plan): live set, references, clones, soft destroy."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace

from slatelib.core.gc_plan import (
    CompactionsState,
    DestroyState,
    LiveSet,
    build_rules,
    destroy_rules,
    destroy_verdict,
    own_referenced_ssts,
    plan_detach,
    referenced_ssts,
    remove_detached,
    without_expired_checkpoints,
)
from slatelib.core.gc_rules import Action, GcOptions, decide
from slatelib.core.gc_text import fmt_age, fmt_time
from slatelib.core.manifest import Checkpoint, ExternalDb, Manifest, Segment, SortedRun, SstView
from slatelib.ids import Ulid
from slatelib.paths import DbPaths
from tests.unit.gc_support import HOUR, checkpoint, manifest, ulid_at

NOW = 1_795_000_000_000
NOW_S = NOW // 1000


def ext(path: str, sst_ids: tuple[int, ...] = (), final: uuid.UUID | None = None) -> ExternalDb:
    return ExternalDb(path, uuid.uuid4(), final or uuid.uuid4(), tuple(sst_ids))  # type: ignore[arg-type]


def test_references_name_the_first_live_manifest_and_count_the_others() -> None:
    a, b, c = ulid_at(NOW - HOUR), ulid_at(NOW - HOUR), ulid_at(NOW - HOUR)
    cp = checkpoint(17, name="nightly")
    live = LiveSet(42, manifest(l0=[a], runs={3: [b]}, checkpoints=[cp]),
                   {17: manifest(l0=[a, c])})
    refs = referenced_ssts(live)
    assert refs[a] == "manifest 42 (latest) as L0 view (and 1 more live manifest)"
    assert refs[b] == "manifest 42 (latest) as sorted run 3"
    assert refs[c] == f"manifest 17 (checkpoint {str(cp.id)[:8]} 'nightly', no expiry) as L0 view"


def test_references_cover_segments() -> None:
    sid = ulid_at(NOW)
    m = replace(manifest(), segments=(Segment(b"inv:", None, (SstView.identity(sid),), ()),))
    assert referenced_ssts(LiveSet(5, m)) == {sid: "manifest 5 (latest) as segment 'inv:' L0 view"}


def _references_one_view_at_a_time(live: LiveSet) -> dict[int, str]:
    """The reference: every view of every live manifest in 0.17's order, one at a time."""
    def views(m: Manifest) -> list[tuple[SstView, str]]:
        out = [(v, "L0 view") for v in m.l0]
        out += [(v, f"sorted run {r.id}") for r in m.compacted for v in r.views]
        for seg in m.segments or ():
            name = seg.prefix.decode("ascii", "backslashreplace")
            out += [(v, f"segment {name!r} L0 view") for v in seg.l0]
            out += [(v, f"segment {name!r} sorted run {r.id}") for r in seg.compacted
                    for v in r.views]
        return out

    first: dict[int, str] = {}
    others: dict[int, int] = {}
    manifests = live.manifests()
    for mid in [live.latest_id, *sorted(i for i in live.pinned if i != live.latest_id)]:
        seen: set[int] = set()
        for view, where in views(manifests[mid]):
            if view.sst_id in seen:
                continue
            seen.add(view.sst_id)
            if view.sst_id in first:
                others[view.sst_id] = others.get(view.sst_id, 0) + 1
            else:
                first[view.sst_id] = f"{live.label(mid)} as {where}"
    for sid, n in others.items():
        first[sid] += f" (and {n} more live manifest{'s' if n > 1 else ''})"
    return first


def test_references_equal_walking_every_view_on_random_live_sets() -> None:
    """Same texts and the same key order as one step per view, with SSTs repeated inside a
    manifest (L0 and a run, two runs, segments) and across the latest and its checkpoints."""
    r = random.Random(11)
    for _ in range(300):
        pool = [ulid_at(NOW - HOUR, i) for i in range(r.randint(1, 12))]

        def some(pool: list[Ulid] = pool) -> list[int]:
            return [r.choice(pool) for _ in range(r.randint(0, 5))]

        def one(cps: list[Checkpoint]) -> Manifest:
            m = manifest(l0=some(), runs={i: some() for i in range(r.randint(0, 3))},
                         checkpoints=cps)
            segs = tuple(Segment(r.choice([b"a:", b"\xff"]), None,
                                 tuple(SstView.identity(Ulid(s)) for s in some()),
                                 (SortedRun(1, tuple(SstView.identity(Ulid(s)) for s in some())),))
                         for _ in range(r.randint(0, 2)))
            return replace(m, segments=segs or None)

        pinned_ids = r.sample(range(1, 9), r.randint(0, 3))
        cps = [checkpoint(i) for i in pinned_ids]
        live = LiveSet(9, one(cps), {i: one([]) for i in pinned_ids})
        got = referenced_ssts(live)
        want = _references_one_view_at_a_time(live)
        assert list(got.items()) == list(want.items())


def test_own_references_leave_out_external_ssts() -> None:
    mine, theirs = ulid_at(NOW), ulid_at(NOW)
    m = manifest(l0=[mine, theirs], external_dbs=[ext("parent", (theirs,))])
    assert own_referenced_ssts(LiveSet(3, m)) == {mine}


def test_wal_ranges_follow_the_latest_and_each_checkpoint_manifest() -> None:
    cp = checkpoint(17)
    live = LiveSet(42, manifest(l0=[ulid_at(NOW)], replay_after=20, last_seen=25,
                                checkpoints=[cp, checkpoint(42)]),
                   {17: manifest(replay_after=10, last_seen=14)})
    rules = build_rules("db", live, CompactionsState(), now_ms=NOW, options=GcOptions())
    assert [(r.start, r.end) for r in rules.wal_ranges] == [(20, None), (11, 15)]
    assert rules.live_summary == "latest 42, checkpoints 17"


def test_expired_checkpoints_are_those_at_or_past_their_expiry() -> None:
    gone, at_now, later, never = (checkpoint(1, expire_s=NOW_S - 1), checkpoint(2, expire_s=NOW_S),
                                  checkpoint(3, expire_s=NOW_S + 1), checkpoint(4))
    m, expired = without_expired_checkpoints(manifest(checkpoints=[gone, at_now, later, never]), NOW_S)
    assert [c.id for c in expired] == [gone.id, at_now.id]
    assert [c.id for c in m.checkpoints] == [later.id, never.id]


# ---------------------------------------------------------------------------- clones
def test_detach_candidates_need_empty_sst_ids_in_every_live_manifest() -> None:
    final = uuid.uuid4()
    done = ext("parent", (), final)
    cp = checkpoint(9)
    still_used = LiveSet(12, manifest(external_dbs=[done], checkpoints=[cp]),
                         {9: manifest(external_dbs=[ext("parent", (ulid_at(NOW),), final)])})
    assert plan_detach(still_used) == []
    free = LiveSet(12, manifest(external_dbs=[done, ext("other", (ulid_at(NOW),))]))
    assert plan_detach(free) == [done]
    no_final = LiveSet(12, manifest(external_dbs=[ExternalDb("p", uuid.uuid4(), None, ())]))
    assert plan_detach(no_final) == []


def test_removing_detached_entries_keeps_entries_that_gained_ssts() -> None:
    final = uuid.uuid4()
    m = manifest(external_dbs=[ext("a", (), final), ext("b", ())])
    out = remove_detached(m, {final})
    assert out is not None and [e.path for e in out.external_dbs] == ["b"]
    assert remove_detached(out, {final}) is None
    regrown = manifest(external_dbs=[ext("a", (ulid_at(NOW),), final)])
    assert remove_detached(regrown, {final}) is None


# --------------------------------------------------------------------------- destroy
def test_destroy_waits_for_the_grace_period_then_for_live_checkpoints() -> None:
    assert destroy_verdict(manifest(), NOW_S, 60).state is DestroyState.NOT_DESTROYED
    marked = manifest(destroyed_at_s=NOW_S - 100)
    v = destroy_verdict(marked, NOW_S, 100)
    assert v.state is DestroyState.PENDING and "grace period 1m40s" in v.reason
    live = replace(marked, checkpoints=(checkpoint(3, expire_s=NOW_S + 5), checkpoint(2, expire_s=NOW_S - 5)))
    v = destroy_verdict(live, NOW_S, 10)
    assert v.state is DestroyState.PENDING and "1 live checkpoint(s)" in v.reason
    v = destroy_verdict(replace(marked, checkpoints=live.checkpoints[1:]), NOW_S, 10)
    assert v.state is DestroyState.DUE
    assert v.reason == (f"database soft-destroyed at {fmt_time((NOW_S - 100) * 1000)}; grace 10s "
                        f"passed at {fmt_time((NOW_S - 90) * 1000)} and no live checkpoint remains")


def test_destroy_rules_delete_every_layout_object_and_keep_the_rest() -> None:
    m = manifest(destroyed_at_s=1)
    verdict = destroy_verdict(m, NOW_S, 0)
    rules = build_rules("t/db", LiveSet(4, m), CompactionsState(), now_ms=NOW, options=GcOptions(),
                        destroy=destroy_rules("t/db", 4, verdict))
    p = DbPaths.of("t/db")
    for path in (p.wal(1), p.compacted(ulid_at(NOW)), p.manifest(3), "t/db/gc/manifest.boundary",
                 "t/db/compacted/tmp.partial", "t/db/wal/x/y"):
        assert decide(rules, path, 1, NOW).action is Action.DELETE, path
    last = decide(rules, p.manifest(4), 1, NOW)
    assert last.action is Action.DELETE and last.reason.startswith("delete last: the latest manifest")
    for path in ("t/db/nested/manifest/00000000000000000001.manifest", "t/db/README"):
        assert decide(rules, path, 1, NOW).action is Action.KEEP, path


def test_ages_are_written_compactly() -> None:
    assert [fmt_age(ms) for ms in (200, 45_000, 300_000, 301_000, 7_380_000, 90_000_000, -2000)] == [
        "0.2s", "45s", "5m", "5m01s", "2h03m", "1d01h", "-2s"]
