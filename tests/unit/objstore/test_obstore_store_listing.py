"""ObstoreObjectStore.list a chunk at a time: the directory prefix, exclusive bounds, sorted
output and the out-of-order check, on chunks far smaller than the listing (memory: streamed
and checked; local: collected and sorted here), against a filter applied path by path."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import obstore
import pytest

from slatelib.errors import StorageError
from slatelib.objstore import ObjectMeta, ObjectStore, open_raw_store
from slatelib.objstore.obstore_store import ObstoreObjectStore, to_unix_ms

NAMES = ["a", "c/db", "d/b", "db-c/x", "db.txt", "db/a", "db/m/1", "db/m/2", "db/sub/y",
         "db/w/00.sst", "db/w/01.sst", "db/w/10.sst", "db/z", "db0", "dbx/y", "e"]
"""Objects around the directory ``db`` (``db-c``, ``db.txt``, ``db0`` sort on both sides)."""


def _small_chunks(store: ObjectStore, size: int) -> ObstoreObjectStore:
    assert isinstance(store, ObstoreObjectStore)
    store._list_chunk = size
    return store


def _wanted(names: list[str], pre: str, start_after: str | None,
            end_before: str | None) -> list[str]:
    under = pre.strip("/") + "/" if pre.strip("/") else ""
    return sorted(p for p in names if p.startswith(under)
                  and (start_after is None or p > start_after)
                  and (end_before is None or p < end_before))


@pytest.mark.parametrize("kind", ["memory", "memory with root", "local"])
@pytest.mark.parametrize("chunk", [1, 2, 3, 1000])
def test_list_equals_the_path_by_path_filter_for_any_prefix_and_bounds(
    kind: str, chunk: int, tmp_path: Path
) -> None:
    url = {"memory": "memory://lst/", "memory with root": "memory://lst/some/root",
           "local": f"file://{tmp_path}/root"}[kind]
    store = _small_chunks(open_raw_store(url), chunk)
    names = NAMES + (["db"] if kind != "local" else [])  # a file cannot also be a folder
    for name in names:
        store.put(name, b"x" * len(name))
    r = random.Random(chunk)
    bounds: list[str | None] = [None, "", "db", "db/", "db/m", "db/m/1", "db/m/~", "db/w/01",
                                "db/w/01.sst", "db0", "db/zz", "db//", "z", "db/\x00"]
    for pre in ["", "db", "db/", "db/m", "db/w", "d", "c", "nothing"]:
        for _ in range(25):
            lo, hi = r.choice(bounds), r.choice(bounds)
            got = list(store.list(pre, start_after=lo, end_before=hi))
            assert [m.path for m in got] == _wanted(names, pre, lo, hi), (pre, lo, hi)
            assert all(m.size == len(m.path) for m in got)


class _FakeStream:
    """What ``obstore.list`` returns: an iterator of chunks (lists of raw dicts)."""

    def __init__(self, chunks: list[list[str]]) -> None:
        when = datetime(2026, 11, 25, 10, 0, 0, 123456, tzinfo=UTC)
        self._chunks = iter([[{"path": p, "size": 1, "last_modified": when, "e_tag": "e",
                               "version": None} for p in c] for c in chunks])

    def __iter__(self) -> Iterator[list[dict[str, Any]]]:
        return self._chunks


def _backend_listing(monkeypatch: pytest.MonkeyPatch, chunks: list[list[str]]) -> ObjectStore:
    store = open_raw_store("memory://order/")
    monkeypatch.setattr(obstore, "list", lambda *a, **k: _FakeStream(chunks))
    return store


@pytest.mark.parametrize(("chunks", "bad", "after"), [
    ([["db/a", "db/c", "db/b"]], "db/b", "db/c"),
    ([["db/a", "db/b"], ["db/b", "db/c"]], "db/b", "db/b"),  # repeated across chunks
    ([["db/a", "db/c"], ["db/b"]], "db/b", "db/c"),
    ([["db/a", "db/a"]], "db/a", "db/a"),
])
def test_a_backend_listing_out_of_order_is_an_error_naming_both_paths(
    monkeypatch: pytest.MonkeyPatch, chunks: list[list[str]], bad: str, after: str
) -> None:
    store = _backend_listing(monkeypatch, chunks)
    with pytest.raises(StorageError, match="does not list in lexicographic order") as err:
        list(store.list("db"))
    assert f"returned {bad!r} after {after!r}" in str(err.value)


def test_a_sorted_backend_listing_streams_and_converts_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = _backend_listing(monkeypatch, [["db", "db/a"], ["db/b"], ["db/c", "dc"]])
    got = list(store.list("db"))
    assert [m.path for m in got] == ["db/a", "db/b", "db/c"]
    when = datetime(2026, 11, 25, 10, 0, 0, 123456, tzinfo=UTC)
    assert got[0] == ObjectMeta("db/a", 1, to_unix_ms(when), "e", None)
    assert got[0].last_modified_ms == 1_795_600_800_123


def test_naive_listing_times_are_taken_as_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_raw_store("memory://naive/")
    raw = {"path": "db/a", "size": 3, "last_modified": datetime(1970, 1, 1, 0, 0, 1)}
    monkeypatch.setattr(obstore, "list", lambda *a, **k: iter([[raw]]))
    assert list(store.list("db")) == [ObjectMeta("db/a", 3, 1000, None, None)]


def test_prefix_and_bounds_hold_on_a_backend_that_lists_more_than_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backend may return paths outside the directory (the object named like it, or
    more): the store keeps exactly the paths below it within the bounds, in any chunking."""
    names = sorted([*NAMES, "db", "db/", "dc", "db/~"])
    r = random.Random(3)
    bounds: list[str | None] = [None, "", "db", "db/", "db/m", "db/m/1", "db/m/~", "db/w/01",
                                "db/w/01.sst", "db0", "db/zz", "db//", "z", "db/\x00", "a"]
    for _ in range(400):
        cuts = sorted(r.sample(range(1, len(names)), r.randint(0, 6)))
        chunks = [names[a:b] for a, b in zip([0, *cuts], [*cuts, len(names)], strict=True)]
        pre, lo, hi = r.choice(["", "db", "db/m", "d", "nothing"]), r.choice(bounds), \
            r.choice(bounds)
        store = _backend_listing(monkeypatch, chunks)
        got = [m.path for m in store.list(pre, start_after=lo, end_before=hi)]
        assert got == _wanted(names, pre, lo, hi), (chunks, pre, lo, hi)


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_listing_pauses_the_collector_only_while_it_converts(
    kind: str, tmp_path: Path
) -> None:
    """The consumer of a listing runs with the collector as it was, between items too."""
    import gc

    url = "memory://gcl/" if kind == "memory" else f"file://{tmp_path}/root"
    store = _small_chunks(open_raw_store(url), 2)
    for name in NAMES:
        store.put(name, b"")
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            seen = [gc.isenabled() for _ in store.list("")]
            assert seen == [enabled] * len(NAMES) and gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
