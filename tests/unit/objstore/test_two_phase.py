"""Two-phase CAS (slatelib/objstore/two_phase.py) over a SQLite record store, on a store that
refuses conditional writes: the protocol's steps, recovery after a crash between any two
steps by the next writer, reader, listing and collect(), put_if_match, and failures of the
transactional store."""

from __future__ import annotations

import re
import sqlite3
import threading
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import pytest

from slatelib.errors import (
    AlreadyExistsError,
    CommitStateUnknownError,
    ConflictError,
    CorruptObjectError,
    ObjectMissingError,
    StorageError,
    UnavailableError,
)
from slatelib.objstore import ObjectStore, open_raw_store, open_store
from slatelib.objstore.cas_records import CasBackend, SqliteCasBackend
from slatelib.objstore.no_conditional import NoConditionalWritesStore
from slatelib.objstore.two_phase import PHASES, TwoPhaseObjectStore, is_temporary
from slatelib.testing.faulty import SimulatedCrash

P = "db/manifest/00000000000000000001.manifest"


@pytest.fixture
def parts(tmp_path: Path) -> tuple[ObjectStore, SqliteCasBackend]:
    raw = NoConditionalWritesStore(open_raw_store(f"memory://m{uuid.uuid4().hex[:12]}/"))
    return raw, SqliteCasBackend(str(tmp_path / "cas.db"))


def two_phase(parts: tuple[ObjectStore, CasBackend],
              hook: Callable[[str, str], None] | None = None) -> TwoPhaseObjectStore:
    return TwoPhaseObjectStore(parts[0], parts[1], on_phase=hook)


def crash_at(phase: str) -> Callable[[str, str], None]:
    def hook(seen: str, path: str) -> None:
        if seen == phase:
            raise SimulatedCrash(f"crash after {phase} of {path}")
    return hook


def temps(store: ObjectStore) -> list[str]:
    return [m.path for m in store.list("") if is_temporary(m.path)]


def test_a_create_writes_the_object_commits_the_record_and_removes_the_temporary(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    store = two_phase(parts)
    seen: list[str] = []
    store.on_phase = lambda phase, path: seen.append(phase)
    store.put_if_absent(P, b"v1")
    assert seen == list(PHASES)
    assert store.get(P) == b"v1"
    rec = store.record(P)
    assert rec is not None and rec.committed and rec.size == 2
    assert temps(parts[0]) == []
    assert isinstance(parts[0], NoConditionalWritesStore) and parts[0].refused == 0
    with pytest.raises(AlreadyExistsError):
        store.put_if_absent(P, b"v2")
    assert store.get(P) == b"v1"
    assert temps(parts[0]) == []


def test_an_object_written_before_two_phase_cas_is_never_overwritten(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    parts[0].put(P, b"old")
    store = two_phase(parts)
    with pytest.raises(AlreadyExistsError):
        store.put_if_absent(P, b"new")
    assert store.get(P) == b"old"
    assert store.record(P) is None


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("by", ["writer", "reader", "lister", "collect"])
def test_a_crash_between_phases_is_repaired_by_the_next_process(
        parts: tuple[ObjectStore, SqliteCasBackend], phase: str, by: str) -> None:
    with pytest.raises(SimulatedCrash):
        two_phase(parts, crash_at(phase)).put_if_absent(P, b"first")
    nxt = two_phase(parts)
    durable = phase != "temp_written"  # the write is durable once its intent is recorded
    if by == "writer":
        with pytest.raises(AlreadyExistsError) if durable else nullcontext():
            nxt.put_if_absent(P, b"second")
    elif by == "reader":
        if durable:
            assert nxt.get(P) == b"first"
            nxt.list("db")  # a reader that found the object leaves its record to a listing
        else:
            with pytest.raises(ObjectMissingError):
                nxt.get(P)
    elif by == "lister":
        listed = [m.path for m in nxt.list("db/manifest")]
        assert listed == ([P] if durable else [])
    else:
        report = nxt.collect(min_age_s=0)
        assert report.temps_deleted == (1 if phase in ("temp_written", "committed") else 0)
    expected = b"first" if durable else (b"second" if by == "writer" else None)
    if expected is None:
        with pytest.raises(ObjectMissingError):
            parts[0].get(P)
    else:
        assert parts[0].get(P) == expected  # the bare store: no recovery on this read
        rec = nxt.record(P)
        assert rec is not None and rec.committed
    if by != "collect" and (not durable or phase == "committed"):
        nxt.collect(min_age_s=0)  # only collect removes a temporary left by steps 1 or 4
    assert temps(parts[0]) == []
    # Nothing is committed twice: the first write's record is the one in place.
    if durable:
        with pytest.raises(AlreadyExistsError):
            two_phase(parts).put_if_absent(P, b"third")
        assert parts[0].get(P) == b"first"


def test_a_recorded_write_whose_temporary_object_was_lost_is_rolled_back(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    with pytest.raises(SimulatedCrash):
        two_phase(parts, crash_at("recorded")).put_if_absent(P, b"first")
    for t in temps(parts[0]):
        parts[0].delete(t)
    store = two_phase(parts)
    assert store.recover("db") == 1
    assert store.record(P) is None
    store.put_if_absent(P, b"second")
    assert store.get(P) == b"second"


def test_a_corrupt_temporary_object_is_reported_not_copied(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    with pytest.raises(SimulatedCrash):
        two_phase(parts, crash_at("recorded")).put_if_absent(P, b"first")
    (tmp,) = temps(parts[0])
    parts[0].put(tmp, b"bit rot")
    with pytest.raises(CorruptObjectError, match="does not match the checksum"):
        two_phase(parts).recover("")
    with pytest.raises(ObjectMissingError):
        parts[0].get(P)


def test_a_record_left_next_to_an_object_written_outside_two_phase_cas_is_rolled_back(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    with pytest.raises(SimulatedCrash):
        two_phase(parts, crash_at("recorded")).put_if_absent(P, b"ours")
    parts[0].put(P, b"someone else's")
    store = two_phase(parts)
    store.recover("")
    assert store.get(P) == b"someone else's"
    assert store.record(P) is None
    assert temps(parts[0]) == []


def test_put_if_match_replaces_only_the_current_version(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    store = two_phase(parts)
    e1 = store.put_if_match(P, b"1", None)
    data, meta = store.get_with_meta(P)
    assert data == b"1" and meta.e_tag == e1
    e2 = store.put_if_match(P, b"2", e1)
    assert e2 != e1 and store.get(P) == b"2"
    with pytest.raises(ConflictError):
        store.put_if_match(P, b"3", e1)
    with pytest.raises(ConflictError):
        store.put_if_match(P, b"3", '"an-s3-etag"')
    with pytest.raises(AlreadyExistsError):
        store.put_if_match(P, b"3", None)
    assert store.get(P) == b"2"


def test_put_if_match_adopts_an_object_that_has_no_record(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    parts[0].put(P, b"7")
    store = two_phase(parts)
    _, meta = store.get_with_meta(P)
    assert meta.e_tag is not None and meta.e_tag.startswith("2pcc:")
    new = store.put_if_match(P, b"9", meta.e_tag)
    with pytest.raises(ConflictError):
        store.put_if_match(P, b"8", meta.e_tag)
    _, again = store.get_with_meta(P)
    assert again.e_tag == new and store.get(P) == b"9"


@pytest.mark.parametrize("phase", ["recorded", "copied"])
def test_an_interrupted_overwrite_is_finished_by_the_next_reader(
        parts: tuple[ObjectStore, SqliteCasBackend], phase: str) -> None:
    store = two_phase(parts)
    e1 = store.put_if_match(P, b"1", None)
    with pytest.raises(SimulatedCrash):
        two_phase(parts, crash_at(phase)).put_if_match(P, b"2", e1)
    data, meta = two_phase(parts).get_with_meta(P)
    assert data == b"2"
    with pytest.raises(ConflictError):
        store.put_if_match(P, b"3", e1)
    assert store.put_if_match(P, b"3", meta.e_tag)
    assert store.get(P) == b"3"


def test_racing_threads_through_one_record_store_have_one_winner(
        parts: tuple[ObjectStore, SqliteCasBackend], tmp_path: Path) -> None:
    n = 16
    stores = [TwoPhaseObjectStore(parts[0], SqliteCasBackend(str(tmp_path / "cas.db")))
              for _ in range(n)]
    barrier = threading.Barrier(n)
    won: list[int] = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            stores[i].put_if_absent(P, b"%d" % i)
            won.append(i)
        except AlreadyExistsError:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and len(won) == 1
    assert parts[0].get(P) == b"%d" % won[0]
    assert temps(parts[0]) == []


def test_a_locked_record_store_fails_writes_cleanly_and_they_resume(
        parts: tuple[ObjectStore, SqliteCasBackend], tmp_path: Path) -> None:
    path = str(tmp_path / "cas.db")
    store = TwoPhaseObjectStore(parts[0], SqliteCasBackend(path, timeout_s=0.05))
    store.put_if_absent("db/wal/00000000000000000001.sst", b"a")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(UnavailableError, match="cas store sqlite://.* unavailable"):
            store.put_if_absent("db/wal/00000000000000000002.sst", b"b")
        # Reads keep working (recovery is postponed), nothing was left behind.
        assert [m.path for m in store.list("db/wal")] == ["db/wal/00000000000000000001.sst"]
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert temps(parts[0]) == []
    store.put_if_absent("db/wal/00000000000000000002.sst", b"b")
    assert store.get("db/wal/00000000000000000002.sst") == b"b"


def test_a_failed_copy_after_the_record_is_reported_unknown_then_finished_by_a_reader(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    from slatelib.testing.faulty import FlakyObjectStore

    flaky = FlakyObjectStore(parts[0])
    flaky.fail_before("put", path=re.compile(f"^{re.escape(P)}$"), times=1)
    with pytest.raises(CommitStateUnknownError, match="recorded in the cas store"):
        TwoPhaseObjectStore(flaky, parts[1]).put_if_absent(P, b"x")
    assert two_phase(parts).get(P) == b"x"


def test_delete_removes_the_record_so_the_path_can_be_created_again(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    store = two_phase(parts)
    store.put_if_absent(P, b"1")
    store.put_if_absent("db/manifest/00000000000000000002.manifest", b"2")
    store.delete_many([P, "db/manifest/00000000000000000002.manifest"])
    assert store.records() == []
    store.put_if_absent(P, b"again")
    assert store.get(P) == b"again"


def test_collect_removes_records_of_objects_deleted_behind_its_back(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    store = two_phase(parts)
    store.put_if_absent(P, b"1")
    parts[0].delete(P)
    assert store.collect(min_age_s=3600).records_deleted == 0  # too young
    assert store.collect(min_age_s=0).records_deleted == 1
    store.put_if_absent(P, b"2")


def test_the_cas_option_makes_open_store_two_phase(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"file://{tmp_path}/root"
    cas = f"sqlite://{tmp_path}/cas.db"
    store = open_store(url, cas=cas, conditional_writes=False)
    assert isinstance(store, TwoPhaseObjectStore)
    store.put_if_absent(P, b"x")
    again = store.spec.open()  # what a Spark executor does
    assert isinstance(again, TwoPhaseObjectStore)
    with pytest.raises(AlreadyExistsError):
        again.put_if_absent(P, b"y")
    monkeypatch.setenv("SLATELIB_CAS_URL", cas)
    from_env = open_store(url, conditional_writes=False)
    assert isinstance(from_env, TwoPhaseObjectStore)
    assert dict(from_env.spec.options)["cas"] == cas
    with pytest.raises(StorageError, match="no conditional writes"):
        open_store(url, cas="", conditional_writes=False).put_if_absent("other", b"z")


def test_put_if_match_on_an_object_deleted_since_it_was_read_conflicts(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    parts[0].put(P, b"7")
    store = two_phase(parts)
    _, meta = store.get_with_meta(P)
    parts[0].delete(P)
    with pytest.raises(ConflictError, match="vanished"):
        store.put_if_match(P, b"8", meta.e_tag)
    with pytest.raises(ObjectMissingError):
        store.get(P)
    assert store.record(P) is None and temps(parts[0]) == []


def test_an_unreachable_object_store_after_the_record_is_an_unknown_outcome(
        parts: tuple[ObjectStore, SqliteCasBackend]) -> None:
    from slatelib.testing.faulty import FlakyObjectStore

    flaky = FlakyObjectStore(parts[0])
    flaky.fail_before("get", path=re.compile(f"^{re.escape(P)}$"), times=1)
    with pytest.raises(CommitStateUnknownError):
        TwoPhaseObjectStore(flaky, parts[1]).put_if_absent(P, b"x")
    assert two_phase(parts).get(P) == b"x"  # durable: the next reader finishes it
