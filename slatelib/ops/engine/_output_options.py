"""The options of a compaction's output SSTs: the database's own, read from its inputs.

:func:`plan_output_options` samples the newest input SSTs (their codec from the manifest,
their filter block and stats, and the first data blocks of a few of them) and lets
:func:`slatelib.core.db_sst_options.plan_sst_options` decide, with the ``[sst]`` settings
that are set winning (docs/rfcs/0019-compaction-sst-options.md). It runs on the driver
before the compaction's first write, so an input whose filters slatelib cannot write is
refused with nothing changed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from slatelib.config import Settings
from slatelib.core.compaction_plan import CompactionSpec
from slatelib.core.db_sst_options import DbSstOptions, FilterSample, SstSample, plan_sst_options
from slatelib.core.external_dbs import external_roots
from slatelib.core.manifest import Manifest, SstView
from slatelib.errors import CorruptObjectError
from slatelib.format.block import decode_block
from slatelib.format.block_size import block_size_bounds, block_size_candidates
from slatelib.format.sst import SstWriterOptions
from slatelib.ids import ulid_to_str
from slatelib.objstore import ObjectStore
from slatelib.ops.engine._task import TaskView
from slatelib.store.sst_options import prefix_extractors, sst_choices, writer_options_for
from slatelib.store.sst_reader import BlockCache, SstReader
from slatelib.store.table_store import TableStore

log = logging.getLogger(__name__)

SAMPLED_SSTS = 8
"""Input SSTs (newest first) whose filters and stats are read."""
BLOCK_SAMPLED_SSTS = 3
"""Of those, how many have their first data blocks read for the block size."""
SAMPLED_BLOCKS = 8
"""Data blocks read from the start of such an SST (one ranged get)."""


def plan_output_options(store: ObjectStore, root: str, manifest: Manifest, spec: CompactionSpec,
                        settings: Settings, *, cache: BlockCache | None = None,
                        ) -> tuple[SstWriterOptions, DbSstOptions]:
    """The writer options of ``spec``'s outputs, and what they are made of (for reports).

    Raises:
        InvalidArgumentError: malformed ``[sst]`` settings.
        UnsupportedFeatureError: an input carries a filter slatelib cannot write (the
            message names the filter and the setting that resolves it).
        SstMissingError / CorruptObjectError / ChecksumMismatchError: a sampled input.
    """
    planned = _plan(store, _task_views(store, root, manifest, spec.views()), settings, cache)
    return writer_options_for(planned), planned


def plan_database_options(store: ObjectStore, root: str, manifest: Manifest,
                          settings: Settings, *, cache: BlockCache | None = None,
                          ) -> DbSstOptions:
    """The database's SST options as its newest SSTs show them (L0 views newest first,
    then the sorted runs by descending id), the ``[sst]`` settings that are set winning:
    what an SST slatelib adds to the database (the flush of a rescale's source) is
    written with.

    Raises:
        as :func:`plan_output_options`.
    """
    views = [*manifest.l0, *(v for run in sorted(manifest.compacted, key=lambda r: -r.id)
                             for v in run.views)]
    return _plan(store, _task_views(store, root, manifest, views), settings, cache)


def _task_views(store: ObjectStore, root: str, manifest: Manifest, views: Sequence[SstView],
                ) -> Iterator[TaskView]:
    """The views with their SSTs' handles and paths, lazily (only the newest few are
    sampled, even of a compaction with 100k inputs)."""
    external = external_roots(root, manifest)
    tables = TableStore(store, root)
    for v in views:
        yield TaskView(v, manifest.sst(v.sst_id), tables.sst_path(v.sst_id, external))


def _plan(store: ObjectStore, views: Iterable[TaskView], settings: Settings,
          cache: BlockCache | None) -> DbSstOptions:
    choices = sst_choices(settings)
    extractors = prefix_extractors(settings)
    seen: set[str] = set()
    newest: list[TaskView] = []
    for tv in views:
        if tv.path not in seen:
            seen.add(tv.path)
            newest.append(tv)
        if len(newest) >= SAMPLED_SSTS:
            break
    return plan_sst_options(sample_inputs(store, newest, cache=cache), choices, extractors)


def sample_inputs(store: ObjectStore, views: Sequence[TaskView], *,
                  cache: BlockCache | None = None) -> list[SstSample]:
    """One :class:`SstSample` per view's SST, in the given order (ranged reads on threads);
    the first :data:`BLOCK_SAMPLED_SSTS` SSTs of format version 2 with at least two data
    blocks are sampled for their block size."""
    if not views:
        return []
    block_views: set[int] = set()
    for tv in views:
        if len(block_views) >= BLOCK_SAMPLED_SSTS:
            break
        if tv.handle.effective_format_version == 2 and _num_blocks(store, tv, cache) > 1:
            block_views.add(id(tv))

    def sample(tv: TaskView) -> SstSample:
        return _sample(store, tv, cache, blocks=id(tv) in block_views)

    with ThreadPoolExecutor(max(1, min(8, len(views))), thread_name_prefix="compact-sample") as pool:
        return list(pool.map(sample, views))


def _num_blocks(store: ObjectStore, tv: TaskView, cache: BlockCache | None) -> int:
    return SstReader(store, tv.path, tv.handle, cache=cache).num_blocks


def _sample(store: ObjectStore, tv: TaskView, cache: BlockCache | None, *,
            blocks: bool) -> SstSample:
    """The filter block is read strictly (the source check reads it too); the stats and
    the data blocks only inform the choice: a damaged one leaves its part unknown, and
    the task that reads the block reports it (after the fence, as before)."""
    reader = SstReader(store, tv.path, tv.handle, cache=cache)
    entries = reader.filter_entries()
    filters = None if entries is None else tuple(
        FilterSample(name, int.from_bytes(data[:2], "big"), max(0, len(data) - 2))
        for name, data in entries.items())
    try:
        n_rows = reader.stats_rows()  # the totals only: not the per-block stats
    except CorruptObjectError as exc:
        log.warning("compaction input stats unreadable [sst=%s]: %s", tv.path, exc)
        n_rows = None
    sizes = None
    if blocks:
        try:
            raw = reader.raw_blocks(0, min(reader.num_blocks, SAMPLED_BLOCKS))
            rows = [decode_block(b, 2) for b in raw]
            sizes = block_size_candidates(*block_size_bounds(rows, [len(b) for b in raw]))
        except CorruptObjectError as exc:
            log.warning("compaction input blocks unreadable for the block size [sst=%s]: %s",
                        tv.path, exc)
    return SstSample(
        label=ulid_to_str(tv.handle.id),
        codec=tv.handle.info.compression,
        rows=n_rows,
        filters=filters,
        block_sizes=sizes,
    )
