"""Where to cut a source into shards of balanced bytes, and what each shard gets.

Weights come from the SST block indexes, as the compaction range split does
(:mod:`slatelib.core.range_split`): a view heavier than ``total / into / COARSE_FRACTION``
is anchored per block from its index, a light one as a whole at its first key. Row counts
come from each SST's stats block (0.17 writes one into every SST), spread over a view's
anchors in proportion to their bytes. A small source (at most :data:`ROW_ANCHOR_MAX_BYTES`)
whose blocks are too few to cut into ``into`` shards is anchored per row instead (its data
blocks are read), and rows still only in the WAL count too (:func:`wal_weight`).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from slatelib.core.compaction_source import effective_range, estimate_view_size, sst_size
from slatelib.core.external_dbs import external_roots
from slatelib.core.manifest import Manifest, SstHandle
from slatelib.core.range_split import COARSE_FRACTION, Anchor, view_anchor
from slatelib.core.ranges import BytesRange
from slatelib.core.rescale_plan import ShardEstimate, balanced_split_keys, shard_estimates
from slatelib.core.rescale_segments import segment_anchors
from slatelib.core.segments import trees
from slatelib.errors import InvalidArgumentError
from slatelib.format.sst import read_stats
from slatelib.objstore import ObjectStore
from slatelib.ops.engine import InputView, TaskView, fine_anchors
from slatelib.store.sst_reader import BlockCache, SstReader
from slatelib.store.table_store import TableStore

IO_THREADS = 16
ROW_ANCHOR_MAX_BYTES = 64 << 20
"""Largest source whose rows are read to place split keys when its blocks are too few."""
ROW_OVERHEAD = 16
"""Bytes counted per row on top of its key and value (row anchors, the WAL tail)."""


@dataclass(frozen=True)
class ViewWeight:
    """One view's anchors (key, bytes) and its estimated rows (None: its SST has no stats);
    ``view`` None: the WAL tail."""

    view: InputView | None
    anchors: tuple[Anchor, ...]
    rows: int | None


def wal_weight(rows: Sequence[tuple[bytes, int]]) -> ViewWeight:
    """The rows of a WAL tail (``(key, value length)``) as one weight, anchored per row."""
    return ViewWeight(None, tuple(Anchor(k, len(k) + n + ROW_OVERHEAD) for k, n in rows),
                      len(rows))


def manifest_views(store: ObjectStore, root: str, manifest: Manifest) -> list[InputView]:
    """Every view of every tree (the top-level one and each segment: L0 and sorted runs)
    with its path and size.

    Raises:
        CorruptObjectError: an unsafe ``external_dbs`` path, or a view without its SST.
    """
    tables = TableStore(store, root)
    external = external_roots(root, manifest)
    l0 = {v.id for t in trees(manifest) for v in t.l0}
    out = []
    for view in (v for t in trees(manifest)
                 for v in (*t.l0, *(v for r in t.compacted for v in r.views))):
        handle = manifest.sst(view.sst_id)
        tv = TaskView(view, handle, tables.sst_path(handle.id, external))
        out.append(InputView(view, tv, effective_range(view, handle.info),
                             estimate_view_size(view, handle.info), view.id in l0))
    return out


def _rows_of(store: ObjectStore, path: str, handle: SstHandle) -> int | None:
    info = handle.info
    if not info.stats_len:
        return None
    region = store.get_range(path, info.stats_offset, info.stats_offset + info.stats_len)
    return read_stats(region, info.compression, path=path).num_rows


def row_anchors(store: ObjectStore, v: InputView) -> tuple[Anchor, ...]:
    """One anchor per row of the view (every data block is read).

    Raises:
        CorruptObjectError / ChecksumMismatchError / SstMissingError: an unreadable SST.
    """
    reader = SstReader(store, v.task_view.path, v.task_view.handle)
    out = []
    for rows in reader.iter_blocks(0, reader.num_blocks):
        for key, _seq, _kind, value, *_ in rows:
            if v.effective.contains(key):
                out.append(Anchor(key, len(key) + len(value) + ROW_OVERHEAD))
    return tuple(out)


def read_weights(store: ObjectStore, views: Sequence[InputView], *, into: int,
                 cache: BlockCache | None = None, io_threads: int = IO_THREADS,
                 per_row: bool = False, fine: bool = True) -> list[ViewWeight]:
    """Anchors and rows of every view (reads SST indexes and stats blocks in parallel;
    ``per_row``: every row, see :func:`row_anchors`; ``fine=False``: one anchor per view,
    no index read, for totals only).

    Raises:
        CorruptObjectError / ChecksumMismatchError: an unreadable index or stats block.
        SstMissingError / ObjectMissingError: a missing SST.
    """
    total = sum(v.size for v in views)
    limit = total / max(1, into) / COARSE_FRACTION
    paths = {v.task_view.path: v.task_view.handle for v in views}

    def anchors(v: InputView) -> tuple[Anchor, ...]:
        if per_row:
            return row_anchors(store, v)
        if fine and (v.l0 or v.size > limit):
            return tuple(fine_anchors(store, v, cache))
        return (view_anchor(v.effective, v.size),)

    with ThreadPoolExecutor(max(1, min(io_threads, len(views) or 1)),
                            thread_name_prefix="rescale-plan") as pool:
        got = list(pool.map(anchors, views))
        rows = dict(zip(paths, pool.map(lambda p: _rows_of(store, p, paths[p]), paths),
                        strict=True))
    out = []
    for v, a in zip(views, got, strict=True):
        sst_rows = rows[v.task_view.path]
        whole = sst_size(v.task_view.handle.info)
        est = None if sst_rows is None else round(sst_rows * min(1.0, v.size / max(1, whole)))
        out.append(ViewWeight(v, a, est))
    return out


def choose_split_keys(weights: Sequence[ViewWeight], into: int,
                      segments: Sequence[bytes] = ()) -> tuple[bytes, ...]:
    """``into - 1`` keys that balance the bytes of ``weights``; with ``segments`` (the
    prefixes of a segmented source), keys at segment boundaries only
    (:func:`~slatelib.core.rescale_segments.segment_anchors`).

    Raises:
        InvalidArgumentError: too little data to cut into ``into`` shards (with segments:
            fewer segments holding data than shards).
    """
    anchors = [a for w in weights for a in w.anchors]
    if segments:
        anchors = segment_anchors(anchors, segments)
        held = len(anchors)
        if held < into:
            raise InvalidArgumentError(
                f"cannot split into {into}: the source is segmented (SlateDB RFC-0024) and a "
                f"split keeps every segment whole, but only {held} segments hold data; split "
                "into fewer shards; nothing was written")
    return balanced_split_keys(anchors, into)


def plan_weights(store: ObjectStore, root: str, manifest: Manifest, into: int,
                 wal_rows: Sequence[tuple[bytes, int]] = (),
                 ) -> tuple[list[ViewWeight], tuple[bytes, ...] | None]:
    """The weights of a source (its views, plus ``wal_rows`` not yet in an L0) and the
    balanced split keys (None: too little data even per row). Block anchors first; per
    row when they are too few and the source is small. A segmented source is cut at
    segment boundaries only (:func:`choose_split_keys`).

    Raises:
        CorruptObjectError / ChecksumMismatchError / SstMissingError: an unreadable SST.
        InvalidArgumentError: a segmented source with fewer segments holding data than
            shards.
    """
    views = manifest_views(store, root, manifest)
    extra = [wal_weight(wal_rows)] if wal_rows else []
    weights = read_weights(store, views, into=into) + extra
    segments = [s.prefix for s in manifest.segments or ()]
    if segments:  # cuts at segment boundaries: block anchors weigh the segments enough
        return weights, choose_split_keys(weights, into, segments)
    try:
        return weights, choose_split_keys(weights, into)
    except InvalidArgumentError:
        if sum(v.size for v in views) > ROW_ANCHOR_MAX_BYTES:
            return weights, None
    weights = read_weights(store, views, into=into, per_row=True) + extra
    try:
        return weights, choose_split_keys(weights, into)
    except InvalidArgumentError:
        return weights, None


def same_weights(a: Manifest, b: Manifest) -> bool:
    """Whether :func:`plan_weights` of ``a`` and ``b`` (same root, same ``into``, no WAL
    rows) are the same: it reads only their views, SST handles and ``external_dbs`` (the
    SSTs those name are immutable), so manifests that differ elsewhere, such as a checkpoint
    added, weigh the same."""
    return (a.l0 == b.l0 and a.compacted == b.compacted and a.ssts == b.ssts
            and a.external_dbs == b.external_dbs and a.segments == b.segments)


def estimate_shards(weights: Sequence[ViewWeight], ranges: Sequence[BytesRange],
                    ) -> tuple[list[ShardEstimate], bool]:
    """Estimated bytes and rows per range, and whether every SST had stats (rows known)."""
    known = all(w.rows is not None for w in weights)
    return shard_estimates([(w.anchors, w.rows or 0) for w in weights], ranges), known
