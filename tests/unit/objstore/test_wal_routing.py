"""WalRoutedStore: WAL objects in the WAL store, everything else in the main store."""

from __future__ import annotations

import pickle
import uuid

import pytest

from slatelib.errors import InvalidArgumentError, ObjectMissingError
from slatelib.objstore import (
    ObjectStore,
    StoreSpec,
    WalRoutedStore,
    is_wal_path,
    main_store_of,
    open_store,
    wal_store_of,
    with_wal_store,
)


def _memory() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}/")


@pytest.mark.parametrize(("path", "routed"), [
    ("db/wal/00000000000000000001.sst", True),
    ("a/b/db/wal/00000000000000000042.sst", True),
    ("db/wal/00000000000000000001.sst.0123456789abcdef0123456789abcdef.01234567", True),
    ("wal/00000000000000000001.sst", True),  # a database at the store root
    ("db/wal/00000000000000000001.manifest", False),
    ("db/wal/README", False),
    ("db/compacted/01J0000000000000000000000A.sst", False),
    ("db/manifest/00000000000000000001.manifest", False),
    ("t/wal/.deleting", False),  # a database whose path ends in "wal"
    ("t/wal/manifest/00000000000000000001.manifest", False),
    ("db/xwal/00000000000000000001.sst", False),
])
def test_is_wal_path_names_exactly_the_wal_objects(path: str, routed: bool) -> None:
    assert is_wal_path(path) is routed


def test_every_operation_on_a_wal_object_goes_to_the_wal_store() -> None:
    main, wal = _memory(), _memory()
    routed = WalRoutedStore(main, wal)
    w, m = "db/wal/00000000000000000001.sst", "db/manifest/00000000000000000001.manifest"
    routed.put(w, b"wal")
    routed.put_if_absent(m, b"manifest")
    assert wal.get(w) == b"wal" and main.get(m) == b"manifest"
    with pytest.raises(ObjectMissingError):
        main.get(w)
    with pytest.raises(ObjectMissingError):
        wal.get(m)
    assert routed.get(w) == b"wal" and routed.head(w).size == 3
    assert routed.get_range(w, 1, 3) == b"al" and routed.get_ranges(w, [(0, 1)]) == [b"w"]
    etag = routed.get_with_meta(m)[1].e_tag
    routed.put_if_match(m, b"manifest2", etag)
    assert main.get(m) == b"manifest2"
    routed.delete_many([w, m])
    assert list(main.list("db")) == [] and list(wal.list("db")) == []


def test_a_listing_merges_both_stores_in_path_order_and_hides_the_other_side() -> None:
    main, wal = _memory(), _memory()
    for p in ("db/compacted/01J0000000000000000000000A.sst", "db/manifest/1.manifest",
              "db/wal/00000000000000000009.sst",  # a stray WAL object in the main store
              "db/wal/notes.txt"):
        main.put(p, b"m")
    for p in ("db/wal/00000000000000000001.sst", "db/wal/00000000000000000002.sst",
              "db/manifest/2.manifest"):  # a non-WAL object in the WAL store
        wal.put(p, b"w")
    listed = [x.path for x in WalRoutedStore(main, wal).list("db")]
    assert listed == ["db/compacted/01J0000000000000000000000A.sst", "db/manifest/1.manifest",
                      "db/wal/00000000000000000001.sst", "db/wal/00000000000000000002.sst",
                      "db/wal/notes.txt"]
    ranged = [x.path for x in WalRoutedStore(main, wal).list(
        "db/wal", start_after="db/wal/00000000000000000001.sst")]
    assert ranged == ["db/wal/00000000000000000002.sst", "db/wal/notes.txt"]


def test_the_spec_carries_the_wal_store_and_reopens_both() -> None:
    routed = open_store("memory://main-spec/", wal_store="memory://wal-spec/")
    spec = pickle.loads(pickle.dumps(routed.spec))
    assert spec.url == "memory://main-spec" and spec.wal == StoreSpec("memory://wal-spec")
    reopened = spec.open()
    reopened.put("db/wal/00000000000000000001.sst", b"x")
    assert open_store("memory://wal-spec/").get("db/wal/00000000000000000001.sst") == b"x"
    assert "wal=StoreSpec" in repr(spec)


def test_with_wal_store_attaches_replaces_keeps_and_removes() -> None:
    main = _memory()
    assert with_wal_store(main, None) is main
    assert with_wal_store(main, "") is main
    routed = with_wal_store(main, "memory://w1/")
    assert wal_store_of(routed) is not None and main_store_of(routed) is main
    assert with_wal_store(routed, None, default="memory://w2/") is routed  # its own wins
    assert wal_store_of(with_wal_store(routed, "memory://w2/")).url == "memory://w2"  # type: ignore[union-attr]
    assert with_wal_store(routed, "") is main
    assert wal_store_of(with_wal_store(main, None, default="memory://w3/")).url == "memory://w3"  # type: ignore[union-attr]
    assert wal_store_of(main) is None


def test_a_wal_store_that_is_the_main_store_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="is the database's store itself"):
        open_store("memory://same/", wal_store="memory://same/")
