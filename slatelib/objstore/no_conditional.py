"""NoConditionalWritesStore: an object store that refuses conditional writes.

What the store option ``conditional_writes = false`` (``[object_store] conditional_writes``)
wraps around a store: ``put_if_absent`` and ``put_if_match`` raise ``StorageError`` and
never reach the backend. Use it for a store whose conditional writes cannot be trusted (an
older S3-compatible server, a NAS gateway, a proxy that strips ``If-None-Match``/``If-Match``,
all of which may *accept* the header and ignore it): with the ``cas`` option too, every CAS
goes through two-phase CAS (:mod:`slatelib.objstore.two_phase`), and without it every
operation that needs a CAS fails loudly instead of racing silently. Tests use it as a store
that really lacks conditional writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from slatelib.errors import StorageError
from slatelib.objstore.object_store import BytesLike, ObjectMeta, ObjectStore, check_path
from slatelib.objstore.spec import StoreSpec


class NoConditionalWritesStore:
    """Delegates everything to ``inner`` but the two conditional puts, which it refuses."""

    def __init__(self, inner: ObjectStore) -> None:
        self._inner = inner
        self.refused = 0
        """How many conditional puts were refused (for tests)."""

    @property
    def inner(self) -> ObjectStore:
        return self._inner

    @property
    def spec(self) -> StoreSpec:
        return self._inner.spec

    @property
    def url(self) -> str:
        return self._inner.url

    def __repr__(self) -> str:
        return f"NoConditionalWritesStore({self._inner!r})"

    def _refuse(self, op: str, path: str) -> StorageError:
        self.refused += 1
        return StorageError(
            f"{self.url}: {op} {path!r}: this store has no conditional writes "
            "(conditional_writes = false); configure a cas store ([object_store] cas) so "
            "that CAS goes through two-phase CAS")

    def put_if_absent(self, path: str, data: BytesLike) -> None:
        """Always refused.

        Raises:
            StorageError: always.
        """
        raise self._refuse("put_if_absent", check_path(path))

    def put_if_match(self, path: str, data: BytesLike, e_tag: str | None) -> str | None:
        """Always refused.

        Raises:
            StorageError: always.
        """
        raise self._refuse("put_if_match", check_path(path))

    def get(self, path: str) -> bytes:
        return self._inner.get(path)

    def get_with_meta(self, path: str) -> tuple[bytes, ObjectMeta]:
        return self._inner.get_with_meta(path)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self._inner.get_range(path, start, end)

    def get_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return self._inner.get_ranges(path, ranges)

    def head(self, path: str) -> ObjectMeta:
        return self._inner.head(path)

    def put(self, path: str, data: BytesLike) -> None:
        self._inner.put(path, data)

    def list(
        self, prefix: str, *, start_after: str | None = None, end_before: str | None = None
    ) -> Iterator[ObjectMeta]:
        return self._inner.list(prefix, start_after=start_after, end_before=end_before)

    def delete(self, path: str) -> None:
        self._inner.delete(path)

    def delete_many(self, paths: Iterable[str]) -> None:
        self._inner.delete_many(paths)
