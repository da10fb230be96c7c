"""ForwardingStore (slatelib/objstore/forwarding.py): the one base of the store wrappers."""

from __future__ import annotations

import pytest

from slatelib.objstore import (
    OPS,
    ForwardingStore,
    NoConditionalWritesStore,
    RetryingObjectStore,
    TwoPhaseObjectStore,
    open_raw_store,
    reset_memory_stores,
)
from slatelib.testing.faulty import FlakyObjectStore

WRAPPERS = (NoConditionalWritesStore, RetryingObjectStore, TwoPhaseObjectStore,
            FlakyObjectStore)


@pytest.fixture(autouse=True)
def _fresh_memory() -> None:
    reset_memory_stores()


def test_every_object_store_method_is_forwarded_to_the_inner_store() -> None:
    inner = open_raw_store("memory://fwd/")
    store = ForwardingStore(inner)
    assert all(callable(getattr(store, op)) for op in OPS)
    assert (store.inner, store.spec, store.url) == (inner, inner.spec, inner.url)
    store.put("a", b"1")
    store.put_if_absent("b", b"22")
    _, meta = store.get_with_meta("b")
    assert store.put_if_match("b", b"333", meta.e_tag) is not None
    assert inner.get("a") == b"1" and store.get("b") == b"333"
    assert store.get_range("b", 1, 3) == b"33" and store.get_ranges("b", [(0, 1)]) == [b"3"]
    assert store.head("a").size == 1
    assert [m.path for m in store.list("")] == ["a", "b"]
    store.delete("a")
    store.delete_many(["b"])
    assert list(inner.list("")) == []
    assert repr(store) == f"ForwardingStore({inner!r})"


@pytest.mark.parametrize("wrapper", WRAPPERS, ids=lambda w: w.__name__)
def test_each_wrapper_is_a_forwarding_store_and_keeps_no_preamble_of_its_own(
        wrapper: type) -> None:
    assert issubclass(wrapper, ForwardingStore)
    assert not {"inner", "spec", "url"} & set(vars(wrapper))


def test_a_wrapper_overrides_only_what_it_changes() -> None:
    assert set(vars(NoConditionalWritesStore)) & set(OPS) == {"put_if_absent", "put_if_match"}
    store = NoConditionalWritesStore(open_raw_store("memory://fwd/"))
    store.put("k", b"v")  # forwarded
    assert store.get("k") == b"v" and store.spec == store.inner.spec
