"""Compaction: one logical compaction split by key range, committed by one manifest CAS.

Public API (re-exported by :mod:`slatelib.ops.compaction`)::

    plan_compaction(manifest, compactions, options) -> CompactionSpec | None      # pure
    execute_compaction_task(task) -> CompactionResult                            # one range
    commit_compaction(job, results) -> CommitOutcome                             # driver CAS
    run_compaction(path, store, ...) -> CompactionReport                         # all of it

:func:`run_compaction` is what ``slate compact`` and ``jobs/compact.py`` call: read the state,
plan, fence the other compactors, record the compaction in ``compactions/``, split it into
ranges of balanced input bytes, run one task per range through a
:class:`~slatelib.ops.engine.TaskRunner` (threads here, Spark executors in the
job), retry tasks that failed transiently, and commit.

A database with segments (SlateDB RFC-0024) may need one compaction per segment
(:func:`~slatelib.core.compaction_plan.plan_compactions`): the run fences once, records
them all as Running in one compactions-file version, runs the key-range tasks of all of
them through one runner call, and commits them with one manifest CAS
(docs/rfcs/0018-segments.md).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import CompactionSettings, Settings
from slatelib.core.compaction_plan import (
    CompactionSpec,
    PlanOptions,
    Policy,
    check_compactable,
    idle_reason,
    plan_compactions,
)
from slatelib.core.compaction_source import SourceId
from slatelib.core.compaction_state import abandoned, running
from slatelib.core.compactions import Compactions, CompactionStatus
from slatelib.core.compactor_claim import ClaimVerdict
from slatelib.core.db_sst_options import DbSstOptions
from slatelib.core.manifest import Manifest
from slatelib.core.ranges import BytesRange
from slatelib.core.size_tiered import SizeTieredOptions
from slatelib.db_manifest import DbManifest
from slatelib.errors import (
    CommitStateUnknownError,
    CompactorActiveError,
    FencedError,
    InvalidArgumentError,
    UnavailableError,
)
from slatelib.format.sst import SstWriterOptions
from slatelib.ids import Ulid, UlidGenerator, ulid_time_ms, ulid_to_str
from slatelib.objstore import ObjectStore, with_wal_store
from slatelib.ops.compaction.breakdown import execute_breakdown
from slatelib.ops.compaction.commit import (
    CommitOutcome,
    CompactorClaim,
    commit_manifest,
    fence_compactor,
    mark_compaction_quietly,
    mark_compactions,
    record_compaction,
)
from slatelib.ops.compaction.guard import check_sources, judge_compactor
from slatelib.ops.compaction.report import (
    CompactionReport,
    ExecutedPart,
    build_report,
    plan_report,
)
from slatelib.ops.compaction.state import DbState, read_state
from slatelib.ops.engine import (
    CompactionResult,
    CompactionTask,
    InputView,
    TaskOptions,
    TaskRunner,
    ThreadTaskRunner,
    build_tasks,
    execute_tasks,
    input_views,
    load_merge_operator,
    plan_output_options,
    split_ranges,
)
from slatelib.paths import normalize_path
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.sequenced import Versioned
from slatelib.store.sst_reader import BlockCache
from slatelib.store.table_store import TableStore
from slatelib.store.wal_store import WalStore
from slatelib.txn import UpdateTimeoutError

__all__ = [
    "CompactionJob",
    "commit_compaction",
    "plan_options",
    "run_compaction",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionJob:
    """Fenced, recorded compactions ready to execute and commit: one, or one per tree of
    a segmented database (``compaction_ids[i]`` is the compactions-file id of
    ``specs[i]``)."""

    manifests: DbManifest
    compactions: CompactionsStore
    specs: tuple[CompactionSpec, ...]
    claim: CompactorClaim
    compaction_ids: tuple[Ulid, ...]
    settings: Settings
    clock: Clock

    @property
    def spec(self) -> CompactionSpec:
        """The first compaction (the only one of a database without segments)."""
        return self.specs[0]

    @property
    def compaction_id(self) -> Ulid:
        return self.compaction_ids[0]


def commit_compaction(job: CompactionJob,
                      results: Sequence[Sequence[CompactionResult]]) -> CommitOutcome:
    """Record the outputs (Compacted), commit the manifest, mark Completed
    (``results[i]``: the task results of ``job.specs[i]``).

    Raises:
        FencedError: a newer compactor took over; nothing is committed.
        SourcesChangedError: a source is gone; nothing is committed.
        ConflictError: the commit could not be written.
        CommitStateUnknownError: the commit's outcome is unknown (the entries stay
            Compacted).
        UnavailableError: recording the outputs failed, or the commit was not done within
            ``manifest_update_timeout`` (:class:`UpdateTimeoutError`); nothing is committed.
    """
    cs = job.settings.compaction
    outputs = [[h for r in sorted(rs, key=lambda r: r.index) for h in r.outputs]
               for rs in results]
    timeout = cs.manifest_update_timeout
    mark_compactions(job.compactions, job.claim.epoch,
                     [(cid, CompactionStatus.COMPACTED, outs)
                      for cid, outs in zip(job.compaction_ids, outputs, strict=True)],
                     clock=job.clock, timeout_s=timeout)
    try:
        outcome = commit_manifest(
            job.manifests, job.specs, outputs, epoch=job.claim.epoch,
            checkpoint_lifetime_s=cs.checkpoint_lifetime, clock=job.clock, timeout_s=timeout,
            drop_checkpoint=job.claim.marker,
        )
    except UpdateTimeoutError:
        raise  # read back and not there: nothing is committed
    except (UnavailableError, CommitStateUnknownError) as exc:
        # A lost response followed by a store that stays unavailable: the commit may have
        # landed. The entries stay Compacted; the next compactor's takeover marks them
        # Completed when the manifest references their outputs, else Failed.
        raise CommitStateUnknownError(
            f"compaction {', '.join(map(ulid_to_str, job.compaction_ids))} of "
            f"{job.manifests.root!r}: whether its manifest commit landed is unknown "
            f"({type(exc).__name__}: {exc}); its compactions entry stays Compacted and the "
            "next compaction run resolves it"
        ) from exc
    mark_compaction_quietly(job.compactions, job.claim.epoch, job.compaction_ids,
                            CompactionStatus.COMPLETED, clock=job.clock, timeout_s=timeout)
    return outcome


def plan_options(settings: Settings, policy: str | None,
                 sources: Sequence[str] | None) -> PlanOptions:
    """Plan options from settings and the ``--policy``/``--sources`` arguments.

    Raises:
        InvalidArgumentError: an unknown policy or a malformed source.
    """
    cs = settings.compaction
    parsed = tuple(SourceId.parse(s) for s in sources or ())
    pol = Policy.parse(policy or (Policy.SOURCES.value if parsed else cs.policy))
    if parsed and pol != Policy.SOURCES:
        raise InvalidArgumentError("--sources cannot be combined with --policy "
                                   f"{pol.value!r}")
    return PlanOptions(policy=pol, sources=parsed, size_tiered=SizeTieredOptions(
        min_compaction_sources=cs.min_compaction_sources,
        max_compaction_sources=cs.max_compaction_sources,
        include_size_threshold=cs.include_size_threshold,
        sorted_run_consolidation_threshold=cs.sorted_run_consolidation_threshold,
    ))


METADATA_CACHE_BYTES = 256 << 20
"""Bound of the driver's cache of input SST indexes and filters (one compaction's worth)."""


@dataclass
class _Run:
    """What one :func:`run_compaction` call works with."""

    root: str
    store: ObjectStore
    settings: Settings
    slots: int
    clock: Clock
    options: PlanOptions
    manifests: DbManifest
    compactions: CompactionsStore
    takeover: bool = False
    started: float = field(default_factory=time.perf_counter)
    timing: dict[str, float] = field(default_factory=dict)
    cache: BlockCache = field(default_factory=lambda: BlockCache(METADATA_CACHE_BYTES))
    """SST indexes and filters read before the fence, reused by the range split."""
    outputs: dict[CompactionSpec, tuple[SstWriterOptions, DbSstOptions]] = field(
        default_factory=dict)
    """The output SSTs' options of each compaction, planned from its inputs before the
    fence."""

    @property
    def cs(self) -> CompactionSettings:
        return self.settings.compaction

    def lap(self, phase: str, since: float) -> None:
        self.timing[phase] = self.timing.get(phase, 0.0) + time.perf_counter() - since

    def plan(self) -> tuple[DbState, list[CompactionSpec]]:
        state = read_state(self.manifests, self.compactions)
        check_compactable(state.manifest.value)
        WalStore(self.store, self.root).check_tail(state.manifest.value,
                                                   manifest_id=state.manifest.id)
        return state, plan_compactions(state.manifest.value, _value(state.compactions),
                                       self.options)

    def split(self, spec: CompactionSpec, manifest: Manifest,
              ) -> tuple[list[InputView], list[BytesRange]]:
        views = input_views(spec, manifest, TableStore(self.store, self.root))
        cs = self.cs
        ranges = split_ranges(self.store, views, parallelism=self.slots, cache=self.cache,
                              max_sst_size=cs.max_sst_size, min_range_bytes=cs.min_range_bytes,
                              tasks_per_slot=cs.tasks_per_slot)
        return views, ranges

    def fence(self) -> CompactorClaim:
        return fence_compactor(self.manifests, self.compactions, clock=self.clock,
                               timeout_s=self.cs.manifest_update_timeout,
                               takeover=self.takeover)

    def judge(self, state: DbState) -> ClaimVerdict:
        """Who holds the compactor epoch; raises unless this run may fence it."""
        t = time.perf_counter()
        verdict = judge_compactor(self.store, self.root, state, self.clock)
        self.lap("check", t)
        return verdict

    def check(self, specs: Sequence[CompactionSpec], manifest: Manifest) -> None:
        """Every input SST's metadata and the outputs' options, before the first write."""
        t = time.perf_counter()
        check_sources(self.store, self.root, manifest, specs, cache=self.cache)
        for spec in specs:
            self.plan_outputs(spec, manifest)
        self.lap("check", t)

    def plan_outputs(self, spec: CompactionSpec, manifest: Manifest,
                     ) -> tuple[SstWriterOptions, DbSstOptions]:
        """The output SSTs' options of ``spec``: the database's, from its inputs
        (output_options); planned once per spec."""
        if spec not in self.outputs:
            self.outputs[spec] = plan_output_options(self.store, self.root, manifest, spec,
                                                     self.settings, cache=self.cache)
        return self.outputs[spec]

    def sst_options(self, specs: Sequence[CompactionSpec], manifest: Manifest,
                    ) -> dict[str, Any]:
        """The report's ``sst_options``: the outputs' options and where each came from, of
        the compaction (with segments, each segment's compaction plans its own: the first
        one's, and ``by_segment`` when they differ)."""
        if not specs:
            return {}
        planned = [self.plan_outputs(spec, manifest)[1].to_dict() for spec in specs]
        out = dict(planned[0])
        if any(p != planned[0] for p in planned[1:]):
            out["by_segment"] = {spec.segment_label: p
                                 for spec, p in zip(specs, planned, strict=True)}
        return out

    def start(self, checked: Sequence[CompactionSpec]) -> tuple[CompactionJob, Manifest] | None:
        """Fence, plan again on the fenced state, list the compactions as Running
        (``checked``: the specs whose sources :meth:`check` read)."""
        t = time.perf_counter()
        claim = self.fence()
        state, specs = self.plan()
        if not specs:
            self.lap("fence", t)
            return None
        if specs != list(checked):  # the writer added sources meanwhile: check those too
            check_sources(self.store, self.root, state.manifest.value, specs,
                          cache=self.cache)
            for spec in specs:
                self.plan_outputs(spec, state.manifest.value)
        now = self.clock.now_ms()
        ids = UlidGenerator()
        compaction_ids = tuple(ids.new(now) for _ in specs)
        worker_id = ulid_to_str(ids.new(now))
        entries = [running(cid, spec.to_tiered(), worker_id, now)
                   for cid, spec in zip(compaction_ids, specs, strict=True)]
        record_compaction(self.compactions, claim.epoch, *entries, clock=self.clock,
                          timeout_s=self.cs.manifest_update_timeout)
        self.lap("fence", t)
        for cid, spec in zip(compaction_ids, specs, strict=True):
            log.info("compaction started [db=%s, id=%s, segment=%s, policy=%s, sources=%d, "
                     "destination=%d, epoch=%d]", self.root, ulid_to_str(cid),
                     spec.segment_label, spec.policy.value, len(spec.sources),
                     spec.destination, claim.epoch)
        job = CompactionJob(self.manifests, self.compactions, tuple(specs), claim,
                            compaction_ids, self.settings, self.clock)
        return job, state.manifest.value

    def tasks(self, job: CompactionJob, manifest: Manifest,
              ) -> tuple[list[CompactionTask], list[tuple[list[InputView], list[BytesRange]]]]:
        """The key-range tasks of every compaction of ``job`` (numbered across them, in
        spec order) and each compaction's input views and ranges."""
        cs = self.cs
        tasks: list[CompactionTask] = []
        splits = []
        for spec, cid in zip(job.specs, job.compaction_ids, strict=True):
            views, ranges = self.split(spec, manifest)
            part = build_tasks(spec, views, ranges, TaskOptions(
                store=self.store.spec, db_path=self.root, compaction_id=cid,
                sst_options=self.plan_outputs(spec, manifest)[0], max_sst_size=cs.max_sst_size,
                merge_operator=cs.merge_operator, max_fetch_tasks=cs.max_fetch_tasks,
                bytes_to_fetch=cs.bytes_to_fetch, min_ulid_ms=ulid_time_ms(cid),
            ))
            if tasks:  # numbered after the tasks of the compactions before it
                part = [replace(task, index=task.index + len(tasks)) for task in part]
            tasks.extend(part)
            splits.append((views, ranges))
        return tasks, splits

    def execute(self, job: CompactionJob, manifest: Manifest,
                runner: TaskRunner | None) -> CompactionReport:
        """Split, run the tasks, commit; mark the compactions Failed on any error but
        fencing (a fenced compactor must not write)."""
        cs = self.cs
        try:
            t = time.perf_counter()
            tasks, splits = self.tasks(job, manifest)
            self.lap("split", t)
            t, wall = time.perf_counter(), time.time()
            results, runs = execute_tasks(runner or ThreadTaskRunner(self.slots), tasks,
                                          cs.task_attempts)
            self.lap("execute", t)
            breakdown = execute_breakdown(wall, self.timing["execute"],
                                          [r.times for r in results])
            by_id = {task.index: task.compaction_id for task in tasks}
            per_spec = [[r for r in results if by_id[r.index] == cid]
                        for cid in job.compaction_ids]
            t = time.perf_counter()
            outcome = commit_compaction(job, per_spec)
            self.lap("commit", t)
        except (FencedError, CommitStateUnknownError):
            raise  # fenced: the new compactor owns the entry; unknown: see commit_compaction
        except Exception:
            mark_compaction_quietly(self.compactions, job.claim.epoch, job.compaction_ids,
                                    CompactionStatus.FAILED, clock=self.clock,
                                    timeout_s=cs.manifest_update_timeout)
            raise
        self.lap("total", self.started)
        parts = [ExecutedPart(views, ranges, rs)
                 for (views, ranges), rs in zip(splits, per_spec, strict=True)]
        report = build_report(self.root, job, parts, outcome, runs, self.timing)
        report = replace(report, sst_options=self.sst_options(job.specs, manifest),
                         execute_breakdown=breakdown)
        verdict = job.claim.verdict
        return report if verdict is None else replace(report, compactor=verdict.to_dict())


def _prepare(path: str, store: ObjectStore | str, settings: Settings | None,
             policy: str | None, sources: Sequence[str] | None, max_sst_size: int | None,
             parallelism: int | None, clock: Clock, takeover: bool,
             wal_store: ObjectStore | str | None = None) -> _Run:
    from slatelib.objstore import resolve_store

    settings = settings or Settings()
    if max_sst_size is not None:
        if max_sst_size < 1:
            raise InvalidArgumentError(f"max SST size must be positive, got {max_sst_size}")
        settings = replace(settings, compaction=replace(settings.compaction,
                                                        max_sst_size=max_sst_size))
    cs = settings.compaction
    slots = parallelism or cs.parallelism or os.cpu_count() or 1
    if slots < 1:
        raise InvalidArgumentError(f"parallelism must be positive, got {slots}")
    if cs.task_attempts < 1 or cs.max_sst_size < 1:
        raise InvalidArgumentError("[compaction] task_attempts and max_sst_size must be "
                                   "positive")
    load_merge_operator(cs.merge_operator)  # fail fast on a bad name, before any write
    root = normalize_path(path, what="database path")
    obj_store = with_wal_store(resolve_store(store), wal_store,
                               default=settings.object_store.wal_store)
    return _Run(root, obj_store, settings, slots, clock, plan_options(settings, policy, sources),
                DbManifest(obj_store, root), CompactionsStore(obj_store, root), takeover)


def run_compaction(
    path: str,
    store: ObjectStore | str,
    *,
    settings: Settings | None = None,
    policy: str | None = None,
    sources: Sequence[str] | None = None,
    max_sst_size: int | None = None,
    parallelism: int | None = None,
    dry_run: bool = False,
    takeover: bool = False,
    runner: TaskRunner | None = None,
    clock: Clock = SYSTEM_CLOCK,
    wal_store: ObjectStore | str | None = None,
) -> CompactionReport:
    """Plan, execute and commit one compaction of the database at ``path``.

    ``wal_store``: the object store (or URL) that keeps the database's WAL (0.17's
    ``with_wal_object_store``; None: ``store``'s own, else ``[object_store] wal_store``).
    Compaction does not read the WAL, but it refuses, as every command does, a store that
    holds none of the WAL tail the manifest promises (:mod:`slatelib.core.wal_tail`).

    Everything that can refuse the run is checked before its first write: the arguments
    and settings, the database state, the plan, who holds the compactor epoch
    (:mod:`slatelib.core.compactor_claim`: a run never fences a compactor that may be live,
    unless ``takeover``), the ``external_dbs`` paths and every input SST's index and filter.
    A refused run leaves the database unchanged.

    ``dry_run`` plans and splits (reading SST indexes) but writes nothing; its report says
    who holds the compactor epoch. With nothing to compact, nothing is written either,
    unless a crashed compactor left entries in ``compactions/`` that keep GC back: then the
    job takes the file over (fences) to close them.

    Raises:
        InvalidArgumentError: bad arguments, settings or sources.
        CompactorActiveError: another compactor may hold the epoch (and not ``takeover``).
        InvalidDbStateError: the database cannot be compacted.
        FencedError: another compactor took over; nothing was committed.
        ConflictError: a source disappeared or the commit kept conflicting.
        DataError: an input SST is damaged or missing (named in the error).
        WalStoreMissingError: the WAL tail is not in the store (a WAL store not given).
        UnavailableError / StorageError: storage failures.
    """
    run = _prepare(path, store, settings, policy, sources, max_sst_size, parallelism, clock,
                   takeover, wal_store)
    state, specs = run.plan()
    run.lap("plan", run.started)
    verdict = run.judge(state)
    policy_ = run.options.policy
    idle = None if specs else idle_reason(state.manifest.value, _value(state.compactions),
                                          run.options)
    if dry_run:
        ranges = [run.split(spec, state.manifest.value)[1] for spec in specs]
        options = run.sst_options(specs, state.manifest.value)
        run.lap("total", run.started)
        report = plan_report(run.root, policy_, specs, ranges, dry_run=True,
                             timing=run.timing, compactor=verdict.to_dict(), reason=idle)
        return replace(report, sst_options=options)
    if not verdict.may_fence and not takeover:
        raise CompactorActiveError(verdict.refusal(run.root))
    if not specs:
        if abandoned(_value(state.compactions)):
            t = time.perf_counter()
            run.fence()
            run.lap("fence", t)
        run.lap("total", run.started)
        return plan_report(run.root, policy_, [], [], dry_run=False,
                           timing=run.timing, compactor=verdict.to_dict(), reason=idle)
    run.check(specs, state.manifest.value)
    started = run.start(specs)
    if started is None:
        run.lap("total", run.started)
        return plan_report(run.root, policy_, [], [], dry_run=False,
                           timing=run.timing, compactor=verdict.to_dict(),
                           reason="another compactor compacted the sources before this "
                                  "run fenced it")
    return run.execute(*started, runner)


def _value(state: Versioned[Compactions] | None) -> Compactions | None:
    return None if state is None else state.value
