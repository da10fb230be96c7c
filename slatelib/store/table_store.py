"""Compacted SSTs of a database and of the databases it was cloned from.

An SST id listed in ``external_dbs[i].sst_ids`` lives under ``external_dbs[i].path`` in the
same store (spec 2); every other id lives under the database's own root.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Executor

from slatelib.core.manifest import Manifest, SstHandle
from slatelib.errors import CorruptObjectError, InvalidArgumentError
from slatelib.format.sst import EncodedSst
from slatelib.ids import Ulid
from slatelib.objstore import ObjectStore
from slatelib.paths import DbPaths, normalize_path
from slatelib.store.sst_reader import DEFAULT_PREFETCH, BlockCache, SstReader


def external_roots(manifest: Manifest) -> dict[Ulid, str]:
    """SST id -> validated root path of the external database holding it.

    Raises:
        CorruptObjectError: an ``external_dbs`` path is malformed or escapes the store
            (``..``, empty segments, ...).
    """
    out: dict[Ulid, str] = {}
    for ext in manifest.external_dbs:
        try:
            root = normalize_path(ext.path, what="external database path", allow_empty=False)
        except InvalidArgumentError as exc:
            raise CorruptObjectError(f"manifest external_dbs entry is unsafe: {exc}") from exc
        for sid in ext.sst_ids:
            out[sid] = root
    return out


class TableStore:
    """Opens :class:`SstReader` objects (cached per object) and writes new SSTs."""

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        *,
        cache: BlockCache | None = None,
        executor: Executor | None = None,
        prefetch: int = DEFAULT_PREFETCH,
    ) -> None:
        self.store = store
        self.paths = DbPaths.of(root)
        self.cache = cache
        self.executor = executor
        self.prefetch = prefetch
        self._readers: dict[str, SstReader] = {}
        self._lock = threading.Lock()

    def sst_path(self, sst_id: Ulid, external: Mapping[Ulid, str] | None = None) -> str:
        root = (external or {}).get(sst_id)
        if root is None:
            return self.paths.compacted(sst_id)
        return DbPaths(root).compacted(sst_id)

    def reader(self, handle: SstHandle, external: Mapping[Ulid, str] | None = None) -> SstReader:
        path = self.sst_path(handle.id, external)
        with self._lock:
            r = self._readers.get(path)
            if r is None or r.handle != handle:
                r = SstReader(
                    self.store, path, handle, cache=self.cache, executor=self.executor,
                    prefetch=self.prefetch,
                )
                self._readers[path] = r
            return r

    def forget(self, keep: set[str]) -> None:
        """Drop cached readers of objects not in ``keep`` (after a manifest refresh)."""
        with self._lock:
            for p in list(self._readers):
                if p not in keep:
                    del self._readers[p]

    def write_sst(self, sst_id: Ulid, encoded: EncodedSst) -> str:
        """Upload a new SST under the own root with create-if-absent (ids are unique ULIDs).

        Raises:
            AlreadyExistsError: an object with this id exists (never overwritten).
        """
        path = self.paths.compacted(sst_id)
        self.store.put_if_absent(path, encoded.to_bytes())
        return path
