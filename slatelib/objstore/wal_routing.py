"""A store whose WAL objects live in a second object store (0.17's ``with_wal_object_store``).

SlateDB 0.17 can keep a database's WAL in its own object store (``DbBuilder``,
``DbReaderBuilder`` and ``AdminBuilder`` ``.with_wal_object_store``, e.g. S3 Express for the
WAL). The WAL objects then have the same names inside that store as they would have in the
main one, ``<db path>/wal/<20-digit id>.sst`` (format §2), and everything else stays in the
main store. A V2 manifest does not record the WAL store: it is per-process configuration.

:class:`WalRoutedStore` is the one seam that implements it for every part of slatelib: it
is an :class:`~slatelib.objstore.ObjectStore` that sends every operation on a WAL object
(:func:`is_wal_path`) to the WAL store and everything else to the main store; a listing
merges the main store's non-WAL objects with the WAL store's WAL objects, in path order. So
readers, writers, GC, compaction, clones, destroy and ``ls`` find the WAL where 0.17 puts
it without knowing about it, and Spark executors reopen both stores from the
:class:`~slatelib.objstore.StoreSpec` (its ``wal`` part). WAL-named objects that lie in the
main store's ``wal/`` directories are not seen through it, as 0.17 does not see them when it
is given a WAL store (its GC lists only the WAL store's ``wal/``).

:func:`slatelib.objstore.registry.with_wal_store` attaches a WAL store to a store
(``open_store(url, wal_store=...)``, ``Db.open(..., wal_store=...)`` and every entry point
with a ``wal_store`` argument).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator, Sequence

from slatelib.errors import InvalidArgumentError
from slatelib.objstore.object_store import BytesLike, ObjectMeta, ObjectStore
from slatelib.objstore.spec import StoreSpec
from slatelib.paths import WAL_DIR

_WAL_FILE = re.compile(r"[0-9]+\.sst(\..+)?")
"""A WAL SST's file name, also with a two-phase CAS temporary suffix
(``<final>.<uuid>.<crc32>``, docs/rfcs/0012-two-phase-cas.md)."""


def is_wal_path(path: str) -> bool:
    """True for a WAL object: ``.../wal/<digits>.sst`` (or its two-phase temporary name),
    the objects 0.17 keeps in the WAL store. Pure."""
    head, _, name = path.rpartition("/")
    parent = head.rpartition("/")[2]
    return parent == WAL_DIR and _WAL_FILE.fullmatch(name) is not None


class WalRoutedStore:
    """The main store ``main`` with its WAL objects in ``wal`` (see the module).

    ``url`` is the main store's (reports and messages name a database by it);
    :attr:`wal_url` is the WAL store's.
    """

    def __init__(self, main: ObjectStore, wal: ObjectStore) -> None:
        if isinstance(main, WalRoutedStore) or isinstance(wal, WalRoutedStore):
            raise InvalidArgumentError("a WAL store cannot itself have a WAL store")
        self.main = main
        self.wal = wal

    @property
    def spec(self) -> StoreSpec:
        return self.main.spec.with_wal(self.wal.spec)

    @property
    def url(self) -> str:
        return self.main.url

    @property
    def wal_url(self) -> str:
        return self.wal.url

    def __repr__(self) -> str:
        return f"WalRoutedStore({self.main!r}, wal={self.wal!r})"

    def store_for(self, path: str) -> ObjectStore:
        """The store that holds ``path``."""
        return self.wal if is_wal_path(path) else self.main

    def get(self, path: str) -> bytes:
        return self.store_for(path).get(path)

    def get_with_meta(self, path: str) -> tuple[bytes, ObjectMeta]:
        return self.store_for(path).get_with_meta(path)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self.store_for(path).get_range(path, start, end)

    def get_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return self.store_for(path).get_ranges(path, ranges)

    def head(self, path: str) -> ObjectMeta:
        return self.store_for(path).head(path)

    def put(self, path: str, data: BytesLike) -> None:
        self.store_for(path).put(path, data)

    def put_if_absent(self, path: str, data: BytesLike) -> None:
        self.store_for(path).put_if_absent(path, data)

    def put_if_match(self, path: str, data: BytesLike, e_tag: str | None) -> str | None:
        return self.store_for(path).put_if_match(path, data, e_tag)

    def list(
        self, prefix: str, *, start_after: str | None = None, end_before: str | None = None
    ) -> Iterator[ObjectMeta]:
        """The main store's objects but WAL objects, merged in path order with the WAL
        store's WAL objects (both listings are lazy)."""
        main = (m for m in self.main.list(prefix, start_after=start_after, end_before=end_before)
                if not is_wal_path(m.path))
        wal = (m for m in self.wal.list(prefix, start_after=start_after, end_before=end_before)
               if is_wal_path(m.path))
        return heapq.merge(main, wal, key=lambda m: m.path)

    def delete(self, path: str) -> None:
        self.store_for(path).delete(path)

    def delete_many(self, paths: Iterable[str]) -> None:
        wal_paths: list[str] = []
        main_paths: list[str] = []
        for p in paths:
            (wal_paths if is_wal_path(p) else main_paths).append(p)
        if main_paths:
            self.main.delete_many(main_paths)
        if wal_paths:
            self.wal.delete_many(wal_paths)


def wal_store_of(store: ObjectStore) -> ObjectStore | None:
    """The separate WAL store ``store`` routes WAL objects to (None: the WAL lives in
    ``store`` itself). Looks through wrappers that expose ``inner``."""
    seen = store
    for _ in range(8):
        if isinstance(seen, WalRoutedStore):
            return seen.wal
        inner = getattr(seen, "inner", None)
        if inner is None:
            return None
        seen = inner
    return None


def main_store_of(store: ObjectStore) -> ObjectStore:
    """The store that holds everything but the WAL (``store`` itself when it has no
    separate WAL store)."""
    return store.main if isinstance(store, WalRoutedStore) else store


__all__ = ["WalRoutedStore", "is_wal_path", "main_store_of", "wal_store_of"]
