"""Builders for GC tests: manifests with chosen SST ULIDs, and small databases written
object by object into any store (memory, local, S3), so that every GC rule can be set up
exactly. Shared by the GC unit, integration, Spark and interop tests."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from slatelib.core.compactions import (
    Compaction,
    Compactions,
    CompactionStatus,
    TieredCompactionSpec,
)
from slatelib.core.manifest import (
    Checkpoint,
    ExternalDb,
    Manifest,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstView,
)
from slatelib.format.compactions_codec import encode_compactions
from slatelib.format.manifest_codec import encode_manifest
from slatelib.ids import Ulid
from slatelib.objstore import ObjectMeta, ObjectStore
from slatelib.paths import DbPaths

MIN = 60_000
HOUR = 3_600_000
INFO = SsTableInfo(first_entry=b"a", last_entry=b"z", index_offset=0, index_len=0,
                   filter_offset=0, filter_len=0)
_counter = itertools.count(1)


def ulid_at(ms: int, rand: int | None = None) -> Ulid:
    """A ULID minted at ``ms`` (a fresh random part unless given)."""
    return Ulid((ms << 80) | (next(_counter) if rand is None else rand))


def handle(sid: int) -> SstHandle:
    return SstHandle(Ulid(sid), INFO)


def manifest(
    *,
    l0: Sequence[int] = (),
    runs: dict[int, Sequence[int]] | None = None,
    checkpoints: Sequence[Checkpoint] = (),
    replay_after: int = 0,
    last_seen: int = 0,
    external_dbs: Sequence[ExternalDb] = (),
    last_compacted: int | None = None,
    destroyed_at_s: int | None = None,
) -> Manifest:
    """A manifest whose L0 views and sorted runs reference the given SST ids."""
    runs = runs or {}
    ids = [*l0, *(i for ssts in runs.values() for i in ssts)]
    m = Manifest(checkpoints=tuple(checkpoints), replay_after_wal_id=replay_after,
                 wal_id_last_seen=last_seen, external_dbs=tuple(external_dbs),
                 last_compacted_l0_sst_view_id=None if last_compacted is None
                 else Ulid(last_compacted), destroyed_at_s=destroyed_at_s)
    return m.with_trees(
        l0=[SstView.identity(Ulid(i)) for i in l0],
        compacted=[SortedRun(rid, tuple(SstView.identity(Ulid(i)) for i in ssts))
                   for rid, ssts in sorted(runs.items(), reverse=True)],
        new_ssts=[handle(i) for i in dict.fromkeys(ids)],
    )


def checkpoint(manifest_id: int, *, expire_s: int | None = None, name: str | None = None,
               cid: uuid.UUID | None = None) -> Checkpoint:
    return Checkpoint(id=cid or uuid.uuid4(), manifest_id=manifest_id, expire_time_s=expire_s,
                      create_time_s=1, name=name)


def compactions(*ids_status: tuple[int, CompactionStatus]) -> Compactions:
    return Compactions(compactor_epoch=1, recent_compactions=tuple(
        Compaction(Ulid(cid), TieredCompactionSpec(destination=0), status)
        for cid, status in ids_status))


@dataclass
class DbWriter:
    """Writes the objects of one test database directly (no writer involved)."""

    store: ObjectStore
    root: str
    manifests: list[int] = field(default_factory=list)

    @property
    def paths(self) -> DbPaths:
        return DbPaths.of(self.root)

    def manifest(self, mid: int, m: Manifest) -> str:
        path = self.paths.manifest(mid)
        self.store.put(path, encode_manifest(m))
        self.manifests.append(mid)
        return path

    def manifests_upto(self, latest_id: int, latest: Manifest,
                       older: Iterable[int] | None = None) -> None:
        """Manifests ``1 .. latest_id - 1`` (copies of ``latest`` without checkpoints) and
        ``latest`` as ``latest_id``."""
        for mid in older if older is not None else range(1, latest_id):
            self.manifest(mid, replace(latest, checkpoints=()))
        self.manifest(latest_id, latest)

    def compactions(self, cid: int, c: Compactions) -> str:
        path = self.paths.compactions(cid)
        self.store.put(path, encode_compactions(c))
        return path

    def wal(self, wid: int, size: int = 10) -> str:
        path = self.paths.wal(wid)
        self.store.put(path, b"w" * size)
        return path

    def sst(self, sid: int, size: int = 20) -> str:
        path = self.paths.compacted(sid)
        self.store.put(path, b"s" * size)
        return path

    def listing(self) -> set[str]:
        return {m.path for m in self.store.list(self.root)}


class HookedStore:
    """Delegates to ``inner``; ``before_put_if_absent(path)`` runs before each create,
    ``listing(prefix)`` may replace a listing (return None to list for real)."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.before_put_if_absent: Callable[[str], None] | None = None
        self.listing: Callable[[str], list[ObjectMeta] | None] | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def put_if_absent(self, path: str, data: bytes) -> None:
        hook, self.before_put_if_absent = self.before_put_if_absent, None
        if hook is not None:
            hook(path)
        self.inner.put_if_absent(path, data)

    def list(self, prefix: str, *, start_after: str | None = None,
             end_before: str | None = None) -> Iterator[ObjectMeta]:
        got = self.listing(prefix) if self.listing is not None else None
        if got is None:
            return self.inner.list(prefix, start_after=start_after, end_before=end_before)
        return iter([m for m in got if (start_after is None or m.path > start_after)
                     and (end_before is None or m.path < end_before)])
