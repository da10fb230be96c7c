"""Clones (design doc 'checkpoints and clones'): the pure manifest plan, the steps, nesting,
retries after crashes, and projected and union clones (refusals before any write, dry runs;
docs/rfcs/0007-projection-and-union-clones.md)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from slatelib import Db, DbReader, create_checkpoint, create_clone, destroy
from slatelib.cli.app import main as slate
from slatelib.core.manifest import Checkpoint, ExternalDb, Manifest, SortedRun, SstView
from slatelib.core.ranges import BytesRange
from slatelib.errors import (
    CorruptObjectError,
    InvalidArgumentError,
    InvalidDbStateError,
    ManifestMissingError,
)
from slatelib.exit_codes import EXIT_DATA
from slatelib.ids import Ulid
from slatelib.objstore import ObjectStore, RetryingObjectStore, open_raw_store, open_store
from slatelib.ops.clone import (
    EPHEMERAL_CHECKPOINT_LIFETIME_S,
    PLANNED_EPHEMERAL_CHECKPOINT,
    CloneSource,
    create_clone_from_sources,
    plan_clone_manifest,
)
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash
from tests.unit.store_snapshot import snapshot
from tests.unit.writer.support import writer_settings
from tests.unit.writer.test_manifest_rules import handle

NOW_MS = 1_750_000_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW_MS)


@pytest.fixture
def raw() -> ObjectStore:
    return open_raw_store(f"memory://{uuid.uuid4().hex}/")


def make_parent(store: ObjectStore, clock: FakeClock, path: str = "parent") -> None:
    """L0 data, a sorted run is not needed; WAL-only rows that the clone must copy."""
    db = Db.open(path, store, writer_settings(), clock=clock)
    db.put(b"flushed", b"1")
    db.flush()
    db.put(b"wal", b"2")
    db.close(flush=None)  # "wal" stays in the WAL only
    # a managed reader raises wal_id_last_seen to the WAL it saw (design doc
    # 'checkpoints and clones')
    DbReader.open(path, store, settings=writer_settings(), clock=clock, auto_refresh=False).close()


def test_plan_copies_the_parent_state_and_points_at_its_ssts() -> None:
    parent = Manifest().with_trees(l0=[SstView.identity(Ulid(1))], compacted=[
        SortedRun(0, (SstView.identity(Ulid(2)), SstView.identity(Ulid(3))))],
        new_ssts=[handle(1), handle(2), handle(3)])
    grand = ExternalDb("grand", uuid.uuid4(), uuid.uuid4(), (Ulid(3),))
    released = ExternalDb("old", uuid.uuid4(), uuid.uuid4(), ())
    parent = replace(parent, external_dbs=(released, grand), writer_epoch=4, compactor_epoch=2,
                     checkpoints=(), replay_after_wal_id=5, wal_id_last_seen=9, last_l0_seq=77)
    ids = iter([uuid.UUID(int=i) for i in range(1, 5)])
    source = uuid.uuid4()
    m = plan_clone_manifest(parent, "parent", source, new_id=lambda: next(ids))
    assert m.initialized is False and m.checkpoints == () and m.destroyed_at_s is None
    assert (m.writer_epoch, m.compactor_epoch) == (4, 2)  # 0.17 copies both epochs
    assert (m.replay_after_wal_id, m.wal_id_last_seen, m.last_l0_seq) == (5, 9, 77)
    assert m.l0 == parent.l0 and m.compacted == parent.compacted
    inherited, own = m.external_dbs
    assert inherited == ExternalDb("grand", grand.final_checkpoint_id, uuid.UUID(int=1), (Ulid(3),))  # type: ignore[arg-type]
    assert own == ExternalDb("parent", source, uuid.UUID(int=2), (Ulid(1), Ulid(2)))


def test_clone_reads_the_parent_and_writes_only_to_itself(raw: ObjectStore, clock: FakeClock) -> None:
    make_parent(raw, clock)
    report = create_clone("clone", "parent", raw, clock=clock)
    assert report.created and report.wal_ssts_copied >= 1
    parent_cps = ManifestStore(raw, "parent").read_latest().value.checkpoints
    source = next(c for c in parent_cps if c.id == report.source_checkpoint_id)
    assert source.expire_time_s == NOW_MS // 1000 + EPHEMERAL_CHECKPOINT_LIFETIME_S
    final = ManifestStore(raw, "clone").read_latest().value.external_dbs[-1].final_checkpoint_id
    assert any(c.id == final and c.expire_time_s is None for c in parent_cps)
    with Db.open("clone", raw, writer_settings(), clock=clock) as db:
        assert dict(db.scan()) == {b"flushed": b"1", b"wal": b"2"}
        db.put(b"clone-only", b"3")
        db.flush()
    with DbReader.open("parent", raw, mode="latest") as r:
        assert r.get(b"clone-only") is None and r.get(b"wal") == b"2"


def test_clones_of_clones_pin_every_ancestor(raw: ObjectStore, clock: FakeClock) -> None:
    make_parent(raw, clock, "a")
    create_clone("b", "a", raw, clock=clock)
    with Db.open("b", raw, writer_settings(), clock=clock) as db:
        db.put(b"from-b", b"x")
    create_clone("c", "b", raw, clock=clock)
    c = ManifestStore(raw, "c").read_latest().value
    assert [e.path for e in c.external_dbs] == ["a", "b"]
    for e in c.external_dbs:
        owner = ManifestStore(raw, e.path).read_latest().value
        assert owner.checkpoint(e.final_checkpoint_id) is not None  # type: ignore[arg-type]
    with DbReader.open("c", raw, mode="latest") as r:
        assert dict(r.scan()) == {b"flushed": b"1", b"wal": b"2", b"from-b": b"x"}


def test_an_explicit_checkpoint_is_the_clone_source(raw: ObjectStore, clock: FakeClock) -> None:
    make_parent(raw, clock)
    cp = create_checkpoint("parent", raw, clock=clock)
    with Db.open("parent", raw, writer_settings(), clock=clock) as db:
        db.put(b"after-checkpoint", b"x")
    report = create_clone("clone", "parent", raw, str(cp.id), clock=clock)
    assert report.source_checkpoint_id == cp.id
    with DbReader.open("clone", raw, mode="latest") as r:
        assert r.get(b"after-checkpoint") is None and r.get(b"flushed") == b"1"
    again = create_clone("clone", "parent", raw, cp.id, clock=clock)
    assert again.created is False and again.manifest_id == report.manifest_id
    with pytest.raises(InvalidDbStateError, match="not a clone"):
        create_clone("clone", "parent", raw, uuid.uuid4(), clock=clock)


@pytest.mark.parametrize("crash_op, crash_path, skip", [
    ("put_if_absent", "clone/manifest/", 0),        # after manifest 1 (uninitialized)
    ("put_if_absent", "parent/manifest/", 1),       # after the final checkpoint
    ("put", "clone/wal/", 0),                       # during the WAL copy
    ("put_if_absent", "clone/manifest/", 1),        # after initialized = true
])
def test_a_retry_after_a_crash_completes_the_clone(
    raw: ObjectStore, clock: FakeClock, crash_op: str, crash_path: str, skip: int
) -> None:
    make_parent(raw, clock)
    flaky = FlakyObjectStore(raw)
    flaky.crash(crash_op, path=crash_path, skip=skip)  # type: ignore[arg-type]
    with pytest.raises(SimulatedCrash):
        create_clone("clone", "parent", RetryingObjectStore(flaky, sleep=clock.sleep), clock=clock)
    create_clone("clone", "parent", raw, clock=clock)
    m = ManifestStore(raw, "clone").read_latest().value
    assert m.initialized
    finals = [c for c in ManifestStore(raw, "parent").read_latest().value.checkpoints
              if c.expire_time_s is None and c.writer_epoch is None]
    assert [c.id for c in finals] == [m.external_dbs[-1].final_checkpoint_id]
    with DbReader.open("clone", raw, mode="latest") as r:
        assert dict(r.scan()) == {b"flushed": b"1", b"wal": b"2"}


def test_a_clone_whose_source_expired_before_its_final_checkpoint_says_how_to_recover(
    raw: ObjectStore, clock: FakeClock
) -> None:
    make_parent(raw, clock)
    flaky = FlakyObjectStore(raw)
    flaky.crash("put_if_absent", path="clone/manifest/")  # manifest 1 lands, then we "die"
    with pytest.raises(SimulatedCrash):
        create_clone("clone", "parent", flaky, clock=clock)
    clock.advance(EPHEMERAL_CHECKPOINT_LIFETIME_S + 1)  # the retry comes too late
    with pytest.raises(InvalidDbStateError, match=r"expired.*destroy --hard"):
        create_clone("clone", "parent", raw, clock=clock)
    destroy("clone", raw, soft=False, clock=clock)
    assert create_clone("clone", "parent", raw, clock=clock).created
    with DbReader.open("clone", raw, mode="latest") as r:
        assert dict(r.scan()) == {b"flushed": b"1", b"wal": b"2"}


def test_clone_errors(raw: ObjectStore, clock: FakeClock) -> None:
    with pytest.raises(ManifestMissingError):
        create_clone("clone", "missing", raw, clock=clock)
    make_parent(raw, clock)
    with pytest.raises(InvalidArgumentError, match="onto itself"):
        create_clone("parent", "parent/", raw, clock=clock)
    with pytest.raises(InvalidDbStateError, match="not found"):
        create_clone("clone", "parent", raw, uuid.uuid4(), clock=clock)
    expired = create_checkpoint("parent", raw, lifetime=1, clock=clock)
    clock.advance(5)
    with pytest.raises(InvalidDbStateError, match="expired"):
        create_clone("clone2", "parent", raw, expired.id, clock=clock)
    Db.open("other", raw, writer_settings(), clock=clock).close()
    with pytest.raises(InvalidDbStateError, match="not a clone"):
        create_clone("other", "parent", raw, clock=clock)
    ManifestStore(raw, "half").write(1, replace(Manifest(), initialized=False))
    with pytest.raises(InvalidDbStateError, match="not initialized"):
        create_clone("clone3", "half", raw, clock=clock)
    assert not list(raw.list(DbPaths("clone3").manifest_dir))


# ------------------------------------------------------------ validated before any write
def with_external_path(store: ObjectStore, db: str, path: str) -> int:
    """Write the next manifest of ``db`` with its last external database renamed ``path``."""
    ms = ManifestStore(store, db)
    cur = ms.read_latest()
    *kept, last = cur.value.external_dbs
    return ms.write(cur.id + 1, replace(cur.value, external_dbs=(*kept, replace(last, path=path)))).id


@pytest.mark.parametrize("bad, why", [
    ("../parent", "has a '..' segment"),
    ("/abs/parent", "is absolute"),
    ("mid/inner", "lies inside this database"),
    ("mid", "is this database itself"),
    ("a//b", "empty segment"),
])
def test_a_clone_of_a_parent_with_an_unsafe_external_path_writes_nothing(
    raw: ObjectStore, clock: FakeClock, bad: str, why: str
) -> None:
    make_parent(raw, clock)
    create_clone("mid", "parent", raw, clock=clock)  # a clone of a clone inherits "parent"
    mid = with_external_path(raw, "mid", bad)
    before = snapshot(raw)
    with pytest.raises(CorruptObjectError) as info:
        create_clone("leaf", "mid", raw, clock=clock)
    assert str(info.value).startswith(f"database 'mid', manifest {mid}: external_dbs[0] path {bad!r} ")
    assert why in str(info.value)
    assert snapshot(raw) == before  # no ephemeral checkpoint in mid, nothing under leaf


def test_the_cli_clone_exits_with_a_data_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], clock: FakeClock
) -> None:
    url = f"file://{tmp_path}"
    store = open_store(url)
    make_parent(store, clock)
    create_clone("mid", "parent", store, clock=clock)
    with_external_path(store, "mid", "../parent")
    before = snapshot(store)
    assert slate(["--store", url, "--path", "leaf", "clone", "--parent", "mid"]) == EXIT_DATA
    assert "external_dbs[0] path '../parent' has a '..' segment" in capsys.readouterr().err
    assert snapshot(store) == before


def test_an_unsafe_path_in_the_checkpointed_manifest_writes_nothing(
    raw: ObjectStore, clock: FakeClock
) -> None:
    make_parent(raw, clock)
    create_clone("mid", "parent", raw, clock=clock)
    with_external_path(raw, "mid", "../parent")
    ms = ManifestStore(raw, "mid")
    cur = ms.read_latest()
    pinned = replace(cur.value, checkpoints=(Checkpoint(uuid.uuid4(), cur.id, None, 1),))
    ms.write(cur.id + 1, pinned)  # a checkpoint pinning the bad version
    with_external_path(raw, "mid", "parent")  # the latest is repaired, the pinned one is not
    before = snapshot(raw)
    with pytest.raises(CorruptObjectError, match=f"manifest {cur.id}: external_dbs"):
        create_clone("leaf", "mid", raw, pinned.checkpoints[0].id, clock=clock)
    assert snapshot(raw) == before


def test_clone_paths_that_would_contain_an_external_database_write_nothing(
    raw: ObjectStore, clock: FakeClock
) -> None:
    make_parent(raw, clock, "x/parent")
    create_clone("mid", "x/parent", raw, clock=clock)
    before = snapshot(raw)
    with pytest.raises(InvalidArgumentError, match="the parent would lie inside the clone"):
        create_clone("x", "x/parent", raw, clock=clock)
    with pytest.raises(InvalidArgumentError, match="'x/parent' .* would lie inside it"):
        create_clone("x", "mid", raw, clock=clock)  # inherits x/parent
    assert snapshot(raw) == before


def test_a_clone_nested_inside_its_parent_is_legal(raw: ObjectStore, clock: FakeClock) -> None:
    make_parent(raw, clock)
    create_clone("parent/kid", "parent", raw, clock=clock)
    with DbReader.open("parent/kid", raw, mode="latest") as r:
        assert dict(r.scan()) == {b"flushed": b"1", b"wal": b"2"}
    report = destroy("parent/kid", raw, soft=False, clock=clock)
    assert report.released_parents == ("parent",)
    assert not [p for p in snapshot(raw) if p.startswith("parent/kid/")]
    with DbReader.open("parent", raw, mode="latest") as r:
        assert dict(r.scan()) == {b"flushed": b"1", b"wal": b"2"}


def test_a_destination_with_leftovers_of_another_database_is_refused(
    raw: ObjectStore, clock: FakeClock
) -> None:
    make_parent(raw, clock)
    raw.put(DbPaths("clone").wal(7), b"someone else's WAL")
    before = snapshot(raw)
    with pytest.raises(InvalidDbStateError, match="no manifest but holds 1 objects"):
        create_clone("clone", "parent", raw, clock=clock)
    raw.delete(DbPaths("clone").wal(7))
    raw.put("clone/.deleting", b"")
    with pytest.raises(InvalidDbStateError, match="hard destroy .* is unfinished"):
        create_clone("clone", "parent", raw, clock=clock)
    raw.delete("clone/.deleting")
    assert snapshot(raw) == {p: b for p, b in before.items() if not p.startswith("clone/")}


def test_a_missing_or_expired_checkpoint_writes_nothing(raw: ObjectStore, clock: FakeClock) -> None:
    make_parent(raw, clock)
    expired = create_checkpoint("parent", raw, lifetime=1, clock=clock)
    clock.advance(5)
    before = snapshot(raw)
    with pytest.raises(InvalidDbStateError, match="has expired"):
        create_clone("clone", "parent", raw, expired.id, clock=clock)
    with pytest.raises(InvalidDbStateError, match="not found"):
        create_clone("clone", "parent", raw, uuid.uuid4(), clock=clock)
    assert snapshot(raw) == before


def test_an_ancestor_without_the_parents_final_checkpoint_writes_nothing(
    raw: ObjectStore, clock: FakeClock
) -> None:
    make_parent(raw, clock, "a")
    create_clone("b", "a", raw, clock=clock)
    final = ManifestStore(raw, "b").read_latest().value.external_dbs[0].final_checkpoint_id
    ms = ManifestStore(raw, "a")
    cur = ms.read_latest()
    ms.write(cur.id + 1, replace(cur.value, checkpoints=tuple(
        c for c in cur.value.checkpoints if c.id != final)))  # released behind b's back
    before = snapshot(raw)
    with pytest.raises(InvalidDbStateError, match=f"external database 'a' cannot take .*{final}"):
        create_clone("c", "b", raw, clock=clock)
    assert snapshot(raw) == before


# ------------------------------------------------- projection and union (create_clone_from_sources)
def make_flushed(store: ObjectStore, clock: FakeClock, path: str, keys: list[bytes]) -> None:
    """A database whose rows are all in L0 (no data WAL after the last flush)."""
    with Db.open(path, store, writer_settings(), clock=clock) as db:
        for k in keys:
            db.put(k, b"v-" + k)
        db.flush()


def read(store: ObjectStore, path: str) -> dict[bytes, bytes]:
    with DbReader.open(path, store, mode="latest") as r:
        return dict(r.scan())


KEYS_A = [b"a%02d" % i for i in range(10)]
KEYS_B = [b"b%02d" % i for i in range(10)]


def test_a_union_of_projected_sources_reads_exactly_their_ranges(
    raw: ObjectStore, clock: FakeClock
) -> None:
    make_flushed(raw, clock, "a", KEYS_A)
    make_flushed(raw, clock, "b", KEYS_B)
    sources = [CloneSource("b", projection=BytesRange.half_open(b"b05", None)),
               CloneSource("a/", projection=BytesRange.half_open(b"a02", b"a05"))]
    report = create_clone_from_sources("u", sources, raw, clock=clock)
    assert report.created and report.wal_ssts_copied == 0
    assert [s.path for s in report.sources] == ["b", "a"]
    assert all(s.checkpoint is not None for s in report.sources)
    expected = {k: b"v-" + k for k in [*KEYS_A[2:5], *KEYS_B[5:]]}
    assert read(raw, "u") == expected
    m = ManifestStore(raw, "u").read_latest().value
    assert [e.path for e in m.external_dbs] == ["a", "b"] and m.writer_epoch == 0
    for e in m.external_dbs:  # final checkpoints on every source
        cp = ManifestStore(raw, e.path).read_latest().value.checkpoint(e.final_checkpoint_id)  # type: ignore[arg-type]
        assert cp is not None and cp.expire_time_s is None
    with Db.open("u", raw, writer_settings(), clock=clock) as db:
        db.put(b"new", b"x")
    assert read(raw, "u") == {**expected, b"new": b"x"} and b"new" not in read(raw, "a")
    again = create_clone_from_sources("u", sources, raw, clock=clock)
    assert again.created is False and again.sources == report.sources


def test_a_dry_run_writes_nothing_and_plans_what_the_clone_writes(
    raw: ObjectStore, clock: FakeClock
) -> None:
    make_flushed(raw, clock, "a", KEYS_A)
    cp = create_checkpoint("a", raw, clock=clock)
    sources = [CloneSource("a", cp.id, BytesRange.half_open(b"a03", b"a07"))]
    before = snapshot(raw)
    plan = create_clone_from_sources("c", sources, raw, clock=clock, dry_run=True)
    assert snapshot(raw) == before
    assert plan.dry_run and not plan.created and plan.planned_manifest is not None
    create_clone_from_sources("c", sources, raw, clock=clock)
    first = ManifestStore(raw, "c").read(1).value

    def without_finals(m: Manifest) -> Manifest:
        return replace(m, external_dbs=tuple(replace(e, final_checkpoint_id=None)
                                             for e in m.external_dbs))

    assert without_finals(plan.planned_manifest) == without_finals(first)
    assert read(raw, "c") == {k: b"v-" + k for k in KEYS_A[3:7]}
    ephemeral = create_clone_from_sources("d", [CloneSource("a")], raw, clock=clock, dry_run=True)
    assert ephemeral.source_checkpoint_id == PLANNED_EPHEMERAL_CHECKPOINT


def test_bad_clone_sources_are_refused_before_any_write(raw: ObjectStore, clock: FakeClock) -> None:
    make_flushed(raw, clock, "a", KEYS_A)
    make_flushed(raw, clock, "b", KEYS_A[5:])
    Db.open("other", raw, writer_settings(), clock=clock).close()
    before = snapshot(raw)
    half = BytesRange.half_open
    cases: list[tuple[type[Exception], str, str, list[CloneSource]]] = [
        (InvalidArgumentError, "c", "at least one source", []),
        (InvalidArgumentError, "a", "onto itself", [CloneSource("a/")]),
        (InvalidArgumentError, "c", "given twice", [CloneSource("a"), CloneSource("a")]),
        (InvalidArgumentError, "c", "overlapping key ranges",
         [CloneSource("a", projection=half(None, b"a07")), CloneSource("b")]),
        (InvalidArgumentError, "c", "is empty", [CloneSource("a", projection=half(b"a", b"a"))]),
        (InvalidDbStateError, "c", "not found", [CloneSource("a", uuid.uuid4(), half(b"a", b"b"))]),
        (InvalidDbStateError, "other", "not a clone", [CloneSource("a"), CloneSource("b")]),
        (ManifestMissingError, "c", "missing", [CloneSource("a"), CloneSource("missing")]),
    ]
    for kind, clone, why, sources in cases:
        with pytest.raises(kind, match=why):
            create_clone_from_sources(clone, sources, raw, clock=clock)
        assert snapshot(raw) == before, (clone, why)
    # adjacent half-open ranges are fine
    create_clone_from_sources("c", [CloneSource("a", projection=half(None, b"a05")),
                                    CloneSource("b", projection=half(b"a05", None))], raw,
                              clock=clock)
    assert read(raw, "c") == {k: b"v-" + k for k in KEYS_A}


def test_projection_and_union_refuse_sources_with_data_in_the_wal(
    raw: ObjectStore, clock: FakeClock
) -> None:
    make_parent(raw, clock, "w")  # "wal" is only in the WAL
    make_flushed(raw, clock, "a", [b"x"])
    m = ManifestStore(raw, "w").read_latest().value
    before = snapshot(raw)
    for sources in ([CloneSource("w", projection=BytesRange.half_open(b"a", None))],
                    [CloneSource("a"), CloneSource("w")]):
        with pytest.raises(InvalidDbStateError, match=(
                rf"union with WAL is not supported .*'w' has data in WAL SSTs \[.*"
                rf"{m.wal_id_last_seen}\].*nothing was written")):
            create_clone_from_sources("c", sources, raw, clock=clock)
        assert snapshot(raw) == before
    assert create_clone_from_sources("c", [CloneSource("w")], raw, clock=clock).wal_ssts_copied


@pytest.mark.parametrize("crash_op, crash_path, skip", [
    ("put_if_absent", "u/manifest/", 0),   # after manifest 1
    ("put_if_absent", "b/manifest/", 1),   # after b's final checkpoint
    ("put_if_absent", "u/manifest/", 1),   # after initialized = true
])
def test_a_retried_union_completes(
    raw: ObjectStore, clock: FakeClock, crash_op: str, crash_path: str, skip: int
) -> None:
    make_flushed(raw, clock, "a", KEYS_A)
    make_flushed(raw, clock, "b", KEYS_B)
    sources = [CloneSource("a"), CloneSource("b")]
    flaky = FlakyObjectStore(raw)
    flaky.crash(crash_op, path=crash_path, skip=skip)  # type: ignore[arg-type]
    with pytest.raises(SimulatedCrash):
        create_clone_from_sources("u", sources, RetryingObjectStore(flaky, sleep=clock.sleep),
                                  clock=clock)
    create_clone_from_sources("u", sources, raw, clock=clock)
    assert read(raw, "u") == {k: b"v-" + k for k in KEYS_A + KEYS_B}
    m = ManifestStore(raw, "u").read_latest().value
    assert m.initialized and len(m.external_dbs) == 2
    for e in m.external_dbs:
        finals = [c for c in ManifestStore(raw, e.path).read_latest().value.checkpoints
                  if c.expire_time_s is None]
        assert [c.id for c in finals] == [e.final_checkpoint_id]


# ------------------------------------------------------------ manifest reads of a clone
def test_a_clone_never_reads_back_a_manifest_version_it_wrote(
    raw: ObjectStore, clock: FakeClock
) -> None:
    """The pinned parent manifest and the clone's manifest 1 are the versions the clone
    wrote (put-if-absent: they never change), so it does not fetch them again; the parent
    is read once at the start, once before its final checkpoint and once after the
    clone is initialized (docs/rfcs/0014-large-manifest-planning.md)."""
    make_parent(raw, clock)
    before = ManifestStore(raw, "parent").read_latest().id
    flaky = FlakyObjectStore(raw)
    report = create_clone("clone", "parent", flaky, clock=clock)
    assert report.created and report.manifest_id == 2
    gets = [p for op, p in flaky.log if op == "get" and "/manifest/" in p]
    parent = DbPaths("parent")
    assert gets == [parent.manifest(before), parent.manifest(before + 1),
                    parent.manifest(before + 2)]
    pinned = ManifestStore(raw, "parent").read(before + 1).value
    assert pinned.checkpoint(report.source_checkpoint_id) is not None


def test_a_parent_written_between_the_read_and_the_pin_is_pinned_at_its_latest(
    raw: ObjectStore, clock: FakeClock
) -> None:
    """The pin is tried on the manifest read first; a concurrent parent write makes it
    conflict, and the clone pins (and holds) the newer state."""
    make_parent(raw, clock)
    written: list[int] = []

    def concurrent_flush(_: float) -> None:
        if not written:
            written.append(1)
            with Db.open("parent", raw, writer_settings(), clock=clock) as db:
                db.put(b"late", b"3")
                db.flush()

    flaky = FlakyObjectStore(raw, sleep=concurrent_flush)
    flaky.delay("put_if_absent", path="parent/manifest/", seconds=1.0, times=1)
    report = create_clone("clone", "parent", flaky, clock=clock)
    assert written and report.created
    with DbReader.open("clone", raw, mode="latest") as r:
        assert dict(r.scan()) == {b"flushed": b"1", b"wal": b"2", b"late": b"3"}
    parent = ManifestStore(raw, "parent").read_latest().value
    source = parent.checkpoint(report.source_checkpoint_id)
    assert source is not None
    final = ManifestStore(raw, "clone").read_latest().value.external_dbs[-1]
    assert parent.checkpoint(final.final_checkpoint_id) is not None  # type: ignore[arg-type]
