"""Compaction: one logical compaction split by key range, committed by one manifest CAS.

Public API (re-exported by :mod:`slatelib.ops.compaction`)::

    plan_compaction(manifest, compactions, options) -> CompactionSpec | None      # pure
    execute_compaction_task(task) -> CompactionResult                            # one range
    commit_compaction(job, results) -> CommitOutcome                             # driver CAS
    run_compaction(path, store, ...) -> CompactionReport                         # all of it

:func:`run_compaction` is what ``slate compact`` and ``jobs/compact.py`` call: read the state,
plan, fence the other compactors, record the compaction in ``compactions/``, split it into
ranges of balanced input bytes, run one task per range through a
:class:`~slatelib.ops.compaction.runner.TaskRunner` (threads here, Spark executors in the
job), retry tasks that failed transiently, and commit.
Databases with segments (SlateDB RFC-0024) are refused with :class:`UnsupportedFeatureError`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import CompactionSettings, Settings
from slatelib.core.compaction_plan import (
    CompactionSpec,
    PlanOptions,
    Policy,
    check_compactable,
    plan_compaction,
)
from slatelib.core.compaction_source import SourceId
from slatelib.core.compaction_state import abandoned, running
from slatelib.core.compactions import Compactions, CompactionStatus
from slatelib.core.compactor_claim import ClaimVerdict
from slatelib.core.db_sst_options import DbSstOptions
from slatelib.core.manifest import Manifest
from slatelib.core.ranges import BytesRange
from slatelib.core.size_tiered import SizeTieredOptions
from slatelib.errors import (
    CommitStateUnknownError,
    CompactorActiveError,
    FencedError,
    InvalidArgumentError,
    UnavailableError,
)
from slatelib.format.sst import SstWriterOptions
from slatelib.ids import Ulid, UlidGenerator, ulid_time_ms, ulid_to_str
from slatelib.objstore import ObjectStore
from slatelib.ops.compaction.commit import (
    CommitOutcome,
    CompactorClaim,
    UpdateTimeoutError,
    commit_manifest,
    fence_compactor,
    mark_compaction,
    mark_compaction_quietly,
    record_compaction,
)
from slatelib.ops.compaction.execute import load_merge_operator
from slatelib.ops.compaction.guard import check_sources, judge_compactor
from slatelib.ops.compaction.output_options import plan_output_options
from slatelib.ops.compaction.plan_io import (
    DbState,
    InputView,
    TaskOptions,
    build_tasks,
    input_views,
    read_state,
    split_ranges,
)
from slatelib.ops.compaction.report import CompactionReport, build_report, plan_report
from slatelib.ops.compaction.runner import TaskRunner, ThreadTaskRunner, execute_tasks
from slatelib.ops.compaction.task import CompactionResult
from slatelib.paths import normalize_path
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sequenced import Versioned
from slatelib.store.sst_reader import BlockCache
from slatelib.store.table_store import TableStore

__all__ = [
    "CompactionJob",
    "commit_compaction",
    "plan_options",
    "run_compaction",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionJob:
    """A fenced, recorded compaction ready to execute and commit."""

    manifests: ManifestStore
    compactions: CompactionsStore
    spec: CompactionSpec
    claim: CompactorClaim
    compaction_id: Ulid
    settings: Settings
    clock: Clock


def commit_compaction(job: CompactionJob, results: Sequence[CompactionResult]) -> CommitOutcome:
    """Record the outputs (Compacted), commit the manifest, mark Completed.

    Raises:
        FencedError: a newer compactor took over; nothing is committed.
        SourcesChangedError: a source is gone; nothing is committed.
        ConflictError: the commit could not be written.
        CommitStateUnknownError: the commit's outcome is unknown (the entry stays Compacted).
        UnavailableError: recording the outputs failed, or the commit was not done within
            ``manifest_update_timeout`` (:class:`UpdateTimeoutError`); nothing is committed.
    """
    cs = job.settings.compaction
    outputs = [h for r in sorted(results, key=lambda r: r.index) for h in r.outputs]
    timeout = cs.manifest_update_timeout
    mark_compaction(job.compactions, job.claim.epoch, job.compaction_id,
                    CompactionStatus.COMPACTED, outputs, clock=job.clock, timeout_s=timeout)
    try:
        outcome = commit_manifest(
            job.manifests, job.spec, outputs, epoch=job.claim.epoch,
            checkpoint_lifetime_s=cs.checkpoint_lifetime, clock=job.clock, timeout_s=timeout,
            drop_checkpoint=job.claim.marker,
        )
    except UpdateTimeoutError:
        raise  # read back and not there: nothing is committed
    except (UnavailableError, CommitStateUnknownError) as exc:
        # A lost response followed by a store that stays unavailable: the commit may have
        # landed. The entry stays Compacted; the next compactor's takeover marks it
        # Completed when the manifest references its outputs, else Failed.
        raise CommitStateUnknownError(
            f"compaction {ulid_to_str(job.compaction_id)} of {job.manifests.root!r}: whether "
            f"its manifest commit landed is unknown ({type(exc).__name__}: {exc}); its "
            "compactions entry stays Compacted and the next compaction run resolves it"
        ) from exc
    mark_compaction_quietly(job.compactions, job.claim.epoch, job.compaction_id,
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
    manifests: ManifestStore
    compactions: CompactionsStore
    takeover: bool = False
    started: float = field(default_factory=time.perf_counter)
    timing: dict[str, float] = field(default_factory=dict)
    cache: BlockCache = field(default_factory=lambda: BlockCache(METADATA_CACHE_BYTES))
    """SST indexes and filters read before the fence, reused by the range split."""
    outputs: tuple[SstWriterOptions, DbSstOptions] | None = None
    """The output SSTs' options, planned from the inputs before the fence."""

    @property
    def cs(self) -> CompactionSettings:
        return self.settings.compaction

    def lap(self, phase: str, since: float) -> None:
        self.timing[phase] = self.timing.get(phase, 0.0) + time.perf_counter() - since

    def plan(self) -> tuple[DbState, CompactionSpec | None]:
        state = read_state(self.manifests, self.compactions)
        check_compactable(state.manifest.value)
        return state, plan_compaction(state.manifest.value, _value(state.compactions),
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

    def check(self, spec: CompactionSpec, manifest: Manifest) -> None:
        """Every input SST's metadata and the outputs' options, before the first write."""
        t = time.perf_counter()
        check_sources(self.store, self.root, manifest, [spec], cache=self.cache)
        self.plan_outputs(spec, manifest)
        self.lap("check", t)

    def plan_outputs(self, spec: CompactionSpec, manifest: Manifest) -> None:
        """The output SSTs' options: the database's, from the inputs (output_options)."""
        self.outputs = plan_output_options(self.store, self.root, manifest, spec, self.settings,
                                           cache=self.cache)

    def start(self, checked: CompactionSpec) -> tuple[CompactionJob, Manifest] | None:
        """Fence, plan again on the fenced state, list the compaction as Running
        (``checked``: the spec whose sources :meth:`check` read)."""
        t = time.perf_counter()
        claim = self.fence()
        state, spec = self.plan()
        if spec is None:
            self.lap("fence", t)
            return None
        if spec != checked:  # the writer added sources meanwhile: check those too
            check_sources(self.store, self.root, state.manifest.value, [spec], cache=self.cache)
            self.plan_outputs(spec, state.manifest.value)
        now = self.clock.now_ms()
        ids = UlidGenerator()
        compaction_id = ids.new(now)
        entry = running(compaction_id, spec.to_tiered(), ulid_to_str(ids.new(now)), now)
        record_compaction(self.compactions, claim.epoch, entry, clock=self.clock,
                          timeout_s=self.cs.manifest_update_timeout)
        self.lap("fence", t)
        log.info("compaction started [db=%s, id=%s, policy=%s, sources=%d, destination=%d, "
                 "epoch=%d]", self.root, ulid_to_str(compaction_id), spec.policy.value,
                 len(spec.sources), spec.destination, claim.epoch)
        job = CompactionJob(self.manifests, self.compactions, spec, claim, compaction_id,
                            self.settings, self.clock)
        return job, state.manifest.value

    def execute(self, job: CompactionJob, manifest: Manifest,
                runner: TaskRunner | None) -> CompactionReport:
        """Split, run the tasks, commit; mark the compaction Failed on any error but
        fencing (a fenced compactor must not write)."""
        cs = self.cs
        try:
            t = time.perf_counter()
            views, ranges = self.split(job.spec, manifest)
            if self.outputs is None:
                self.plan_outputs(job.spec, manifest)
            assert self.outputs is not None
            tasks = build_tasks(job.spec, views, ranges, TaskOptions(
                store=self.store.spec, db_path=self.root, compaction_id=job.compaction_id,
                sst_options=self.outputs[0], max_sst_size=cs.max_sst_size,
                merge_operator=cs.merge_operator, max_fetch_tasks=cs.max_fetch_tasks,
                bytes_to_fetch=cs.bytes_to_fetch, min_ulid_ms=ulid_time_ms(job.compaction_id),
            ))
            self.lap("split", t)
            t = time.perf_counter()
            results, runs = execute_tasks(runner or ThreadTaskRunner(self.slots), tasks,
                                          cs.task_attempts)
            self.lap("execute", t)
            t = time.perf_counter()
            outcome = commit_compaction(job, results)
            self.lap("commit", t)
        except (FencedError, CommitStateUnknownError):
            raise  # fenced: the new compactor owns the entry; unknown: see commit_compaction
        except Exception:
            mark_compaction_quietly(self.compactions, job.claim.epoch, job.compaction_id,
                                    CompactionStatus.FAILED, clock=self.clock,
                                    timeout_s=cs.manifest_update_timeout)
            raise
        self.lap("total", self.started)
        report = build_report(self.root, job, views, ranges, results, outcome, runs,
                              self.timing)
        report = replace(report, sst_options=self.outputs[1].to_dict())
        verdict = job.claim.verdict
        return report if verdict is None else replace(report, compactor=verdict.to_dict())


def _prepare(path: str, store: ObjectStore | str, settings: Settings | None,
             policy: str | None, sources: Sequence[str] | None, max_sst_size: int | None,
             parallelism: int | None, clock: Clock, takeover: bool) -> _Run:
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
    obj_store = resolve_store(store)
    return _Run(root, obj_store, settings, slots, clock, plan_options(settings, policy, sources),
                ManifestStore(obj_store, root), CompactionsStore(obj_store, root), takeover)


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
) -> CompactionReport:
    """Plan, execute and commit one compaction of the database at ``path``.

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
        InvalidDbStateError / UnsupportedFeatureError: the database cannot be compacted.
        FencedError: another compactor took over; nothing was committed.
        ConflictError: a source disappeared or the commit kept conflicting.
        DataError: an input SST is damaged or missing (named in the error).
        UnavailableError / StorageError: storage failures.
    """
    run = _prepare(path, store, settings, policy, sources, max_sst_size, parallelism, clock,
                   takeover)
    state, spec = run.plan()
    run.lap("plan", run.started)
    verdict = run.judge(state)
    if dry_run:
        ranges = [] if spec is None else run.split(spec, state.manifest.value)[1]
        if spec is not None:
            run.plan_outputs(spec, state.manifest.value)
        run.lap("total", run.started)
        report = plan_report(run.root, run.options.policy, spec, ranges, dry_run=True,
                             timing=run.timing, compactor=verdict.to_dict())
        return report if run.outputs is None else replace(
            report, sst_options=run.outputs[1].to_dict())
    if not verdict.may_fence and not takeover:
        raise CompactorActiveError(verdict.refusal(run.root))
    if spec is None:
        if abandoned(_value(state.compactions)):
            t = time.perf_counter()
            run.fence()
            run.lap("fence", t)
        run.lap("total", run.started)
        return plan_report(run.root, run.options.policy, None, [], dry_run=False,
                           timing=run.timing, compactor=verdict.to_dict())
    run.check(spec, state.manifest.value)
    started = run.start(spec)
    if started is None:
        run.lap("total", run.started)
        return plan_report(run.root, run.options.policy, None, [], dry_run=False,
                           timing=run.timing, compactor=verdict.to_dict())
    return run.execute(*started, runner)


def _value(state: Versioned[Compactions] | None) -> Compactions | None:
    return None if state is None else state.value
