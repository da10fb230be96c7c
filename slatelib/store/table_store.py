"""Compacted SSTs of a database and of the databases it was cloned from.

An SST id listed in ``external_dbs[i].sst_ids`` lives under ``external_dbs[i].path`` in the
same store (format §2); every other id lives under the database's own root.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Executor

from slatelib.core.manifest import SstHandle
from slatelib.format.sst import EncodedSst
from slatelib.ids import Ulid
from slatelib.objstore import ObjectStore, put_if_absent_unique
from slatelib.paths import DbPaths
from slatelib.store.sst_reader import DEFAULT_PREFETCH, BlockCache, SstReader


class TableStore:
    """Opens :class:`SstReader` objects and writes new SSTs.

    Readers are cheap and not kept here: what is worth keeping (decoded blocks, indexes,
    filters) lives in the bounded ``cache`` shared by every reader of this store, so a
    long-lived reader or writer does not accumulate metadata of every SST it ever read.
    """

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

    def sst_path(self, sst_id: Ulid, external: Mapping[Ulid, str] | None = None) -> str:
        root = (external or {}).get(sst_id)
        if root is None:
            return self.paths.compacted(sst_id)
        return DbPaths(root).compacted(sst_id)

    def reader(self, handle: SstHandle, external: Mapping[Ulid, str] | None = None) -> SstReader:
        """A reader of the SST ``handle`` names (under its source database when it is in
        ``external``)."""
        source = (external or {}).get(handle.id)
        hint = "" if source is None else (
            f" (an SST of the clone's source database {source!r}: clone sources resolve "
            f"inside the same store, {self.store.url}; is that the store root the clone was "
            "created in?)"
        )
        return SstReader(
            self.store, self.sst_path(handle.id, external), handle, cache=self.cache,
            executor=self.executor, prefetch=self.prefetch, missing_hint=hint,
        )

    def write_sst(self, sst_id: Ulid, encoded: EncodedSst) -> str:
        """Upload a new SST under the own root with create-if-absent. Its bytes are unique
        (a fresh ULID), so a lost response is resolved by reading the object back.

        Raises:
            AlreadyExistsError: another object with this id exists (never overwritten).
            CommitStateUnknownError: the outcome stays unknown (the read-back failed too).
        """
        path = self.paths.compacted(sst_id)
        put_if_absent_unique(self.store, path, encoded.to_bytes())
        return path
