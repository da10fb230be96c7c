"""ObstoreObjectStore on memory and local stores: every operation and its edge cases."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from slatelib.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    ObjectMissingError,
    StorageError,
)
from slatelib.objstore import ObjectMeta, ObjectStore, open_raw_store
from slatelib.objstore.byte_ranges import plan_spans
from slatelib.objstore.obstore_store import to_unix_ms


def paths(store: ObjectStore, prefix: str = "", **bounds: str) -> list[str]:
    return [m.path for m in store.list(prefix, **bounds)]


def test_put_get_head_round_trip(store: ObjectStore) -> None:
    before_ms = int(time.time() * 1000) - 2000
    store.put("a/b/c.bin", b"hello")
    assert store.get("a/b/c.bin") == b"hello"
    meta = store.head("a/b/c.bin")
    assert meta.path == "a/b/c.bin"
    assert meta.size == 5
    assert before_ms <= meta.last_modified_ms <= int(time.time() * 1000) + 2000
    assert meta.e_tag


def test_put_overwrites(store: ObjectStore) -> None:
    store.put("k", b"one")
    store.put("k", b"two")
    assert store.get("k") == b"two"


def test_put_accepts_bytearray_and_memoryview_and_empty(store: ObjectStore) -> None:
    store.put("ba", bytearray(b"xy"))
    store.put("mv", memoryview(b"abcdef")[1:3])
    store.put("empty", b"")
    assert (store.get("ba"), store.get("mv"), store.get("empty")) == (b"xy", b"bc", b"")
    assert store.head("empty").size == 0


def test_put_rejects_non_bytes(store: ObjectStore) -> None:
    with pytest.raises(InvalidArgumentError):
        store.put("k", "text")  # type: ignore[arg-type]


def test_get_with_meta_returns_matching_etag(store: ObjectStore) -> None:
    store.put("k", b"v1")
    data, meta = store.get_with_meta("k")
    assert data == b"v1"
    assert meta == store.head("k")


@pytest.mark.parametrize("op", ["get", "head", "get_with_meta"])
def test_missing_object_raises_object_missing_with_path(store: ObjectStore, op: str) -> None:
    with pytest.raises(ObjectMissingError) as info:
        getattr(store, op)("no/such/object")
    assert info.value.path == "no/such/object"


def test_missing_object_in_range_reads(store: ObjectStore) -> None:
    with pytest.raises(ObjectMissingError):
        store.get_range("nope", 0, 4)
    with pytest.raises(ObjectMissingError):
        store.get_ranges("nope", [(0, 1), (5, 6)])
    with pytest.raises(ObjectMissingError):
        store.get_range("nope", 3, 3)  # an empty range still checks existence


def test_get_range_inside_and_past_the_end(store: ObjectStore) -> None:
    store.put("o", b"0123456789")
    assert store.get_range("o", 2, 5) == b"234"
    assert store.get_range("o", 0, 10) == b"0123456789"
    assert store.get_range("o", 7, 20) == b"789"  # short read: the caller checks length
    assert store.get_range("o", 10, 12) == b""  # starts at the end
    assert store.get_range("o", 15, 20) == b""  # starts past the end
    assert store.get_range("o", 4, 4) == b""


@pytest.mark.parametrize(("start", "end"), [(-1, 3), (5, 4), (1.0, 2)])
def test_get_range_rejects_bad_ranges(store: ObjectStore, start: int, end: int) -> None:
    store.put("o", b"0123456789")
    with pytest.raises(InvalidArgumentError):
        store.get_range("o", start, end)


def test_get_ranges_in_request_order_with_overlaps_and_gaps(store: ObjectStore) -> None:
    data = bytes(range(256)) * 40
    store.put("o", data)
    ranges = [(9000, 9100), (0, 10), (5, 15), (3000, 3001), (100, 100), (10239, 10240)]
    assert store.get_ranges("o", ranges) == [data[s:e] for s, e in ranges]
    assert store.get_ranges("o", []) == []


def test_get_ranges_past_the_end_return_what_exists(store: ObjectStore) -> None:
    store.put("o", b"0123456789")
    got = store.get_ranges("o", [(0, 2), (8, 12), (10, 11), (50, 60), (3, 3)])
    assert got == [b"01", b"89", b"", b"", b""]


def test_plan_spans_coalesces_close_ranges_only() -> None:
    assert plan_spans([(0, 10), (15, 20), (100, 110)], coalesce=5) == [(0, 20), (100, 110)]
    assert plan_spans([(50, 60), (0, 100)], coalesce=0) == [(0, 100)]
    assert plan_spans([(5, 5)], coalesce=10) == []


def test_put_if_absent_creates_then_refuses(store: ObjectStore) -> None:
    store.put_if_absent("m/1", b"first")
    with pytest.raises(AlreadyExistsError) as info:
        store.put_if_absent("m/1", b"second")
    assert info.value.path == "m/1"
    assert isinstance(info.value, ConflictError)
    assert store.get("m/1") == b"first"


def test_put_if_match_none_means_create_if_absent(store: ObjectStore) -> None:
    e_tag = store.put_if_match("b", b"v1", None)
    assert e_tag == store.head("b").e_tag
    with pytest.raises(AlreadyExistsError):
        store.put_if_match("b", b"v2", None)
    assert store.get("b") == b"v1"


def test_put_if_match_swaps_on_matching_etag(store: ObjectStore) -> None:
    e1 = store.put_if_match("gc/boundary", b"v1", None)
    e2 = store.put_if_match("gc/boundary", b"v2", e1)
    assert e2 and e2 != e1
    assert store.get_with_meta("gc/boundary") == (b"v2", store.head("gc/boundary"))
    with pytest.raises(ConflictError) as info:
        store.put_if_match("gc/boundary", b"v3", e1)  # stale
    assert not isinstance(info.value, AlreadyExistsError)
    with pytest.raises(ConflictError):
        store.put_if_match("gc/missing", b"v", e1)  # nothing to match
    assert store.get("gc/boundary") == b"v2"


def test_put_if_match_rejects_empty_etag(store: ObjectStore) -> None:
    with pytest.raises(InvalidArgumentError):
        store.put_if_match("x", b"v", "")


def test_delete_is_idempotent(store: ObjectStore) -> None:
    store.put("d/x", b"1")
    store.delete("d/x")
    store.delete("d/x")
    store.delete("never/existed")
    with pytest.raises(ObjectMissingError):
        store.get("d/x")


def test_delete_many_mixes_present_and_missing(store: ObjectStore) -> None:
    for i in range(5):
        store.put(f"d/{i}", b"x")
    store.delete_many(["d/0", "missing/a", "d/2", "d/2", "missing/b", "d/4"])
    assert paths(store, "d") == ["d/1", "d/3"]
    store.delete_many([])


def test_delete_many_validates_everything_before_deleting(store: ObjectStore) -> None:
    store.put("d/1", b"x")
    with pytest.raises(InvalidArgumentError):
        store.delete_many(["d/1", "d/../etc"])
    assert paths(store, "d") == ["d/1"]
    with pytest.raises(InvalidArgumentError):
        store.delete_many("d/1")


def test_delete_many_in_batches(tmp_path: Path) -> None:
    store = open_raw_store(f"file://{tmp_path}")
    names = [f"b/{i:04d}" for i in range(2500)]
    for name in names:
        store.put(name, b"")
    store.delete_many(names[:2400] + ["b/missing"])
    assert paths(store, "b") == names[2400:]


def test_list_is_sorted_and_recursive(store: ObjectStore) -> None:
    written = ["db/wal/2.sst", "db/a", "db/wal/10.sst", "db/manifest/1.manifest", "db/z/y/x"]
    for p in written:
        store.put(p, b"")
    assert paths(store, "db") == sorted(written)
    listed = list(store.list("db"))
    assert all(isinstance(m, ObjectMeta) and m.size == 0 for m in listed)


def test_list_prefix_is_a_directory_not_a_string_prefix(store: ObjectStore) -> None:
    for p in ["db/x", "db/sub/y", "db-clone/x", "dbx/y", "db.txt", "d/b"]:
        store.put(p, b"")
    assert paths(store, "db") == ["db/sub/y", "db/x"]
    assert paths(store, "db/") == ["db/sub/y", "db/x"]
    assert paths(store, "db-clone") == ["db-clone/x"]
    assert paths(store, "d") == ["d/b"]
    assert paths(store, "") == ["d/b", "db-clone/x", "db.txt", "db/sub/y", "db/x", "dbx/y"]
    assert paths(store, "nothing/here") == []


def test_list_does_not_return_the_object_named_like_the_prefix(memory_store: ObjectStore) -> None:
    memory_store.put("db", b"")
    memory_store.put("db/x", b"")
    assert paths(memory_store, "db") == ["db/x"]
    assert paths(memory_store, "") == ["db", "db/x"]


def test_local_fs_cannot_hold_an_object_and_a_directory_of_one_name(
    local_store: ObjectStore,
) -> None:
    local_store.put("db/x", b"")
    with pytest.raises(StorageError):
        local_store.put("db", b"")
    with pytest.raises(AlreadyExistsError):
        local_store.put_if_absent("db", b"")


def test_list_bounds_are_exclusive_and_need_not_exist(store: ObjectStore) -> None:
    names = [f"w/{i:02d}.sst" for i in range(10)]
    for p in names:
        store.put(p, b"")
    assert paths(store, "w", start_after="w/03.sst") == names[4:]
    assert paths(store, "w", end_before="w/03.sst") == names[:3]
    assert paths(store, "w", start_after="w/02.sst", end_before="w/05.sst") == names[3:5]
    assert paths(store, "w", start_after="w/02x", end_before="w/05") == names[3:5]
    assert paths(store, "w", start_after="w/09.sst") == []
    assert paths(store, "w", start_after="a") == names
    assert paths(store, "w", end_before="z") == names
    assert paths(store, "w", start_after="w/05", end_before="w/03") == []


def test_list_bounds_that_are_not_valid_paths_still_filter(store: ObjectStore) -> None:
    for p in ["w/a", "w/b", "w/c"]:
        store.put(p, b"")
    assert paths(store, "w", start_after="w/a~", end_before="w/c\x00") == ["w/b", "w/c"]
    assert paths(store, "w", start_after="w//") == ["w/a", "w/b", "w/c"]


def test_list_range_split_equals_full_listing(store: ObjectStore) -> None:
    names = [f"s/{i:05d}" for i in range(0, 600, 3)]
    for p in names:
        store.put(p, b"")
    store.put("s-sibling/00000", b"")
    cuts: list[str | None] = [None, "s/00100", "s/00101", "s/00299x", "s/00599", None]
    pieces: list[str] = []
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        pieces += [m.path for m in store.list("s", start_after=lo, end_before=hi)]
    assert pieces == names == paths(store, "s")


def test_list_rejects_bad_prefix_and_bounds(store: ObjectStore) -> None:
    with pytest.raises(InvalidArgumentError):
        store.list("db/../x")
    with pytest.raises(InvalidArgumentError):
        store.list("db", start_after=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad", ["", "/abs", "a//b", "a/../../etc/passwd", "..", "a/./b", "trail/", "x#1", "b\\s"]
)
def test_invalid_paths_never_reach_storage(store: ObjectStore, bad: str) -> None:
    for call in (
        lambda: store.get(bad),
        lambda: store.put(bad, b"x"),
        lambda: store.put_if_absent(bad, b"x"),
        lambda: store.put_if_match(bad, b"x", None),
        lambda: store.head(bad),
        lambda: store.get_range(bad, 0, 1),
        lambda: store.delete(bad),
    ):
        with pytest.raises(InvalidArgumentError):
            call()
    assert paths(store) == []


def test_local_store_cannot_escape_its_root(tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"s")
    store = open_raw_store(f"file://{tmp_path}/root")
    with pytest.raises(InvalidArgumentError):
        store.get("../secret")
    store.put("inside", b"1")
    assert (tmp_path / "root" / "inside").read_bytes() == b"1"
    assert paths(store) == ["inside"]


def test_local_store_writes_plain_files_under_its_root(tmp_path: Path) -> None:
    store = open_raw_store(f"file://{tmp_path}/r")
    store.put("db/manifest/00000000000000000001.manifest", b"m")
    assert (tmp_path / "r/db/manifest/00000000000000000001.manifest").read_bytes() == b"m"


def test_to_unix_ms() -> None:
    from datetime import UTC, datetime

    assert to_unix_ms(datetime(1970, 1, 1, 0, 0, 1, 999999, tzinfo=UTC)) == 1999
    assert to_unix_ms(datetime(2024, 1, 1)) == 1704067200000


@pytest.mark.parametrize(
    ("bound", "floor"),
    [
        ("db/manifest/", "db/manifest"),
        ("db/wal/~", "db/wal"),
        ("db/a.b", "db/a.b"),
        ("db//x", "db"),
        ("db/../x", "db"),
        ("", None),
        ("/", None),
    ],
)
def test_offset_floor_is_the_longest_valid_path_prefix(bound: str, floor: str | None) -> None:
    from slatelib.objstore.obstore_store import _offset_floor

    assert _offset_floor(bound) == floor
    assert floor is None or floor <= bound
