"""Conditional overwrites on the local file system (slatelib/objstore/local_cas.py,
docs/rfcs/0006-local-conditional-put.md): obstore's ETag, the sidecar lock, and exactly one
winner per round among racing threads and processes."""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path

import pytest

from slatelib.errors import AlreadyExistsError, ConflictError, StorageError
from slatelib.objstore import ObjectStore, local_cas, open_raw_store, open_store
from slatelib.objstore.local_cas import local_e_tag, lock_path, put_if_match_file

PATH = "db/gc/manifest.boundary"
ROUNDS = 12
CONTENDERS = 4


def test_local_etag_is_obstores_own(tmp_path: Path) -> None:
    store = open_raw_store(f"file://{tmp_path}")
    store.put("a/b", b"xyz")
    expected = local_e_tag(os.stat(tmp_path / "a" / "b"))
    assert store.head("a/b").e_tag == expected
    assert store.get_with_meta("a/b")[1].e_tag == expected
    assert [m.e_tag for m in store.list("a")] == [expected]


def test_put_if_match_returns_the_etag_head_reports_and_leaves_only_a_lock(tmp_path: Path) -> None:
    store = open_raw_store(f"file://{tmp_path}")
    e1 = store.put_if_match(PATH, b"1", None)
    assert e1 == store.head(PATH).e_tag
    assert [p.name for p in (tmp_path / "db" / "gc").iterdir()] == ["manifest.boundary"]
    e2 = store.put_if_match(PATH, b"22", e1)
    assert e2 == store.head(PATH).e_tag != e1
    assert sorted(p.name for p in (tmp_path / "db" / "gc").iterdir()) == [
        "manifest.boundary", "manifest.boundary.lock"]
    assert [m.path for m in store.list("db/gc")] == [PATH, lock_path(PATH)]
    assert store.get(PATH) == b"22"


def test_overwrite_gets_a_newer_mtime_so_an_etag_never_comes_back(tmp_path: Path) -> None:
    store = open_raw_store(f"file://{tmp_path}")
    seen = [store.put_if_match(PATH, b"0", None)]
    future = os.stat(tmp_path / PATH).st_mtime_ns + 10**12  # the old version is "newer"
    os.utime(tmp_path / PATH, ns=(future, future))
    seen[0] = store.head(PATH).e_tag
    for i in range(1, 6):  # same size every time: only the inode and mtime can differ
        seen.append(store.put_if_match(PATH, str(i).encode(), seen[-1]))
    assert len(set(seen)) == len(seen)
    assert os.stat(tmp_path / PATH).st_mtime_ns > future


def test_stale_etag_and_missing_object_conflict_without_writing(tmp_path: Path) -> None:
    store = open_raw_store(f"file://{tmp_path}")
    e1 = store.put_if_match(PATH, b"1", None)
    store.put_if_match(PATH, b"2", e1)
    with pytest.raises(ConflictError, match="overwritten meanwhile") as info:
        store.put_if_match(PATH, b"3", e1)
    assert not isinstance(info.value, AlreadyExistsError)
    with pytest.raises(AlreadyExistsError):
        store.put_if_match(PATH, b"3", None)
    with pytest.raises(ConflictError, match="no object to overwrite"):
        store.put_if_match("db/gc/other.boundary", b"3", e1)
    assert not (tmp_path / "db" / "gc" / "other.boundary").exists()
    assert store.get(PATH) == b"2"
    assert not [p for p in (tmp_path / "db" / "gc").iterdir() if "#" in p.name]


def test_a_directory_in_the_way_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / PATH).mkdir(parents=True)
    (tmp_path / PATH / "x").write_bytes(b"")
    with pytest.raises(StorageError, match="a directory is in the way"):
        put_if_match_file(str(tmp_path / PATH), b"1", '"1-2-3"', path=PATH)


def test_lock_file_removed_while_waiting_is_locked_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer that waited on a lock file someone removed (e.g. a destroy) must not go on
    holding the old file while a newcomer locks the new one: it locks the new one too."""
    lock = tmp_path / "gc" / "b.lock"
    lock.parent.mkdir()
    real_flock = local_cas.fcntl.flock
    calls: list[int] = []

    def flock(fd: int, op: int) -> None:
        if op == local_cas.fcntl.LOCK_EX and not calls:
            os.unlink(lock)  # removed while we waited for it
        calls.append(op)
        real_flock(fd, op)

    monkeypatch.setattr(local_cas.fcntl, "flock", flock)
    with local_cas._exclusive(str(lock)):
        held = lock.exists()
    assert held and calls.count(local_cas.fcntl.LOCK_EX) == 2


def _round(store: ObjectStore, e_tag: str, me: int) -> bool:
    try:
        store.put_if_match(PATH, f"{me:04d}".encode(), e_tag)
        return True
    except ConflictError:
        return False


def test_racing_threads_have_exactly_one_winner_per_round(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    store.put_if_match(PATH, b"init", None)
    for r in range(ROUNDS):
        e_tag = store.head(PATH).e_tag
        assert e_tag is not None
        barrier = threading.Barrier(CONTENDERS)
        wins: list[int] = []

        def contend(me: int, tag: str = e_tag, b: threading.Barrier = barrier,
                    won: list[int] = wins) -> None:
            b.wait()
            if _round(store, tag, me):
                won.append(me)

        threads = [threading.Thread(target=contend, args=(i,)) for i in range(CONTENDERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(wins) == 1, (r, wins)
        assert store.get(PATH) == f"{wins[0]:04d}".encode()


def _process_contender(root: str, me: int, rounds: int, start: object, done: object,
                       results: object) -> None:
    store = open_raw_store(f"file://{root}")
    for r in range(rounds):
        start.wait()  # type: ignore[attr-defined]
        e_tag = store.head(PATH).e_tag
        start.wait()  # type: ignore[attr-defined]  # everyone read the same version
        results.put((r, me, _round(store, e_tag or "", me)))  # type: ignore[attr-defined]
        done.wait()  # type: ignore[attr-defined]


def test_racing_processes_have_exactly_one_winner_per_round(tmp_path: Path) -> None:
    open_raw_store(f"file://{tmp_path}").put_if_match(PATH, b"init", None)
    ctx = multiprocessing.get_context("spawn")
    start, done = ctx.Barrier(CONTENDERS), ctx.Barrier(CONTENDERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=_process_contender,
                         args=(str(tmp_path), i, ROUNDS, start, done, results))
             for i in range(CONTENDERS)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in range(ROUNDS * CONTENDERS)]
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * CONTENDERS
    for r in range(ROUNDS):
        winners = [me for (rr, me, won) in outcomes if rr == r and won]
        assert len(winners) == 1, (r, winners)
    last = max(r for r, _, _ in outcomes)
    final = [me for (rr, me, won) in outcomes if rr == last and won][0]
    assert (tmp_path / PATH).read_bytes() == f"{final:04d}".encode()
