"""Rescaling: split a database into shards by key range, or merge shards into one
(docs/rfcs/0008-rescale-job.md).

Public API (re-exported by :mod:`slatelib.ops.rescale`)::

    split_database(source, store, targets, *, at=None, ...) -> RescaleReport
    merge_databases(sources, target, store, ...) -> RescaleReport

Steps (each one resumable: a rerun of the same call after a crash anywhere finishes the job):

1. **Check** everything before the first write: paths, split keys, targets free, sources
   initialized, no likely-live writer (:func:`~.source.check_live`), the WAL tail
   flushable, for a merge disjoint source ranges; choose the split keys from the block
   indexes (:mod:`~.balance`). A segmented source (SlateDB RFC-0024) is cut at segment
   boundaries only, merged by 0.17's per-segment union rules
   (:mod:`slatelib.core.rescale_segments`), and its targets are checked by the scan;
   its WAL rows must be in L0s already (:func:`~.source.check_segmented_source`). A dry
   run stops here and reports the plan.
2. **Record** the job under every source (:mod:`~.record`): a second job on a source is
   refused, a rerun of this one resumes it.
3. **Flush and checkpoint** each source: move a WAL tail into an L0 (fencing its writer),
   or fence it on request, then create the job's checkpoint (its id is in the record).
4. **Clone** each target from its parts, all at the job's checkpoints
   (:func:`~.targets.ensure_clone`).
5. **Compact** each target into its own SSTs, up to ``concurrency`` at once
   (:func:`~.targets.compact_target`), the key-range tasks of those in one batch
   (:mod:`~.pipeline`; how many of each: :mod:`slatelib.core.rescale_fanout`).
6. **Validate**: ranges tile the source (a split); every target equals its parts at the
   checkpoints: row for row, compared in the compaction tasks and checked against the
   commits on the driver (:mod:`~.task_check`), else in keys, bytes and digest by a
   separate scan (:mod:`~.validate`).
7. **Detach** each target from its sources, releasing their final checkpoints
   (:func:`~.targets.detach_target`); then delete the job's checkpoints and mark the
   record done. The sources can then be destroyed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import Settings
from slatelib.core.rescale_plan import (
    MERGE,
    SPLIT,
    check_disjoint,
    check_shard_count,
    check_split_keys,
    check_target_paths,
    describe_range,
    format_key,
    manifest_span,
    plan_merge,
    plan_split,
    shard_ranges,
    span_union,
)
from slatelib.core.rescale_segments import check_disjoint_trees, check_keys_respect_segments
from slatelib.db_manifest import DbManifest
from slatelib.errors import InvalidArgumentError, InvalidDbStateError
from slatelib.objstore import ObjectStore
from slatelib.ops.checkpoint import as_checkpoint_id
from slatelib.ops.clone import CloneSource, create_clone_from_sources
from slatelib.ops.rescale import record
from slatelib.ops.rescale.balance import (
    estimate_shards,
    manifest_views,
    plan_weights,
    read_weights,
    wal_weight,
)
from slatelib.ops.rescale.job import (
    DEFAULT_LIVE_WINDOW_S,
    RescaleJob,
    RescaleOptions,
    RunnerFactory,
    new_job_id,
)
from slatelib.ops.rescale.pipeline import BatchRunner
from slatelib.ops.rescale.report import RescaleReport
from slatelib.ops.rescale.source import SourceInfo, pinned_wal_data
from slatelib.ops.rescale.targets import check_target_free
from slatelib.ops.rescale.validate import Mapper
from slatelib.paths import normalize_path
from slatelib.store.manifest_store import StoredManifest

__all__ = ["DEFAULT_LIVE_WINDOW_S", "BatchRunner", "RescaleOptions", "RunnerFactory",
           "merge_databases", "split_database"]


def split_database(
    source: str,
    store: ObjectStore | str,
    targets: Sequence[str],
    *,
    at: Sequence[bytes] | None = None,
    checkpoint: uuid.UUID | str | None = None,
    settings: Settings | None = None,
    options: RescaleOptions | None = None,
    runner_factory: RunnerFactory | None = None,
    mapper: Mapper | None = None,
    clock: Clock = SYSTEM_CLOCK,
    batch_runner: BatchRunner | None = None,
    wal_store: ObjectStore | str | None = None,
) -> RescaleReport:
    """Split ``source`` into ``len(targets)`` databases by key range (module docstring):
    at the keys ``at`` (``len(targets) - 1`` of them, ascending), or at keys that balance
    the source's bytes.

    ``checkpoint``: clone from this existing checkpoint of the source (its manifest must
    have no WAL data to replay) instead of flushing the WAL tail and checkpointing; it is
    left in place at the end.

    Where the work runs: ``batch_runner`` runs the compaction tasks of the targets
    compacted at once as one batch (outcomes in task order; default: threads of this
    process), unless ``runner_factory`` gives each target a runner of its own; ``mapper``
    runs the check's scan chunks (default: threads).

    Raises:
        InvalidArgumentError: bad paths, keys or options; a target that exists; too little
            data to choose keys; merge operands in the WAL tail without a merge operator;
            an unknown or expired ``checkpoint``, or one with WAL data to replay.
        WriterActiveError: the source's writer may be live (see ``options``).
        InvalidDbStateError: the source is uninitialized or destroyed, runs another rescale
            job, or the job cannot finish (the message says what is left).
        NotADatabaseRootError: no database at ``source``.
        DataError: a target differs from its range of the source (nothing is released).
        SlateError: as the clone, compaction and GC steps.
    """
    options = options or RescaleOptions()
    src = normalize_path(source, what="source path", allow_empty=False)
    tgts = [normalize_path(t, what="target path", allow_empty=False) for t in targets]
    check_shard_count(len(tgts))
    keys = None if at is None else tuple(at)
    if keys is not None:
        check_split_keys(keys, len(tgts))
    check_target_paths([src], tgts)
    given = None if checkpoint is None else as_checkpoint_id(checkpoint)
    job = RescaleJob(SPLIT, store, settings, options, runner_factory, mapper, clock,
                     batch_runner=batch_runner, wal_store=wal_store)
    done = job.finished([src], tgts, keys)
    if done is not None:
        return done
    plan = job.existing([src], tgts, keys)
    if plan is not None and given is not None and plan.sources[0].checkpoint_id != str(given):
        raise InvalidDbStateError(
            f"source {src!r} is running rescale job {plan.job_id} from checkpoint "
            f"{plan.sources[0].checkpoint_id}, not {given}: rerun that job's command to "
            "finish it; nothing was written")
    fresh: dict[str, SourceInfo] = {}
    if plan is None:
        with job.report.phase("plan"):
            info = job.inspect(src, flush=given is None)
            fresh[src] = info
            for t in tgts:
                check_target_free(job.store, t)
            if given is None:
                base, wal = info.latest, info.wal_sizes
            else:
                base, wal = _given_checkpoint(job.store, src, given, clock), ()
            if keys is not None and base.value.segments:
                check_keys_respect_segments(keys, [s.prefix for s in base.value.segments])
            weights, auto = plan_weights(job.store, src, base.value, len(tgts), wal)
            if auto is not None and not wal:  # the checkpoint may pin the same views
                job.planned_keys[(src, len(tgts))] = (base.value, auto)
            chosen = keys or auto
            if chosen is None:
                raise InvalidArgumentError(
                    f"cannot choose {len(tgts) - 1} split keys: {src!r} has too few distinct "
                    "keys to cut at; give the split keys with --at; nothing was written")
            estimates, rows_known = estimate_shards(weights, shard_ranges(chosen))
        job.report.split_keys = [format_key(k) for k in chosen]
        job.report.targets = [
            {"path": t, **describe_range(r), "estimated_bytes": e.nbytes,
             "estimated_rows": e.rows if rows_known else None}
            for t, r, e in zip(tgts, shard_ranges(chosen), estimates, strict=True)]
        if options.dry_run:
            job.report.status = "dry_run"
            job.report.objects_to_write = job.objects_to_write(
                [info], tgts, [e.nbytes for e in estimates], own_checkpoint=given is None)
            return job.report
        plan = plan_split(new_job_id(clock), src, str(given or uuid.uuid4()), tgts, keys,
                          now_ms=clock.now_ms(),
                          options={**options.recorded(), "own_checkpoint": given is None})
        record.claim(job.store, plan)
    else:
        job.report.resumed = True
        record.claim(job.store, plan)  # sources whose record a killed claim did not write
    return job.run(plan, fresh)


def merge_databases(
    sources: Sequence[str],
    target: str,
    store: ObjectStore | str,
    *,
    settings: Settings | None = None,
    options: RescaleOptions | None = None,
    runner_factory: RunnerFactory | None = None,
    mapper: Mapper | None = None,
    clock: Clock = SYSTEM_CLOCK,
    batch_runner: BatchRunner | None = None,
    wal_store: ObjectStore | str | None = None,
) -> RescaleReport:
    """Merge ``sources`` (disjoint key ranges, e.g. the shards of a split) into ``target``
    (module docstring): a union clone, then compaction, validation and detach.

    Raises:
        InvalidArgumentError: bad paths or options, fewer than 2 sources, a target that
            exists, sources with overlapping key ranges (also when the clone library refuses
            them).
        WriterActiveError / InvalidDbStateError / NotADatabaseRootError / DataError /
            SlateError: as :func:`split_database`.
    """
    options = options or RescaleOptions()
    srcs = [normalize_path(s, what="source path", allow_empty=False) for s in sources]
    tgt = normalize_path(target, what="target path", allow_empty=False)
    if len(srcs) < 2:
        raise InvalidArgumentError("a merge needs at least 2 sources")
    check_target_paths(srcs, [tgt])
    job = RescaleJob(MERGE, store, settings, options, runner_factory, mapper, clock,
                     batch_runner=batch_runner, wal_store=wal_store)
    done = job.finished(srcs, [tgt], None)
    if done is not None:
        return done
    plan = job.existing(srcs, [tgt], None)
    fresh: dict[str, SourceInfo] = {}
    if plan is None:
        with job.report.phase("plan"):
            infos = [job.inspect(s) for s in srcs]
            fresh = {i.path: i for i in infos}
            check_target_free(job.store, tgt)
            if any(i.latest.value.has_segments for i in infos):
                check_disjoint_trees([(i.path, i.latest.value) for i in infos])
            else:
                check_disjoint([(i.path, span_union(manifest_span(i.latest.value),
                                                    i.wal_span)) for i in infos])
            if not any(i.needs_flush for i in infos):
                _check_union(job.store, srcs, tgt, clock)
            est = 0
            rows: int | None = 0
            for i in infos:
                views = manifest_views(job.store, i.path, i.latest.value)
                weights = read_weights(job.store, views, into=1, fine=False)
                weights.append(wal_weight(i.wal_sizes))
                est += sum(a.weight for w in weights for a in w.anchors)
                rows = None if rows is None or any(w.rows is None for w in weights) else \
                    rows + sum(w.rows or 0 for w in weights)
        job.report.targets = [{"path": tgt, "estimated_bytes": est, "estimated_rows": rows}]
        if options.dry_run:
            job.report.status = "dry_run"
            job.report.objects_to_write = job.objects_to_write(infos, [tgt], [est])
            return job.report
        plan = plan_merge(new_job_id(clock), [(s, str(uuid.uuid4())) for s in srcs], tgt,
                          now_ms=clock.now_ms(), options=options.recorded())
        record.claim(job.store, plan)
    else:
        job.report.resumed = True
        record.claim(job.store, plan)  # sources whose record a killed claim did not write
    return job.run(plan, fresh)


def _given_checkpoint(store: ObjectStore, path: str, checkpoint: uuid.UUID,
                      clock: Clock) -> StoredManifest:
    """The manifest an existing checkpoint of the source pins.

    Raises:
        InvalidArgumentError: no such (unexpired) checkpoint, or its manifest has WAL data
            to replay (0.17 cannot project it).
    """
    ms = DbManifest(store, path)
    cp = ms.read_latest().value.checkpoint(checkpoint)
    if cp is None or cp.is_expired(clock.now_ms() / 1000):
        state = "unknown" if cp is None else "expired"
        raise InvalidArgumentError(f"checkpoint {checkpoint} of {path!r} is {state}; nothing "
                                   "was written")
    pinned = ms.read(cp.manifest_id)
    left = pinned_wal_data(store, path, pinned.value)
    if left:
        raise InvalidArgumentError(
            f"checkpoint {checkpoint} of {path!r} pins manifest {cp.manifest_id}, which has WAL "
            f"data to replay ({left}): 0.17 cannot project it. Leave out the checkpoint (the "
            "job then moves the WAL into an L0 and checkpoints the source itself); nothing "
            "was written")
    return pinned


def _check_union(store: ObjectStore, sources: Sequence[str], target: str, clock: Clock) -> None:
    """The clone library's own verdict on the union (a dry run writes nothing).

    Raises:
        InvalidArgumentError / InvalidDbStateError: it refuses the sources (e.g. overlapping
            ranges).
    """
    create_clone_from_sources(target, [CloneSource(s) for s in sources], store, clock=clock,
                              dry_run=True)
