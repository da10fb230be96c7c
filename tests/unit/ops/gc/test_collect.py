"""collect_garbage on a memory store: what goes, what stays, dry runs, boundaries, refusals."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from slatelib.clock import SYSTEM_CLOCK
from slatelib.core.compactions import CompactionStatus
from slatelib.errors import (
    CorruptObjectError,
    InvalidArgumentError,
    ManifestMissingError,
    StorageError,
)
from slatelib.objstore import ObjectMeta, ObjectStore, open_store
from slatelib.ops.gc import collect_garbage
from slatelib.ops.gc.state import advance_boundary
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.faulty import FlakyObjectStore
from tests.unit.gc_support import (
    HOUR,
    DbWriter,
    HookedStore,
    checkpoint,
    compactions,
    manifest,
    ulid_at,
)

ROOT = "t/db"


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://gc{uuid.uuid4().hex[:12]}/")


class Basic:
    """manifests 1..5 (5 latest: L0 a, run r, replay_after 8), WAL 1..10 (3 a fence),
    compactions 1..3 (a completed compaction at t0 - 2h), garbage SSTs g1, g2 (t0 - 3h)."""

    def __init__(self, store: ObjectStore, root: str = ROOT) -> None:
        self.t0 = SYSTEM_CLOCK.now_ms()
        t0 = self.t0
        self.w = w = DbWriter(store, root)
        self.a, self.r = ulid_at(t0 - HOUR), ulid_at(t0 - 150 * 60_000)
        self.g1, self.g2 = ulid_at(t0 - 3 * HOUR), ulid_at(t0 - 3 * HOUR)
        for sid in (self.a, self.r, self.g1, self.g2):
            w.sst(sid)
        for cid in (1, 2, 3):
            w.compactions(cid, compactions((ulid_at(t0 - 2 * HOUR), CompactionStatus.COMPLETED)))
        for wid in range(1, 11):
            w.wal(wid, 0 if wid == 3 else 10)
        self.latest = manifest(l0=[self.a], runs={0: [self.r]}, replay_after=8, last_seen=10)
        w.manifests_upto(5, self.latest)

    @property
    def later_s(self) -> float:
        return (self.t0 + HOUR) / 1000

    def survivors(self) -> set[str]:
        p = self.w.paths
        return ({p.manifest(5), p.compactions(3), p.compacted(self.a), p.compacted(self.r)}
                | {p.wal(i) for i in (3, 8, 9, 10)})


def gc(store: ObjectStore, *, root: str = ROOT, dry_run: bool = False, **kw: object):  # type: ignore[no-untyped-def]
    kw.setdefault("min_age", 300)
    return collect_garbage(root, store, dry_run=dry_run, **kw)  # type: ignore[arg-type]


def test_gc_deletes_exactly_what_0_17_would(store: ObjectStore) -> None:
    db = Basic(store)
    report = gc(store, now=db.later_s)
    p = db.w.paths
    assert db.w.listing() == db.survivors() | {p.manifest_boundary, p.compactions_boundary}
    assert store.get(p.manifest_boundary) == b"4" and store.get(p.compactions_boundary) == b"2"
    kinds = report.to_json()["kinds"]
    assert {k: (v["deleted"], v["kept"]) for k, v in kinds.items()} == {
        "manifest": (4, 1), "compactions": (2, 1), "wal": (6, 3), "wal_fence": (0, 1),
        "compacted": (2, 2)}
    assert report.boundaries == {"manifest": {"before": 0, "after": 4},
                                 "compactions": {"before": 0, "after": 2}}
    assert report.error_count == 0 and report.refused == []
    assert set(report.phases_s) >= {"read_state", "list_and_plan", "delete_wal", "delete_compacted"}


def test_dry_run_writes_nothing_and_predicts_the_real_run(store: ObjectStore) -> None:
    db = Basic(store)
    flaky = FlakyObjectStore(store)
    before = db.w.listing()
    dry = gc(flaky, dry_run=True, now=db.later_s)
    assert db.w.listing() == before
    assert {op: flaky.calls[op] for op in ("put", "put_if_absent", "put_if_match", "delete",
                                           "delete_many")} == dict.fromkeys(
        ("put", "put_if_absent", "put_if_match", "delete", "delete_many"), 0)
    predicted = {d.path for d in dry.decisions if d.deletes}
    assert len(dry.decisions) == len(before)
    assert all(d.reason.startswith(("kept: ", "delete: ")) for d in dry.decisions)
    gc(store, now=db.later_s)
    assert before - db.w.listing() == predicted


def test_objects_younger_than_min_age_stay(store: ObjectStore) -> None:
    db = Basic(store)
    before = db.w.listing()
    report = gc(store, now=(db.t0 + 60_000) / 1000)
    assert db.w.listing() == before
    assert report.to_json()["totals"]["deleted"] == 0


def test_expired_checkpoints_are_removed_and_stop_pinning(store: ObjectStore) -> None:
    db = Basic(store)
    expired = checkpoint(2, expire_s=db.t0 // 1000 - 10)
    live = checkpoint(3, expire_s=db.t0 // 1000 + 10 * 3600, name="keep")
    db.w.manifest(6, replace(db.latest, checkpoints=(expired, live)))
    dry = gc(store, dry_run=True, now=db.later_s)
    assert dry.expired_checkpoints == [f"would remove {expired.id}"]
    report = gc(store, now=db.later_s)
    assert report.expired_checkpoints == [str(expired.id)]
    latest = ManifestStore(store, ROOT).read_latest()
    assert latest.id == 7 and [c.id for c in latest.value.checkpoints] == [live.id]
    left = {m.path.rsplit("/", 1)[1] for m in store.list(f"{ROOT}/manifest")}
    assert left == {"00000000000000000003.manifest", "00000000000000000007.manifest"}
    assert ({d.path for d in dry.decisions if d.deletes}
            == {d.path for d in report.decisions if d.deletes})


def test_boundary_is_only_ever_raised(store: ObjectStore) -> None:
    db = Basic(store)
    store.put(db.w.paths.manifest_boundary, b"4")
    report = gc(store, now=db.later_s)
    assert report.boundaries["manifest"] == {"before": 4, "after": 4}
    assert db.w.paths.manifest(4) not in db.w.listing()


def test_a_boundary_raised_concurrently_is_reread_and_never_lowered(store: ObjectStore) -> None:
    path = "t/db/gc/manifest.boundary"
    store.put(path, b"2")
    calls = [0]

    class Racing(HookedStore):
        def get_with_meta(self, p: str) -> tuple[bytes, ObjectMeta]:
            got = self.inner.get_with_meta(p)
            calls[0] += 1
            if calls[0] == 1:
                self.inner.put(path, b"9")  # another GC moves it after our read
            return got

    assert advance_boundary(Racing(store), path, 5) == (2, 9)
    assert store.get(path) == b"9" and calls[0] == 2


def test_local_store_advances_an_existing_boundary_on_every_run(tmp_path: Path) -> None:
    """0.17 cannot overwrite a boundary on a local disk (its second advance fails); slatelib's
    local conditional overwrite (docs/rfcs/0006-local-conditional-put.md) lets every run collect
    manifests."""
    local = open_store(f"file://{tmp_path}")
    db = Basic(local)
    gc(local, now=db.later_s)
    boundary = tmp_path / ROOT / "gc" / "manifest.boundary"
    assert boundary.read_bytes() == b"4"
    for run, latest in ((2, 7), (3, 9)):
        db.w.manifest(latest - 1, db.latest)
        db.w.manifest(latest, db.latest)
        report = gc(local, now=(db.t0 + run * HOUR) / 1000)
        assert report.refused == [] and report.errors == []
        assert boundary.read_bytes() == str(latest - 1).encode()
        assert report.boundaries["manifest"] == {"before": latest - 3, "after": latest - 1}
        assert {m for m in db.w.listing() if "/manifest/" in m} == {db.w.paths.manifest(latest)}
    # gc/ (boundaries and their lock files) is never listed for deletion, only read
    assert [d.path for d in report.decisions if "/gc/" in d.path] == []
    # the lock file appears with the first overwrite; the compactions boundary was only created
    assert {p.name for p in (tmp_path / ROOT / "gc").iterdir()} == {
        "manifest.boundary", "manifest.boundary.lock", "compactions.boundary"}


def test_unreadable_compactions_state_blocks_compacted_only(store: ObjectStore) -> None:
    db = Basic(store)
    store.put(db.w.paths.compactions(3), b"garbage")
    report = gc(store, now=db.later_s)
    left = db.w.listing()
    assert {db.w.paths.compacted(db.g1), db.w.paths.compactions(1)} <= left
    assert db.w.paths.wal(2) not in left and db.w.paths.manifest(1) not in left
    reason = next(d.reason for d in report.decisions if d.path == db.w.paths.compacted(db.g1))
    assert reason.startswith("kept: the compactions state is unreadable")


def test_failed_deletes_are_reported_and_other_kinds_still_go(store: ObjectStore) -> None:
    db = Basic(store)
    flaky = FlakyObjectStore(store)
    flaky.fail_before("delete_many", path="/wal/", times=None)
    report = gc(flaky, now=db.later_s)
    assert report.error_count == 6 and "deleting 6 objects" in report.errors[0]
    assert db.w.paths.wal(1) in db.w.listing() and db.w.paths.compacted(db.g1) not in db.w.listing()


# ------------------------------------------------------------------------------ refusals
def test_a_root_without_manifest_is_refused(store: ObjectStore) -> None:
    w = DbWriter(store, "t")
    w.wal(1)
    Basic(store, "t/db")
    with pytest.raises(ManifestMissingError, match=r"no manifest under 't': not a database root"):
        gc(store, root="t", now=SYSTEM_CLOCK.now_ms() / 1000 + 3600)
    assert w.paths.wal(1) in {m.path for m in store.list("t")}


@pytest.mark.parametrize("path", ["t~x/db", "t/../db", "t/db%2Fx", "s3://other/db"])
def test_database_paths_that_storage_would_spell_differently_are_refused(
    store: ObjectStore, path: str,
) -> None:
    flaky = FlakyObjectStore(store)
    with pytest.raises(InvalidArgumentError, match="database path"):
        gc(flaky, root=path)
    assert sum(flaky.calls.values()) == 0


def test_min_age_below_the_floor_is_refused_before_any_io(store: ObjectStore) -> None:
    flaky = FlakyObjectStore(store)
    with pytest.raises(InvalidArgumentError, match="below the safety floor"):
        gc(flaky, min_age="1min")
    assert sum(flaky.calls.values()) == 0
    with pytest.raises(InvalidArgumentError, match="cannot parse duration"):
        gc(flaky, min_age="soon")


def test_malformed_latest_manifest_refuses_the_run(store: ObjectStore) -> None:
    db = Basic(store)
    store.put(db.w.paths.manifest(6), b"\x00\x02junk")
    before = db.w.listing()
    with pytest.raises(CorruptObjectError):
        gc(store, now=db.later_s)
    assert db.w.listing() == before


def test_checkpoint_pinning_a_missing_manifest_refuses_the_run(store: ObjectStore) -> None:
    db = Basic(store)
    db.w.manifest(6, replace(db.latest, checkpoints=(checkpoint(99),)))
    before = db.w.listing()
    with pytest.raises(ManifestMissingError, match="pins manifest 99, which is missing"):
        gc(store, now=db.later_s)
    assert db.w.listing() == before


def test_a_listing_outside_the_directory_refuses_the_run(store: ObjectStore) -> None:
    db = Basic(store)
    hooked = HookedStore(store)
    real = list(store.list(f"{ROOT}/wal"))
    foreign = ObjectMeta("t/db-clone/wal/00000000000000000001.sst", 10, 0, None, None)
    hooked.listing = lambda prefix: real + [foreign] if prefix == f"{ROOT}/wal" else None
    before = db.w.listing()
    with pytest.raises(StorageError, match="outside it: GC refuses"):
        gc(hooked, now=db.later_s)
    assert db.w.listing() == before


def test_gc_of_a_database_never_touches_a_sibling_prefix(store: ObjectStore) -> None:
    db = Basic(store, "t/db")
    sibling = DbWriter(store, "t/db-clone")
    objs = {sibling.wal(1), sibling.sst(ulid_at(db.t0 - 5 * HOUR)), sibling.wal(2)}
    gc(store, root="t/db", now=db.later_s)
    assert objs <= {m.path for m in store.list("t/db-clone")}


@pytest.mark.parametrize("path, error, message", [
    ("", ManifestMissingError, "no manifest under 'the store root': not a database root"),
    ("t", ManifestMissingError, "no manifest under 't': not a database root"),
    ("junk", ManifestMissingError, "no manifest under 'junk': not a database root"),
    ("t/db-", ManifestMissingError, "no manifest under 't/db-'"),
    ("t/db/manifest", ManifestMissingError, "no manifest under 't/db/manifest'"),
    ("t/db/", InvalidArgumentError, "ends with '/': that names a prefix"),
    ("t/", InvalidArgumentError, "ends with '/': that names a prefix"),
    ("/t/db", InvalidArgumentError, "starts with '/'"),
])
def test_gc_on_a_wrong_prefix_deletes_nothing_and_says_why(
    store: ObjectStore, path: str, error: type[Exception], message: str,
) -> None:
    """The store root, a parent of several databases, a directory of random files, a
    sibling spelling, a layout directory, and prefix spellings of a real database."""
    now = (SYSTEM_CLOCK.now_ms() + 5 * HOUR) / 1000
    Basic(store, "t/db")
    Basic(store, "t/db-clone")
    store.put("junk/manifest/notes.txt", b"x")
    store.put("junk/compacted/01ARZ3NDEKTSV4RRFFQ69G5FAV.sst", b"x")
    store.put("junk/random.bin", b"x")
    before = {m.path for m in store.list("")}
    with pytest.raises(error, match=message):
        gc(store, root=path, now=now)
    assert {m.path for m in store.list("")} == before


def test_without_compactions_file_nothing_in_compacted_goes_and_the_report_says_why(
    store: ObjectStore,
) -> None:
    db = Basic(store)
    store.delete_many([db.w.paths.compactions(i) for i in (1, 2, 3)])
    report = gc(store, now=db.later_s)
    assert {db.w.paths.compacted(db.g1), db.w.paths.compacted(db.g2)} <= db.w.listing()
    assert report.refused == ["compacted: there is no compactions file, so the compaction low "
                              "watermark is the Unix epoch and nothing in compacted/ is deleted "
                              "(as in 0.17)"]
    assert db.w.paths.wal(1) not in db.w.listing()


def test_gc_on_a_two_phase_store_sweeps_crash_residue_of_the_cas(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.objstore import open_raw_store
    from slatelib.objstore import two_phase as tp
    from slatelib.objstore.cas_records import SqliteCasBackend
    from slatelib.objstore.no_conditional import NoConditionalWritesStore
    from slatelib.testing.faulty import SimulatedCrash

    raw = NoConditionalWritesStore(open_raw_store(f"memory://gccas{uuid.uuid4().hex[:12]}/"))
    store = tp.TwoPhaseObjectStore(raw, SqliteCasBackend(str(tmp_path / "cas.db")))
    db = Basic(store)
    p = db.w.paths

    def crash(phase: str, path: str) -> None:
        if phase == "temp_written":
            raise SimulatedCrash(f"crash after {phase} of {path}")

    store.on_phase = crash
    with pytest.raises(SimulatedCrash):
        store.put_if_absent(p.manifest(6), b"never recorded")
    store.on_phase = None
    orphans = [m.path for m in raw.list(p.root) if tp.is_temporary(m.path)]
    assert len(orphans) == 1
    # A young orphan may still be a write in progress: it stays.
    report = gc(store, now=db.later_s)
    assert report.cas_collect is not None and report.cas_collect["temps_deleted"] == 0
    assert [m.path for m in raw.list(p.root) if tp.is_temporary(m.path)] == orphans
    # Two hours on, it is residue: the next GC deletes it, and the database is intact.
    later = tp.now_ms() + 2 * HOUR
    monkeypatch.setattr(tp, "now_ms", lambda: later)
    report = gc(store, now=db.later_s)
    assert report.cas_collect == {"finished": 0, "rolled_back": 0, "records_deleted": 0,
                                  "temps_deleted": 1, "min_age_s": 3600}
    assert report.to_json()["cas_collect"]["temps_deleted"] == 1
    assert not [m.path for m in raw.list(p.root) if tp.is_temporary(m.path)]
    assert db.w.listing() >= db.survivors()
    # A dry run sweeps nothing.
    store.on_phase = crash
    with pytest.raises(SimulatedCrash):
        store.put_if_absent(p.manifest(7), b"never recorded")
    store.on_phase = None
    assert gc(store, now=db.later_s, dry_run=True).cas_collect is None
