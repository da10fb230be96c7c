"""Health numbers of one database, from its manifests and one listing of its objects. Pure.

:func:`compute_db_stats` turns what :func:`slatelib.ops.db_stats.collect_db_stats` read (the
latest manifest, the manifests its live checkpoints pin, the latest compactions file, the
compactor-claim verdict and one recursive listing of the database root) into a frozen
:class:`DbStats`: the numbers ``slate health`` prints and the per-database Prometheus gauges
export (docs/health.md lists every field). Nothing here reads storage.

Definitions (the ones a reader could get wrong):

- **L0 SSTs** are L0 views, summed over every tree (the top-level one and each segment,
  :mod:`slatelib.core.segments`); ``l0_ssts_by_segment`` splits them per tree when the
  database has segments. ``l0_ssts_max_tree`` is the deepest tree's count: 0.17 stalls a
  writer when one tree reaches ``l0_max_ssts``.
- **Sorted runs** are counted over every tree; each run's size is the sum of its views'
  SST sizes as listed (an SST outside this root, a clone parent's, is estimated from its
  manifest entry: the end of its last region, a lower bound).
- **WAL SSTs to replay** (``wal_ssts_to_replay``): non-empty WAL SSTs with an id above the
  latest manifest's ``replay_after_wal_id``. A reopen replays exactly these (the replay
  point is behind them: their rows are in no L0 yet); a growing count means a writer that
  is not flushing its memtable. ``wal_ssts_replayed``: WAL SSTs at or below the replay point
  that are still stored (flushed to L0 already; GC collects them once no checkpoint needs
  them and they are older than ``min_age``). Zero-byte WAL objects are writer fences,
  counted apart (``wal_fences``).
- **Bytes live**: the SSTs under this root that a live manifest (the latest, or one a live
  checkpoint pins) references, with their listed sizes.
- **GC backlog**: what a GC run with default options (``min_age`` 5 minutes, WAL fences a
  dry run) would delete now, decided object by object by GC's own rules
  (:func:`slatelib.core.gc_rules.decide` over :func:`slatelib.core.gc_plan.build_rules`),
  after removing expired checkpoints as a run does: the same totals as ``slate gc`` (dry
  run) reports as ``to_delete``.
- **Last compaction**: the newest creation time (its ULID's time) of an SST of a sorted run
  that is this database's own (a clone's runs inherited from its parent do not count); a
  compaction mints its outputs' ULIDs as it writes them, and unlike modification times they
  survive copies and restores. None without such an SST.
- **Foreign compactor**: the compactor epoch is held by a compactor that is not slatelib
  (:func:`slatelib.core.compactor_claim.judge_claim`: an official embedded compactor, a
  coordinator, an unknown tool), or the compactions file claims a newer epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from slatelib.core.checkpoints import live_checkpoints
from slatelib.core.compactions import Compactions
from slatelib.core.compactor_claim import Activity, ClaimVerdict, Holder
from slatelib.core.gc_plan import (
    CompactionsState,
    DestroyState,
    LiveSet,
    build_rules,
    destroy_rules,
    destroy_verdict,
    own_referenced_ssts,
    referenced_ssts,
)
from slatelib.core.gc_rules import GcOptions, ObjectKind, classify, decide
from slatelib.core.gc_text import fmt_time
from slatelib.core.manifest import Checkpoint, Manifest, SstHandle
from slatelib.core.segments import trees
from slatelib.ids import Ulid, ulid_time_ms
from slatelib.paths import CLAIMS_DIR, SLATELIB_DIR

ListedObject = tuple[str, int, int]
"""One listed object: ``(path, size in bytes, last modified in Unix ms)``."""

__all__ = ["DbListing", "DbStats", "ListedObject", "SortedRunStats", "activity_from_listing",
           "compute_db_stats", "estimated_sst_size", "index_listing", "versions_listed"]


@dataclass(frozen=True)
class SortedRunStats:
    """One sorted run: its id, the tree it belongs to (``segment``: ``(top-level)`` or the
    segment's label), its SST views and their bytes."""

    id: int
    segment: str
    ssts: int
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "segment": self.segment, "ssts": self.ssts, "bytes": self.bytes}


@dataclass(frozen=True)
class DbStats:
    """The health numbers of one database (module docstring). Times are Unix ms (None:
    none); every count is of the latest manifest unless its name says otherwise."""

    root: str
    now_ms: int
    manifest_id: int
    writer_epoch: int
    compactor_epoch: int
    # --- the LSM tree
    l0_ssts: int
    l0_ssts_max_tree: int
    l0_ssts_by_segment: Mapping[str, int]
    l0_bytes: int
    sorted_runs: int
    sorted_runs_max_tree: int
    sorted_run_sizes: tuple[SortedRunStats, ...]
    segments: int
    sst_views: int
    ssts: int
    external_dbs: int
    external_ssts: int
    # --- checkpoints
    checkpoints: int
    expired_checkpoints: int
    oldest_checkpoint_id: str | None
    oldest_checkpoint_name: str | None
    oldest_checkpoint_create_ms: int | None
    oldest_checkpoint_expire_ms: int | None
    """None also when the oldest checkpoint never expires (see ``oldest_checkpoint_id``)."""
    # --- storage
    manifest_versions: int
    compactions_versions: int
    objects: int
    """Objects in the database's own directories (``manifest/``, ``wal/``, ``compacted/``,
    ``compactions/``, ``gc/``, ``slatelib/``); a database nested below it is not counted."""
    bytes: int
    wal_ssts_to_replay: int
    wal_bytes_to_replay: int
    wal_ssts_replayed: int
    wal_bytes_replayed: int
    wal_fences: int
    live_ssts: int
    live_sst_bytes: int
    missing_ssts: int
    """SSTs a live manifest references under this root that the listing lacks."""
    # --- GC backlog (a default GC run, now)
    gc_reclaimable_objects: int
    gc_reclaimable_bytes: int
    gc_reclaimable_by_kind: Mapping[str, tuple[int, int]]
    gc_refused: tuple[str, ...]
    # --- compaction
    last_compaction_ms: int | None
    active_compactions: int
    compactor_holder: str
    """``free``, ``ours`` (slatelib), ``foreign`` or ``unknown`` (not judged)."""
    compactor_reason: str
    compactor_holder_epoch: int | None = None
    """The epoch judged: the manifest's, or the compactions file's when that claims a newer
    one (None: not judged)."""
    destroyed: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def foreign_compactor(self) -> bool:
        return self.compactor_holder == Holder.FOREIGN.value

    @property
    def oldest_checkpoint_age_s(self) -> float | None:
        if self.oldest_checkpoint_create_ms is None:
            return None
        return max(0.0, (self.now_ms - self.oldest_checkpoint_create_ms) / 1000)

    @property
    def last_compaction_age_s(self) -> float | None:
        if self.last_compaction_ms is None:
            return None
        return max(0.0, (self.now_ms - self.last_compaction_ms) / 1000)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, ``*_ms`` times with an ISO twin (``last_compaction``),
        ``foreign_compactor`` and the ages in seconds."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "sorted_run_sizes":
                value = [r.to_dict() for r in value]
            elif name == "gc_reclaimable_by_kind":
                value = {k: {"objects": n, "bytes": b} for k, (n, b) in value.items()}
            elif isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
            if name.endswith("_ms") and name != "now_ms":
                out[name[:-3]] = None if value is None else fmt_time(value)
        out["now"] = fmt_time(self.now_ms)
        out["foreign_compactor"] = self.foreign_compactor
        out["oldest_checkpoint_age_s"] = self.oldest_checkpoint_age_s
        out["last_compaction_age_s"] = self.last_compaction_age_s
        return out


def estimated_sst_size(handle: SstHandle) -> int:
    """A lower bound of an SST's size from its manifest entry: the end of its furthest
    region (index, filter, stats); the info block and footer are not counted."""
    i = handle.info
    return max(i.index_offset + i.index_len, i.filter_offset + i.filter_len,
               i.stats_offset + i.stats_len)


@dataclass
class DbListing:
    """One listing of a database root, classified once (:func:`index_listing`): every
    object with its kind and id, and what the numbers need from it by kind."""

    root: str
    entries: list[tuple[str, int, int, ObjectKind, int | None]] = field(default_factory=list)
    """``(path, size, last modified ms, kind, id)`` of every listed object."""
    compacted: dict[Ulid, tuple[int, int]] = field(default_factory=dict)
    """SST id -> (size, last modified ms) under ``compacted/``."""
    wal: list[tuple[int, int, int]] = field(default_factory=list)
    """``(id, size, last modified ms)`` under ``wal/`` (fences included)."""
    manifests: dict[int, int] = field(default_factory=dict)
    """Manifest id -> last modified ms."""
    compactions: dict[int, int] = field(default_factory=dict)
    claims: dict[int, list[str]] = field(default_factory=dict)
    """slatelib's claim records (``slatelib/claims/<epoch>.<run>.json``) by epoch."""
    objects: int = 0
    bytes: int = 0

    def newest(self, kind: ObjectKind) -> int | None:
        """The highest listed id of a manifest or compactions file (None: none)."""
        ids = self.manifests if kind is ObjectKind.MANIFEST else self.compactions
        return max(ids, default=None)


def versions_listed(root: str, listing: Iterable[ListedObject]) -> tuple[int | None, int | None]:
    """The highest manifest and compactions-file ids in the listing (None: none), looking
    only at ``manifest/`` and ``compactions/`` (before the manifest is read)."""
    found: dict[ObjectKind, int] = {}
    dirs = tuple(f"{root}/{d}/" if root else f"{d}/" for d in ("manifest", "compactions"))
    for path, size, _ in listing:
        if path.startswith(dirs):
            c = classify(root, path, size)
            if c.id is not None and c.kind in (ObjectKind.MANIFEST, ObjectKind.COMPACTIONS):
                found[c.kind] = max(found.get(c.kind, 0), c.id)
    return found.get(ObjectKind.MANIFEST), found.get(ObjectKind.COMPACTIONS)


def index_listing(root: str, listing: Iterable[ListedObject],
                  known: Mapping[str, Ulid] | None = None) -> DbListing:
    """Classify every listed object of the database at ``root`` once
    (:func:`slatelib.core.gc_rules.classify`). ``known`` maps the canonical paths of SSTs
    under this root's ``compacted/`` (``DbPaths.compacted``) to their ids: a listed path
    found there is that SST without parsing its name again (a database of 100k SSTs lists
    100k of them; docs/rfcs/0014-large-manifest-planning.md)."""
    out = DbListing(root)
    own = f"{root}/{SLATELIB_DIR}/" if root else f"{SLATELIB_DIR}/"
    claims = f"{root}/{CLAIMS_DIR}/" if root else f"{CLAIMS_DIR}/"
    entries = out.entries
    known = known or {}
    compacted, sst = out.compacted, ObjectKind.COMPACTED
    for path, size, mtime in listing:
        sid = known.get(path)
        if sid is not None:
            entries.append((path, size, mtime, sst, sid))
            compacted[sid] = (size, mtime)
            out.objects += 1
            out.bytes += size
            continue
        c = classify(root, path, size)
        entries.append((path, size, mtime, c.kind, c.id))
        if c.in_layout or path.startswith(own):  # not another database below this one
            out.objects += 1
            out.bytes += size
        if c.id is None:
            if path.startswith(claims):
                head = path[len(claims):].split(".", 1)[0]
                if len(head) == 20 and head.isdigit():
                    out.claims.setdefault(int(head), []).append(path)
            continue
        if c.kind is sst:
            compacted[Ulid(c.id)] = (size, mtime)
        elif c.kind in (ObjectKind.WAL, ObjectKind.WAL_FENCE):
            out.wal.append((c.id, size, mtime))
        elif c.kind is ObjectKind.MANIFEST:
            out.manifests[c.id] = mtime
        elif c.kind is ObjectKind.COMPACTIONS:
            out.compactions[c.id] = mtime
    return out


def _tree_stats(m: Manifest, sizes: Mapping[Ulid, tuple[int, int]]
                ) -> tuple[dict[str, int], int, list[SortedRunStats], int | None]:
    """L0 views per tree, L0 bytes, the sorted runs with their bytes, and the newest
    ULID time of a sorted run's own SST."""
    def size(sid: Ulid) -> int:
        got = sizes.get(sid)
        return got[0] if got is not None else estimated_sst_size(m.sst(sid))

    external = m.external_sst_paths()
    l0: dict[str, int] = {}
    l0_bytes = 0
    runs: list[SortedRunStats] = []
    newest: int | None = None
    for t in trees(m):
        l0[t.label] = len(t.l0)
        l0_bytes += sum(size(v.sst_id) for v in t.l0)
        for run in t.compacted:
            runs.append(SortedRunStats(run.id, t.label, len(run.views),
                                       sum(size(v.sst_id) for v in run.views)))
            for v in run.views:
                if v.sst_id in external:
                    continue  # compacted by the parent database, not here
                at = ulid_time_ms(v.sst_id)
                newest = at if newest is None else max(newest, at)
    return l0, l0_bytes, runs, newest


def _gc_backlog(root: str, live: LiveSet, compactions: CompactionsState, lst: DbListing,
                now_ms: int, options: GcOptions, pinned_missing: Sequence[int],
                ) -> tuple[dict[str, tuple[int, int]], list[str], int]:
    """What a default GC run would delete (per kind: objects, bytes), its refusals, and
    how many referenced SSTs the listing lacks."""
    if pinned_missing:
        ids = ", ".join(map(str, pinned_missing))
        return {}, [f"gc: a checkpoint pins manifest(s) {ids}, which are missing: GC "
                    "refuses to run on this database"], 0
    own = own_referenced_ssts(live)
    missing = sum(1 for sid in own if sid not in lst.compacted)
    verdict = destroy_verdict(live.latest, now_ms / 1000, options.db_delete_grace_s)
    destroy = (destroy_rules(root, live.latest_id, verdict)
               if verdict.state is DestroyState.DUE else None)
    block = (f"{missing} SSTs referenced by the live manifests are missing from the listing: "
             "nothing in compacted/ is deleted" if missing else None)
    rules = build_rules(root, live, compactions, now_ms=now_ms, options=options,
                        compacted_block=block, destroy=destroy, whole_dry_run=True)
    refused: list[str] = []
    cut = rules.compacted
    if destroy is None:
        for why in (cut.blocked, cut.low_watermark_why if cut.low_watermark_ms == 0 else None,
                    cut.newest_l0_why if cut.newest_l0_ms == 0 else None):
            if why:
                refused.append(f"compacted: {why}")
                break
    refs = referenced_ssts(live)
    backlog: dict[str, tuple[int, int]] = {}
    compacted = ObjectKind.COMPACTED
    for path, size, mtime, kind, oid in lst.entries:
        ref = None
        if kind is compacted and oid is not None:
            ref = refs.get(Ulid(oid))
            if ref is not None and destroy is None:
                continue  # referenced by a live manifest: always kept
        d = decide(rules, path, size, mtime, ref)
        if d.deletes:
            n, b = backlog.get(d.kind.value, (0, 0))
            backlog[d.kind.value] = (n + 1, b + size)
    return backlog, refused, missing


def _live_set(manifest_id: int, latest: Manifest, pinned: Mapping[int, Manifest],
              live_cps: Sequence[Checkpoint]) -> LiveSet:
    """The live set a GC run plans with: when checkpoints expired, the run first writes
    the latest manifest without them as the next version (so the current latest is then an
    older version, live only while a checkpoint pins it), as a dry run of GC plans."""
    if len(live_cps) == len(latest.checkpoints):
        return LiveSet(manifest_id, latest, {k: v for k, v in pinned.items() if k != manifest_id})
    kept = replace(latest, checkpoints=tuple(live_cps))
    others = {k: v for k, v in pinned.items() if k != manifest_id}
    if any(c.manifest_id == manifest_id for c in live_cps):
        others[manifest_id] = latest
    return LiveSet(manifest_id + 1, kept, others)


def activity_from_listing(listing: DbListing, manifest_id: int,
                          compactions: Compactions | None, now_ms: int) -> Activity:
    """The compactor-claim :class:`Activity` from the listing's modification times (no
    extra reads): the ages of the latest compactions file, of manifest ``manifest_id`` and
    of the newest WAL SST, and the newest worker heartbeat in ``compactions``."""
    def age(ms: int | None) -> float | None:
        return None if ms is None else max(0.0, (now_ms - ms) / 1000)

    wal = max(((i, t) for i, s, t in listing.wal if s > 0), default=None)
    comp = listing.newest(ObjectKind.COMPACTIONS)
    beats = [] if compactions is None else [
        c.worker.last_heartbeat_ms for c in compactions.recent_compactions
        if c.worker is not None and c.worker.last_heartbeat_ms > 0]
    return Activity(
        compactions_epoch=None if compactions is None else compactions.compactor_epoch,
        compactions_age_s=(age(listing.compactions[comp])
                           if comp is not None and compactions is not None else None),
        heartbeat_age_s=age(max(beats)) if beats else None,
        manifest_age_s=age(listing.manifests.get(manifest_id)),
        wal_age_s=age(wal[1]) if wal else None)


def compute_db_stats(
    root: str,
    manifest_id: int,
    latest: Manifest,
    pinned: Mapping[int, Manifest],
    listing: DbListing | Sequence[ListedObject],
    compactions: CompactionsState,
    *,
    now_ms: int,
    verdict: ClaimVerdict | None = None,
    pinned_missing: Sequence[int] = (),
    gc_options: GcOptions | None = None,
) -> DbStats:
    """The :class:`DbStats` of the database at ``root``.

    ``latest`` is manifest ``manifest_id``; ``pinned`` holds the manifests that its live
    (unexpired at ``now_ms``) checkpoints pin, except the latest (``pinned_missing``: the
    ids of those that are gone); ``listing`` is every object below the root, in any order
    (or :func:`index_listing` of it);
    ``verdict`` is who holds the compactor epoch (None: not judged); ``gc_options`` the
    options the GC backlog is planned with (default: GC's defaults).
    """
    options = gc_options or GcOptions()
    now_s = now_ms / 1000
    lst = listing if isinstance(listing, DbListing) else index_listing(root, listing)
    l0, l0_bytes, runs, last_compaction = _tree_stats(latest, lst.compacted)
    ts = trees(latest)
    live_cps = live_checkpoints(latest, now_s)
    live = _live_set(manifest_id, latest, pinned, live_cps)
    backlog, refused, missing = _gc_backlog(root, live, compactions, lst, now_ms, options,
                                            pinned_missing)
    own = own_referenced_ssts(live) if not pinned_missing else latest.referenced_sst_ids()
    oldest = min(live_cps, key=lambda c: (c.create_time_s, str(c.id)), default=None)
    replay = latest.replay_after_wal_id
    to_replay = [(i, s) for i, s, _ in lst.wal if s > 0 and i > replay]
    replayed = [(i, s) for i, s, _ in lst.wal if s > 0 and i <= replay]
    comps = compactions.compactions
    return DbStats(
        root=root, now_ms=now_ms, manifest_id=manifest_id,
        writer_epoch=latest.writer_epoch, compactor_epoch=latest.compactor_epoch,
        l0_ssts=sum(l0.values()), l0_ssts_max_tree=max(len(t.l0) for t in ts),
        l0_ssts_by_segment=l0 if latest.has_segments else {}, l0_bytes=l0_bytes,
        sorted_runs=len(runs), sorted_runs_max_tree=max(len(t.compacted) for t in ts),
        sorted_run_sizes=tuple(runs), segments=len(latest.segments or ()),
        sst_views=sum(1 for _ in latest.all_views()), ssts=len(latest.ssts),
        external_dbs=len(latest.external_dbs),
        external_ssts=sum(len(e.sst_ids) for e in latest.external_dbs),
        checkpoints=len(live_cps), expired_checkpoints=len(latest.checkpoints) - len(live_cps),
        oldest_checkpoint_id=None if oldest is None else str(oldest.id),
        oldest_checkpoint_name=None if oldest is None else oldest.name,
        oldest_checkpoint_create_ms=None if oldest is None else oldest.create_time_s * 1000,
        oldest_checkpoint_expire_ms=(None if oldest is None or oldest.expire_time_s is None
                                     else oldest.expire_time_s * 1000),
        manifest_versions=len(lst.manifests), compactions_versions=len(lst.compactions),
        objects=lst.objects, bytes=lst.bytes,
        wal_ssts_to_replay=len(to_replay), wal_bytes_to_replay=sum(s for _, s in to_replay),
        wal_ssts_replayed=len(replayed), wal_bytes_replayed=sum(s for _, s in replayed),
        wal_fences=sum(1 for _, s, _ in lst.wal if s == 0),
        live_ssts=sum(1 for sid in own if sid in lst.compacted),
        live_sst_bytes=sum(lst.compacted[sid][0] for sid in own if sid in lst.compacted),
        missing_ssts=missing,
        gc_reclaimable_objects=sum(n for n, _ in backlog.values()),
        gc_reclaimable_bytes=sum(b for _, b in backlog.values()),
        gc_reclaimable_by_kind=dict(sorted(backlog.items())), gc_refused=tuple(refused),
        last_compaction_ms=last_compaction,
        active_compactions=0 if comps is None else sum(
            1 for c in comps.recent_compactions if c.status.is_active),
        compactor_holder="unknown" if verdict is None else verdict.holder.value,
        compactor_reason="" if verdict is None else verdict.reason,
        compactor_holder_epoch=None if verdict is None else verdict.epoch,
        destroyed=latest.destroyed_at_s is not None,
        notes=(() if compactions.error is None
               else (f"compactions file unreadable: {compactions.error}",)),
    )
