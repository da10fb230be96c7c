"""Before a compaction's first write: may it fence, and are its sources sound?

:func:`judge_compactor` reads what storage says about the compactor epoch (slatelib's claim
records, the compactions file and its workers' heartbeats, the writer's latest manifest and
WAL SST) and returns a :class:`~slatelib.core.compactor_claim.ClaimVerdict`.
:func:`check_sources` reads the metadata of every input SST (index and bloom filter, by
ranged reads in parallel), so that a missing or damaged input is refused before the fence.
Data blocks are verified by the tasks that read them (their checksums), after the fence.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from slatelib.clock import Clock
from slatelib.core.compaction_plan import CompactionSpec
from slatelib.core.compactions import Compactions
from slatelib.core.compactor_claim import Activity, ClaimVerdict
from slatelib.core.manifest import Manifest
from slatelib.errors import SlateError
from slatelib.objstore import ObjectStore
from slatelib.ops.compaction.state import DbState
from slatelib.ops.engine import input_views
from slatelib.store.claim_store import ClaimStore, judge_manifest
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sequenced import Versioned
from slatelib.store.sst_reader import BlockCache, SstReader
from slatelib.store.table_store import TableStore
from slatelib.store.wal_store import WalStore

log = logging.getLogger(__name__)

SOURCE_CHECK_THREADS = 16


def _age_s(store: ObjectStore, path: str, now_ms: int) -> float | None:
    try:
        return max(0.0, (now_ms - store.head(path).last_modified_ms) / 1000.0)
    except SlateError:  # missing or unreadable: unknown
        return None


def read_activity(store: ObjectStore, root: str, manifest: Versioned[Manifest],
                  compactions: Versioned[Compactions] | None, now_ms: int) -> Activity:
    """Recent activity, best effort: a read that fails leaves its field unknown (None)."""
    ms = ManifestStore(store, root)
    manifest_age = _age_s(store, ms.path(manifest.id), now_ms)
    wal_age = None
    try:
        wal = WalStore(store, root)
        last = wal.last_wal_id(manifest.value.replay_after_wal_id)
        if last > manifest.value.replay_after_wal_id:
            wal_age = _age_s(store, wal.path(last), now_ms)
    except SlateError as exc:
        log.debug("could not find the newest WAL SST [db=%s, error=%s]", root, exc)
    if compactions is None:
        return Activity(manifest_age_s=manifest_age, wal_age_s=wal_age)
    beats = [c.worker.last_heartbeat_ms for c in compactions.value.recent_compactions
             if c.worker is not None and c.worker.last_heartbeat_ms > 0]
    return Activity(
        compactions_epoch=compactions.value.compactor_epoch,
        compactions_age_s=_age_s(store, CompactionsStore(store, root).path(compactions.id),
                                 now_ms),
        heartbeat_age_s=max(0.0, (now_ms - max(beats)) / 1000.0) if beats else None,
        manifest_age_s=manifest_age, wal_age_s=wal_age,
    )


def judge_compactor(store: ObjectStore, root: str, state: DbState, clock: Clock,
                    ) -> ClaimVerdict:
    """Who holds the compactor epoch of ``state``, with the activity storage shows."""
    comp = state.compactions
    activity = read_activity(store, root, state.manifest, comp, clock.now_ms())
    return judge_manifest(ManifestStore(store, root), ClaimStore(store, root),
                          state.manifest.value,
                          compactions_epoch=None if comp is None else comp.value.compactor_epoch,
                          activity=activity)


def check_sources(store: ObjectStore, root: str, manifest: Manifest,
                  specs: Sequence[CompactionSpec], *, threads: int = SOURCE_CHECK_THREADS,
                  cache: BlockCache | None = None) -> int:
    """Read the index and bloom filter of every input SST of ``specs``. Returns how many
    SSTs were checked. The indexes land in ``cache`` (when given) for the range split.

    Raises:
        CorruptObjectError: an unsafe ``external_dbs`` path, or damaged SST metadata
            (naming the SST and the region).
        SstMissingError: an input SST is missing (naming its path).
    """
    tables = TableStore(store, root)
    views = {iv.task_view.path: iv.task_view for spec in specs
             for iv in input_views(spec, manifest, tables)}

    def check(path: str) -> None:
        tv = views[path]
        reader = SstReader(store, path, tv.handle, cache=cache)
        reader.index()
        reader.bloom_filter()

    if views:
        with ThreadPoolExecutor(max(1, min(threads, len(views))),
                                thread_name_prefix="compact-check") as pool:
            list(pool.map(check, sorted(views)))
    return len(views)
