"""A rescale's sources: their state, whether their writer may be live, their WAL tail, and
the checkpoint the job clones them from.

0.17 refuses to project or union a source whose checkpoint still has WAL data to replay
(rows written after the last L0 flush; docs/rfcs/0007-projection-and-union-clones.md). Such
a source is *flushed* first (:func:`flush_wal_to_l0`): a slatelib :class:`~slatelib.Db` is
opened on it, which fences the previous writer (``writer_epoch`` + 1 and a WAL fence, see
:mod:`slatelib.writer.fencing`) and replays the WAL into its memtable, and closed, which
writes the memtable as an L0 SST and advances ``replay_after_wal_id`` to ``wal_id_last_seen``
(as 0.17's close does). Every acknowledged write is in the WAL, so nothing is lost; a writer
still running loses its next write (it is fenced), which is why a likely-live writer is
refused unless the operator says otherwise (:func:`check_live`).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace

from slatelib.clock import Clock
from slatelib.config import Settings
from slatelib.core.checkpoints import add_checkpoint, new_checkpoint, refresh_checkpoint
from slatelib.core.invariants import check_writer_epoch
from slatelib.core.manifest import Manifest
from slatelib.core.ranges import Bound, BytesRange
from slatelib.core.rescale_plan import Activity, live_writer_evidence
from slatelib.core.row import MERGE
from slatelib.errors import (
    InvalidArgumentError,
    InvalidDbStateError,
    NotADatabaseRootError,
    SlateError,
    UnsupportedFeatureError,
    WriterActiveError,
)
from slatelib.objstore import ObjectStore, wal_store_of
from slatelib.ops.engine import load_merge_operator, plan_database_options
from slatelib.paths import file_name, parse_wal_name
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.store.sst_options import settings_for
from slatelib.store.wal_store import WalStore
from slatelib.txn import update_versioned
from slatelib.writer import Db

log = logging.getLogger(__name__)

FLUSH_L0_MAX_SSTS = 1 << 20
"""``l0_max_ssts`` of the flushing writer: its one flush must never wait for a compactor."""


@dataclass(frozen=True)
class SourceInfo:
    """What a rescale needs to know of a source before its first write."""

    path: str
    latest: StoredManifest
    activity: Activity
    live_evidence: tuple[str, ...]
    data_wal_ids: tuple[int, ...]
    """Non-empty WAL SSTs above ``replay_after_wal_id``: 0.17 neither projects nor unions
    the source while there are any, even when their rows are in an L0 already."""
    wal_rows: int
    """Rows of those WAL SSTs that are not in an L0 yet."""
    wal_has_merges: bool
    wal_span: BytesRange | None
    """Keys of those WAL rows (None: no rows)."""
    wal_sizes: tuple[tuple[bytes, int], ...] = ()
    """``(key, value length)`` of every such row."""

    @property
    def needs_flush(self) -> bool:
        """Rows are in the WAL only (fences, the empty WAL objects a writer leaves when it
        opens, are no data: 0.17 projects and unions across them)."""
        return bool(self.data_wal_ids)

    def to_dict(self) -> dict[str, object]:
        m = self.latest.value
        return {"path": self.path, "manifest_id": self.latest.id,
                "writer_epoch": m.writer_epoch,
                "replay_after_wal_id": m.replay_after_wal_id,
                "wal_id_last_seen": m.wal_id_last_seen,
                "data_wal_ssts": len(self.data_wal_ids), "wal_rows": self.wal_rows,
                "needs_wal_flush": self.needs_flush,
                "live_writer_evidence": list(self.live_evidence)}


def check_source_state(path: str, m: Manifest, *, separate_wal: bool = False) -> None:
    """A rescale source must be an initialized, live database.

    Raises:
        InvalidDbStateError: uninitialized (a clone being created) or destroyed.
        UnsupportedFeatureError: a V1 manifest naming a separate WAL store when none was
            given (``separate_wal``).
    """
    if not m.initialized:
        raise InvalidDbStateError(f"source {path!r} is not initialized (a clone being created)")
    if m.destroyed_at_s is not None:
        raise InvalidDbStateError(f"source {path!r} was destroyed (at {m.destroyed_at_s})")
    if m.wal_object_store_uri is not None and not separate_wal:
        raise UnsupportedFeatureError(
            f"source {path!r} keeps its WAL in a separate store ({m.wal_object_store_uri!r} "
            "in its V1 manifest): pass --wal-store naming it")


def read_source(store: ObjectStore, path: str, clock: Clock, *, live_window_s: float,
                ) -> SourceInfo:
    """Read a source's latest manifest, its WAL tail and its recent activity (no writes).
    The WAL is read from the source's WAL store when ``store`` has one attached.

    Raises:
        NotADatabaseRootError: no database at ``path``.
        InvalidDbStateError / UnsupportedFeatureError: see :func:`check_source_state`.
        WalStoreMissingError: the store holds none of the manifest's WAL tail.
        CorruptObjectError: a WAL SST of the tail does not decode.
    """
    ms = ManifestStore(store, path)
    latest = ms.try_read_latest()
    if latest is None:
        raise NotADatabaseRootError(path)
    check_source_state(path, latest.value, separate_wal=wal_store_of(store) is not None)
    now_ms = clock.now_ms()
    wal = WalStore(store, path)
    wal.check_tail(latest.value, manifest_id=latest.id)
    after = latest.value.replay_after_wal_id
    data_ids: list[int] = []
    newest: tuple[int, int] | None = None  # (wal id, last modified ms)
    for meta in store.list(wal.paths.wal_dir, start_after=wal.path(after)):
        wid = parse_wal_name(file_name(meta.path))
        if wid is None or wid <= after:
            continue
        if newest is None or wid > newest[0]:
            newest = (wid, meta.last_modified_ms)
        if meta.size > 0:
            data_ids.append(wid)
    data_ids.sort()
    rows = 0
    merges = False
    lo: bytes | None = None
    hi: bytes | None = None
    sizes: list[tuple[bytes, int]] = []
    flushed_seq = latest.value.last_l0_seq
    for wid in data_ids:
        for key, seq, kind, value, *_ in wal.read_rows(wid):
            if seq <= flushed_seq:
                continue  # in an L0 already (0.17 leaves the last WAL SST of a flush above
                # replay_after_wal_id)
            rows += 1
            sizes.append((key, len(value)))
            merges = merges or kind == MERGE
            lo = key if lo is None or key < lo else lo
            hi = key if hi is None or key > hi else hi
    try:
        manifest_age = max(0.0, (now_ms - store.head(ms.path(latest.id)).last_modified_ms) / 1e3)
    except SlateError:  # activity is best effort
        manifest_age = None
    activity = Activity(latest.id, manifest_age, None if newest is None else newest[0],
                        None if newest is None else max(0.0, (now_ms - newest[1]) / 1e3))
    evidence = live_writer_evidence(latest.value, activity, now_s=now_ms / 1000,
                                    window_s=live_window_s)
    span = None if lo is None or hi is None else BytesRange(Bound.included(lo),
                                                            Bound.included(hi))
    return SourceInfo(path, latest, activity, tuple(evidence), tuple(data_ids), rows, merges,
                      span, tuple(sizes))


def check_live(info: SourceInfo, *, fence_source: bool, allow_live_source: bool) -> None:
    """Refuse a source whose writer may be live (every write after the checkpoint would be
    missing from the targets) unless the operator fences it or accepts that.

    Raises:
        WriterActiveError: evidence of a live writer, and neither flag.
    """
    if not info.live_evidence or fence_source or allow_live_source:
        return
    raise WriterActiveError(
        f"source {info.path!r} may have a live writer: {'; '.join(info.live_evidence)}. "
        "Every write after the rescale's checkpoint would be missing from the new databases. "
        "Stop the writer (and rerun once the window has passed), or pass --fence-source to "
        "fence it now (its next write fails), or --allow-live-source to accept losing the "
        "writes after the checkpoint; nothing was written")


def check_flushable(info: SourceInfo, settings: Settings, *, allow_live_source: bool,
                    fence_source: bool) -> None:
    """Before the first write: a flush will be possible.

    Raises:
        InvalidArgumentError: the WAL tail holds merge operands and no
            ``[compaction] merge_operator`` is configured (the flush folds them).
        WriterActiveError: the tail must be flushed, which fences the writer, but the
            operator allowed a live writer without ``--fence-source``.
    """
    if not info.needs_flush:
        return
    if info.wal_has_merges and load_merge_operator(settings.compaction.merge_operator) is None:
        raise InvalidArgumentError(
            f"source {info.path!r} has merge operands in its WAL ({info.wal_rows} rows not yet "
            "flushed to L0): moving them into an L0 folds them, which needs [compaction] "
            "merge_operator; nothing was written")
    if info.live_evidence and allow_live_source and not fence_source:
        raise WriterActiveError(
            f"source {info.path!r} has {info.wal_rows} rows in its WAL that are not in an L0 "
            "yet (0.17 cannot clone a range of them) and its writer may be live: moving them "
            "into an L0 fences the writer, so pass --fence-source (or stop the writer); "
            "nothing was written")


def check_segmented_source(info: SourceInfo, *, fence_source: bool) -> None:
    """A segmented source (SlateDB RFC-0024) before the first write: slatelib's writer
    does not open it (routing rows to segments takes the segment extractor, which is the
    application's code), so the job can neither fence its writer nor move WAL rows into
    L0s. It can only move ``replay_after_wal_id`` past WAL SSTs whose rows are in an L0
    already (:func:`settle_segmented_wal`).

    Raises:
        UnsupportedFeatureError: rows only in the WAL, or ``--fence-source``.
    """
    m = info.latest.value
    if not m.has_segments:
        return
    if info.wal_rows:
        raise UnsupportedFeatureError(
            f"source {info.path!r} is segmented (SlateDB RFC-0024, extractor "
            f"{m.segment_extractor_name!r}) and has {info.wal_rows} rows only in its WAL "
            f"(WAL SSTs {list(info.data_wal_ids)}): moving them into L0 SSTs needs the "
            "segment extractor, which slatelib's writer does not have. Flush the official "
            "writer's memtable (flush with FlushType.MemTable, or close it with a memtable "
            "flush) and rerun; nothing was written")
    if fence_source:
        raise UnsupportedFeatureError(
            f"source {info.path!r} is segmented (SlateDB RFC-0024): --fence-source fences "
            "with slatelib's writer, which does not open segmented databases. Stop the "
            "official writer instead (close it with a memtable flush) and rerun once "
            "--live-window has passed; nothing was written")


def settle_segmented_wal(store: ObjectStore, path: str, clock: Clock) -> StoredManifest:
    """For a segmented source whose WAL rows are all in L0s already (checked by
    :func:`check_segmented_source`): move ``replay_after_wal_id`` past those WAL SSTs
    (what :func:`advance_replay_position` does after a flush), as the current writer epoch,
    without fencing; returns the latest manifest.

    Raises:
        FencedError: a writer opened the source meanwhile.
        UnsupportedFeatureError: WAL rows newer than the L0s are there now.
    """
    latest = ManifestStore(store, path).read_latest()
    latest = advance_replay_position(store, path, latest.value.writer_epoch, clock)
    left = remaining_wal_data(store, path, latest.value)
    if left:
        raise UnsupportedFeatureError(
            f"source {path!r} is segmented and has WAL data newer than its L0s ({left}): "
            "flush the official writer's memtable and rerun")
    return latest


def _flush_settings(settings: Settings) -> Settings:
    return replace(settings, writer=replace(settings.writer, l0_max_ssts=FLUSH_L0_MAX_SSTS,
                                            flush_interval=None))


def flush_wal_to_l0(store: ObjectStore, path: str, settings: Settings, clock: Clock,
                    ) -> StoredManifest:
    """Fence the source's writer and move its WAL tail into an L0 (module docstring);
    returns the latest manifest afterwards, which has no WAL data left to replay.

    Raises:
        NotADatabaseRootError: no database at ``path`` (never created here).
        FencedError: another writer opened the source meanwhile.
        InvalidDbStateError: WAL data is still there afterwards (named).
    """
    ms = ManifestStore(store, path)
    if ms.try_read_latest() is None:
        raise NotADatabaseRootError(path)
    merge_operator = load_merge_operator(settings.compaction.merge_operator)
    # the L0 the flush adds is written with the database's own SST options
    # (docs/rfcs/0019-compaction-sst-options.md), so the targets' compaction keeps them too
    db_options = plan_database_options(store, path, ms.read_latest().value, settings)
    db = Db.open(path, store, _flush_settings(settings_for(db_options, settings)),
                 merge_operator=merge_operator, clock=clock)
    epoch = db.epoch
    db.close()
    latest = advance_replay_position(store, path, epoch, clock)
    left = remaining_wal_data(store, path, latest.value)
    if left:
        raise InvalidDbStateError(
            f"source {path!r}: after fencing (writer epoch {epoch}) and flushing, WAL data is "
            f"still to be replayed ({left}); 0.17 cannot project or union it")
    log.info("rescale source flushed [path=%s, epoch=%d, manifest=%d, replay_after_wal_id=%d]",
             path, epoch, latest.id, latest.value.replay_after_wal_id)
    return latest


def _replayed_through(store: ObjectStore, path: str, m: Manifest) -> int:
    """The highest WAL id up to which every WAL SST above ``replay_after_wal_id`` holds no
    row newer than ``last_l0_seq`` (a fence, or rows an L0 holds already); stops at the
    first gap or newer row."""
    wal = WalStore(store, path)
    ids = sorted(i for i in (parse_wal_name(file_name(meta.path)) for meta in store.list(
        wal.paths.wal_dir, start_after=wal.path(m.replay_after_wal_id)))
        if i is not None and i > m.replay_after_wal_id)
    through = m.replay_after_wal_id
    for wid in ids:
        if wid != through + 1:
            break
        rows = wal.try_read_rows(wid)
        if rows is None or any(seq > m.last_l0_seq for _k, seq, *_ in rows):
            break
        through = wid
    return through


def advance_replay_position(store: ObjectStore, path: str, epoch: int, clock: Clock,
                            ) -> StoredManifest:
    """Move ``replay_after_wal_id`` (and ``wal_id_last_seen``) past the WAL SSTs whose
    rows are all in an L0 already, as writer ``epoch`` (after its close): 0.17 leaves the
    WAL SST written right before a memtable flush above ``replay_after_wal_id``, and then
    refuses to project or union the database. Replaying those rows is a no-op (they are
    not newer than ``last_l0_seq``), so skipping them changes nothing a reader sees.

    Raises:
        FencedError: a newer writer opened the database meanwhile.
    """
    ms = ManifestStore(store, path)
    latest = ms.read_latest()
    through = _replayed_through(store, path, latest.value)

    def mutate(cur: StoredManifest) -> Manifest | None:
        m = cur.value
        check_writer_epoch(m, epoch)
        if through <= m.replay_after_wal_id or m.last_l0_seq != latest.value.last_l0_seq:
            return None
        return replace(m, replay_after_wal_id=through,
                       wal_id_last_seen=max(m.wal_id_last_seen, through))

    if through <= latest.value.replay_after_wal_id:
        return latest
    return update_versioned(ms, mutate, clock=clock, current=latest)


def remaining_wal_data(store: ObjectStore, path: str, m: Manifest) -> str | None:
    """Why ``m`` still has WAL data to replay (None: it has none): a non-empty WAL SST
    above ``replay_after_wal_id``."""
    wal = WalStore(store, path)
    for meta in store.list(wal.paths.wal_dir, start_after=wal.path(m.replay_after_wal_id)):
        wid = parse_wal_name(file_name(meta.path))
        if wid is not None and wid > m.replay_after_wal_id and meta.size > 0:
            return f"WAL SST {wid} ({meta.size} bytes) above replay_after_wal_id"
    return None


def pinned_wal_data(store: ObjectStore, path: str, m: Manifest) -> str | None:
    """Why a checkpoint's manifest ``m`` has WAL data to replay (None: it has none): a
    non-empty WAL SST in ``(replay_after_wal_id, wal_id_last_seen]``, what 0.17 refuses
    to project or union."""
    wal = WalStore(store, path)
    data = []
    for wid in range(m.replay_after_wal_id + 1, m.wal_id_last_seen + 1):
        rows = wal.try_read_rows(wid)
        if rows:
            data.append(wid)
    return None if not data else f"WAL SSTs {data} with rows"


def ensure_checkpoint(store: ObjectStore, path: str, checkpoint_id: uuid.UUID, *,
                      lifetime_s: float, clock: Clock) -> StoredManifest:
    """Create the job's checkpoint ``checkpoint_id`` on the current manifest, or renew its
    expiry when it is there (a rerun). Returns the latest manifest.

    Raises:
        InvalidDbStateError: the source cannot take a checkpoint (uninitialized, destroyed).
    """
    def mutate(cur: StoredManifest) -> Manifest | None:
        now_s = clock.now_ms() / 1000
        if cur.value.checkpoint(checkpoint_id) is not None:
            return refresh_checkpoint(cur.value, checkpoint_id, now_s=now_s,
                                      lifetime_s=lifetime_s)
        cp = new_checkpoint(cur.value, cur.id + 1, now_s=now_s, lifetime_s=lifetime_s,
                            checkpoint_id=checkpoint_id)
        return add_checkpoint(cur.value, cp)

    return update_versioned(ManifestStore(store, path), mutate, clock=clock)
