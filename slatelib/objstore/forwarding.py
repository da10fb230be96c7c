"""ForwardingStore: the base of every store wrapper; it forwards each :class:`ObjectStore`
method to the wrapped store, and a wrapper overrides only what it changes.

The wrappers: :class:`~slatelib.objstore.retrying.RetryingObjectStore` (retries),
:class:`~slatelib.objstore.two_phase.TwoPhaseObjectStore` (conditional writes through a
transactional store), :class:`~slatelib.objstore.no_conditional.NoConditionalWritesStore`
(refuses conditional writes) and :class:`slatelib.testing.FlakyObjectStore` (injected
faults). A wrapper is the store it wraps for everything it leaves alone: the same
:class:`StoreSpec` (so Spark executors reopen the same store) and URL.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import cast

from slatelib.objstore.object_store import BytesLike, ObjectMeta, ObjectStore
from slatelib.objstore.spec import StoreSpec

__all__ = ["ForwardingStore"]


class ForwardingStore:
    """An :class:`ObjectStore` that forwards every call to ``inner``."""

    def __init__(self, inner: ObjectStore) -> None:
        self._inner = inner

    @property
    def inner(self) -> ObjectStore:
        """The wrapped store."""
        return self._inner

    @property
    def spec(self) -> StoreSpec:
        return self._inner.spec

    @property
    def url(self) -> str:
        return self._inner.url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inner!r})"

    def get(self, path: str) -> bytes:
        return self._inner.get(path)

    def get_with_meta(self, path: str) -> tuple[bytes, ObjectMeta]:
        return self._inner.get_with_meta(path)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self._inner.get_range(path, start, end)

    def get_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return self._inner.get_ranges(path, ranges)

    def get_range_buffer(self, path: str, start: int, end: int) -> memoryview | bytes:
        """:meth:`get_range` as any buffer (see :func:`read_range_buffer`). A wrapper's own
        ``get_range`` (this one's default) unless the wrapper passes the buffer through."""
        return self.get_range(path, start, end)

    def head(self, path: str) -> ObjectMeta:
        return self._inner.head(path)

    def put(self, path: str, data: BytesLike) -> None:
        self._inner.put(path, data)

    def put_if_absent(self, path: str, data: BytesLike) -> None:
        self._inner.put_if_absent(path, data)

    def put_if_match(self, path: str, data: BytesLike, e_tag: str | None) -> str | None:
        return self._inner.put_if_match(path, data, e_tag)

    def list(
        self, prefix: str, *, start_after: str | None = None, end_before: str | None = None
    ) -> Iterator[ObjectMeta]:
        return self._inner.list(prefix, start_after=start_after, end_before=end_before)

    def delete(self, path: str) -> None:
        self._inner.delete(path)

    def delete_many(self, paths: Iterable[str]) -> None:
        self._inner.delete_many(paths)


def read_range_buffer(store: ObjectStore, path: str, start: int, end: int,
                      ) -> memoryview | bytes:
    """``store.get_range(path, start, end)`` as a read-only buffer: without the copy into
    ``bytes`` where the store can (an obstore-backed store under pass-through wrappers:
    retries), else the bytes themselves. For readers that take any buffer.

    Raises:
        As :meth:`ObjectStore.get_range`.
    """
    fn = getattr(store, "get_range_buffer", None)
    if fn is None:
        return store.get_range(path, start, end)
    return cast("memoryview | bytes", fn(path, start, end))
