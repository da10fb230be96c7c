"""NoConditionalWritesStore refuses both conditional puts and passes everything else on."""

from __future__ import annotations

import pytest

from slatelib.errors import StorageError
from slatelib.objstore import ObjectStore
from slatelib.objstore.no_conditional import NoConditionalWritesStore


def test_conditional_puts_are_refused_and_nothing_is_written(store: ObjectStore) -> None:
    bare = NoConditionalWritesStore(store)
    with pytest.raises(StorageError, match="no conditional writes"):
        bare.put_if_absent("db/manifest/00000000000000000001.manifest", b"x")
    with pytest.raises(StorageError, match="no conditional writes"):
        bare.put_if_match("db/gc/manifest.boundary", b"1", None)
    assert bare.refused == 2
    assert list(bare.list("")) == []
    bare.put("db/a", b"1")
    assert bare.get("db/a") == b"1" and bare.head("db/a").size == 1
    assert bare.get_range("db/a", 0, 1) == b"1" and bare.get_ranges("db/a", [(0, 1)]) == [b"1"]
    assert bare.get_with_meta("db/a")[0] == b"1"
    assert [m.path for m in bare.list("db")] == ["db/a"]
    bare.delete_many(["db/a"])
    bare.delete("db/a")
    assert list(bare.list("")) == [] and bare.spec == store.spec and bare.url == store.url
