"""The steps of a rescale job (:class:`RescaleJob`), shared by split and merge: checks
before the first write, then, once the job is recorded, flush and checkpoint each source,
clone, compact, validate and detach each target, release the sources
(docs/rfcs/0008-rescale-job.md). The entry points are in :mod:`slatelib.ops.rescale.run`.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from slatelib.clock import Clock
from slatelib.config import Settings
from slatelib.core.checkpoints import remove_checkpoints
from slatelib.core.manifest import Manifest
from slatelib.core.rescale_check import check_tiling
from slatelib.core.rescale_fanout import Fanout, plan_fanout
from slatelib.core.rescale_plan import (
    SPLIT,
    RescalePlan,
    describe_range,
    format_key,
    same_job,
    with_split_keys,
)
from slatelib.errors import DataError, InvalidArgumentError, InvalidDbStateError, SlateError
from slatelib.objstore import ObjectStore
from slatelib.ops.engine import (
    TaskRunner,
    ThreadTaskRunner,
    load_merge_operator,
    plan_database_options,
)
from slatelib.ops.rescale import record
from slatelib.ops.rescale.balance import plan_weights, same_weights
from slatelib.ops.rescale.pipeline import BatchRunner, compact_targets
from slatelib.ops.rescale.report import RescaleReport
from slatelib.ops.rescale.source import (
    SourceInfo,
    check_flushable,
    check_live,
    check_segmented_source,
    ensure_checkpoint,
    flush_wal_to_l0,
    read_source,
    settle_segmented_wal,
)
from slatelib.ops.rescale.targets import compact_target, detach_target, ensure_clone
from slatelib.ops.rescale.task_check import (
    CHECKED_BY_SCAN,
    CHECKED_BY_TASKS,
    FusedCheck,
    run_checked_compaction_task,
)
from slatelib.ops.rescale.validate import (
    Mapper,
    TargetCheck,
    check_targets,
    source_checkpoints,
    thread_mapper,
)
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.txn import update_versioned

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_LIVE_WINDOW_S", "JOB_CHECKPOINT_LIFETIME_S", "RescaleJob", "RescaleOptions",
           "RunnerFactory", "new_job_id"]

DEFAULT_LIVE_WINDOW_S = 300.0
JOB_CHECKPOINT_LIFETIME_S = 7 * 86400.0
"""Lifetime of the job's source checkpoints, renewed by every rerun (an abandoned job's
checkpoints expire by themselves)."""

RunnerFactory = Callable[[str], TaskRunner | None]
"""A compaction task runner for a target (by label); None: threads of this process. Given,
each target's tasks run on their own (no :data:`~.pipeline.BatchRunner` batches)."""


@dataclass(frozen=True)
class RescaleOptions:
    """How a rescale treats its sources, and how it runs.

    ``live_window_s``: manifest or WAL writes this recent count as a live writer.
    ``concurrency``: targets compacted at once; ``parallelism``: key ranges per target
    compaction (None, each: :func:`~slatelib.core.rescale_fanout.plan_fanout`'s default).
    ``slots``: executor slots the work is spread over (the Spark default parallelism in the
    job; None: ``[compaction] parallelism``, else the CPU count).
    """

    fence_source: bool = False
    allow_live_source: bool = False
    live_window_s: float = DEFAULT_LIVE_WINDOW_S
    checkpoint_lifetime_s: float = JOB_CHECKPOINT_LIFETIME_S
    parallelism: int | None = None
    concurrency: int | None = None
    dry_run: bool = False
    slots: int | None = None
    check_in_tasks: bool = True
    """Check each target in its compaction tasks (:mod:`~.task_check`) where they can vouch
    for it; False: the separate scan of every target (the behaviour before)."""

    def recorded(self) -> dict[str, Any]:
        return {"fence_source": self.fence_source, "allow_live_source": self.allow_live_source}


def new_job_id(clock: Clock) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(clock.now_ms() / 1000))
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


class RescaleJob:
    """One rescale call: the store, settings, options and report; the checks before the
    first write, then the steps after the record (:meth:`run`)."""

    def __init__(self, kind: str, store: ObjectStore | str, settings: Settings | None,
                 options: RescaleOptions, runner_factory: RunnerFactory | None,
                 mapper: Mapper | None, clock: Clock, *,
                 batch_runner: BatchRunner | None = None,
                 wal_store: ObjectStore | str | None = None) -> None:
        from slatelib.objstore import resolve_store, with_wal_store

        self.kind = kind
        self.settings = settings or Settings()
        self.store = with_wal_store(resolve_store(store), wal_store,
                                    default=self.settings.object_store.wal_store)
        self.options = options
        self.runner_factory = runner_factory
        self.batch_runner = batch_runner
        self.mapper = mapper or thread_mapper()
        self.clock = clock
        self.report = RescaleReport(kind)
        self.planned_keys: dict[tuple[str, int], tuple[Manifest, tuple[bytes, ...]]] = {}
        """Balanced split keys this call chose before the first write, by (source, shards),
        with the manifest they were chosen from: when the checkpoint pins a manifest with
        the same views (:func:`~.balance.same_weights`; the checkpoint itself is the only
        change when there was nothing to flush), the SST indexes are not read again."""
        if options.live_window_s < 0:
            raise InvalidArgumentError("the live-writer window must not be negative")
        if options.parallelism is not None and options.parallelism < 1:
            raise InvalidArgumentError(f"parallelism must be positive, got {options.parallelism}")
        if options.slots is not None and options.slots < 1:
            raise InvalidArgumentError(f"slots must be positive, got {options.slots}")
        load_merge_operator(self.settings.compaction.merge_operator)

    # ------------------------------------------------------------------ before writing
    def existing(self, sources: Sequence[str], targets: Sequence[str],
                 keys: Sequence[bytes] | None) -> RescalePlan | None:
        """A running job this call resumes; a finished one ends the call (``already_done``).

        Raises:
            InvalidDbStateError: a source runs a different job.
        """
        for src in sources:
            active = record.read_active(self.store, src)
            if active is None:
                continue
            why = same_job(active, self.kind, sources, targets, keys)
            if why is None:
                return active
            raise InvalidDbStateError(
                f"source {src!r} is running rescale job {active.job_id} ({why}): rerun that "
                f"job's command to finish it; nothing was written")
        return None

    def finished(self, sources: Sequence[str], targets: Sequence[str],
                 keys: Sequence[bytes] | None) -> RescaleReport | None:
        for plan in reversed(record.read_finished(self.store, sources[0])):
            if same_job(plan, self.kind, sources, targets, keys) is None:
                if all(ManifestStore(self.store, t).try_read_latest() is not None
                       for t in targets):
                    record.release(self.store, sources, plan.job_id)  # killed in between
                    raw = self.store.get(record.finished_path(sources[0], plan.job_id))
                    self.report.job_id = plan.job_id
                    self.report.status = "already_done"
                    self.report.recorded = json.loads(raw).get("report")
                    return self.report
        return None

    def inspect(self, path: str, *, flush: bool = True) -> SourceInfo:
        """Read a source and refuse it before any write (``flush``: its WAL tail will be
        flushed, so that must be possible)."""
        o = self.options
        info = read_source(self.store, path, self.clock, live_window_s=o.live_window_s)
        check_live(info, fence_source=o.fence_source, allow_live_source=o.allow_live_source)
        check_segmented_source(info, fence_source=o.fence_source)
        if flush:
            check_flushable(info, self.settings, allow_live_source=o.allow_live_source,
                            fence_source=o.fence_source)
        # the flush and the targets' compactions write with the database's SST options:
        # one that slatelib cannot write (a prefix filter's extractor missing) refuses now
        plan_database_options(self.store, path, info.latest.value, self.settings)
        self.report.sources.append(info.to_dict())
        return info

    def objects_to_write(self, infos: Sequence[SourceInfo], targets: Sequence[str],
                         est_bytes: Sequence[int], *, own_checkpoint: bool = True,
                         ) -> list[str]:
        out = []
        sst = max(1, self.settings.compaction.max_sst_size)
        for info in infos:
            p = info.path
            out.append(f"{p}/slatelib/rescale/active.json: the job record (then "
                       f"{p}/slatelib/rescale/<job id>.json)")
            flush = info.needs_flush and own_checkpoint
            if flush or self.options.fence_source:
                out.append(f"{p}/wal/: zero-byte WAL fences above "
                           f"{info.latest.value.replay_after_wal_id} (fences the writer)")
            if flush:
                out.append(f"{p}/compacted/: one or more L0 SSTs holding the "
                           f"{info.wal_rows} WAL rows not yet in an L0")
            out.append(f"{p}/manifest/: new versions (writer epoch, L0 flush, the job's "
                       "checkpoint, the targets' final checkpoints and their release)")
        for t, b in zip(targets, est_bytes, strict=True):
            out.append(f"{t}/manifest/: the clone's manifests, then the compaction's")
            out.append(f"{t}/compacted/: about {max(1, -(-b // sst))} SSTs ({b} bytes "
                       "estimated)")
            out.append(f"{t}/compactions/ and {t}/slatelib/claims/: the compaction's records")
        return out

    # ------------------------------------------------------------------- after record
    def prepare_sources(self, plan: RescalePlan, fresh: dict[str, SourceInfo]) -> None:
        """Step 3 for every source that has no job checkpoint yet (a rerun renews it)."""
        for i, src in enumerate(plan.sources):
            cp = uuid.UUID(src.checkpoint_id)
            latest = ManifestStore(self.store, src.path).read_latest()
            entry = next((s for s in self.report.sources if s["path"] == src.path), None)
            if entry is None:
                entry = {"path": src.path}
                self.report.sources.append(entry)
            entry["checkpoint_id"] = src.checkpoint_id
            targets = [t.path for t in plan.targets if any(p.source == i for p in t.parts)]
            cloned = [t for t in targets
                      if ManifestStore(self.store, t).try_read_latest() is not None]
            if latest.value.checkpoint(cp) is None and cloned:
                missing = [t for t in targets if t not in cloned]
                if missing:
                    raise InvalidDbStateError(
                        f"the checkpoint {cp} of {src.path!r} that rescale job {plan.job_id} "
                        f"clones from is gone, and targets {missing} are not created yet: "
                        "the job cannot finish; destroy its targets (`slate --path T destroy "
                        f"--hard`), delete {record.active_path(src.path)} and start again")
                entry["checkpoint"] = "gone (targets cloned)"
                continue
            if not plan.options.get("own_checkpoint", True):  # given by the caller
                if latest.value.checkpoint(cp) is None:
                    raise InvalidDbStateError(
                        f"checkpoint {cp} of {src.path!r}, which rescale job {plan.job_id} "
                        "clones from, is gone; nothing was cloned; delete "
                        f"{record.active_path(src.path)} and start again")
                entry["checkpoint"] = "given"
                if plan.options.get("fence_source") and not cloned:
                    with self.report.phase("flush"):
                        flushed = flush_wal_to_l0(self.store, src.path, self.settings,
                                                  self.clock)
                    entry["fenced"] = {"writer_epoch": flushed.value.writer_epoch}
                continue
            if latest.value.checkpoint(cp) is None:
                info = fresh.get(src.path) or read_source(
                    self.store, src.path, self.clock, live_window_s=self.options.live_window_s)
                settled: StoredManifest | None = None
                if latest.value.has_segments and info.needs_flush:
                    with self.report.phase("flush"):  # rows in L0s already: no writer
                        settled = settle_segmented_wal(self.store, src.path, self.clock)
                elif info.needs_flush or plan.options.get("fence_source"):
                    with self.report.phase("flush"):
                        settled = flush_wal_to_l0(self.store, src.path, self.settings,
                                                  self.clock)
                if settled is not None:
                    entry["flushed"] = {"manifest_id": settled.id,
                                        "writer_epoch": settled.value.writer_epoch,
                                        "wal_rows": info.wal_rows}
            with self.report.phase("checkpoint"):
                stored = ensure_checkpoint(self.store, src.path, cp,
                                           lifetime_s=self.options.checkpoint_lifetime_s,
                                           clock=self.clock)
            pinned = stored.value.checkpoint(cp)
            entry["checkpoint_manifest_id"] = None if pinned is None else pinned.manifest_id

    def choose_keys(self, plan: RescalePlan) -> RescalePlan:
        """Auto split keys from the checkpoint's manifest (deterministic, so a rerun that
        finds them unrecorded chooses the same; the ones the plan chose when the checkpoint
        pins the manifest they were chosen from), recorded before any clone."""
        if plan.kind != SPLIT or plan.split_keys is not None:
            return plan
        src = plan.sources[0]
        ms = ManifestStore(self.store, src.path)
        cp = ms.read_latest().value.checkpoint(uuid.UUID(src.checkpoint_id))
        if cp is None:  # pragma: no cover - prepare_sources created it
            raise InvalidDbStateError(f"checkpoint {src.checkpoint_id} of {src.path!r} is gone")
        pinned = ms.read(cp.manifest_id).value
        planned = self.planned_keys.get((src.path, len(plan.targets)))
        if planned is not None and same_weights(planned[0], pinned):
            keys: tuple[bytes, ...] | None = planned[1]
        else:
            keys = plan_weights(self.store, src.path, pinned, len(plan.targets))[1]
        if keys is None:
            raise InvalidArgumentError(
                f"cannot choose {len(plan.targets) - 1} split keys from checkpoint "
                f"{src.checkpoint_id} of {src.path!r}: too few distinct keys; rerun with --at")
        plan = with_split_keys(plan, keys)
        record.update(self.store, plan)
        return plan

    def run(self, plan: RescalePlan, fresh: dict[str, SourceInfo]) -> RescaleReport:
        """The steps after the record (:meth:`steps`). A failure says what the job had
        written by then (its records, its checkpoints), whatever the failed step claims
        about its own writes.

        Raises:
            SlateError: as the steps.
        """
        try:
            return self.steps(plan, fresh)
        except SlateError as exc:
            record.with_written_note(exc, self.store, plan)
            raise

    def steps(self, plan: RescalePlan, fresh: dict[str, SourceInfo]) -> RescaleReport:
        rep = self.report
        rep.job_id = plan.job_id
        self.prepare_sources(plan, fresh)
        with rep.phase("plan"):
            plan = self.choose_keys(plan)
        if plan.split_keys is not None:
            rep.split_keys = [format_key(k) for k in plan.split_keys]
        while len(rep.targets) < len(plan.targets):
            rep.targets.append({})
        for i, t in enumerate(plan.targets):
            rep.targets[i].update({"path": t.path, "ranges": [
                {"source": plan.sources[p.source].path, **describe_range(p.range)}
                for p in t.parts]})
        with rep.phase("clone"):
            for i, t in enumerate(plan.targets):
                rep.targets[i]["clone"] = ensure_clone(self.store, plan, t, self.clock)
        fan = self.fanout(plan)
        with rep.phase("compact"):
            fused = self.compact_all(plan, fan)
        with rep.phase("validate"):
            recloned = any(rep.targets[i]["clone"].get("created")
                           for i in range(len(plan.targets)))
            if plan.status == "validated" and not recloned:
                # a rerun: the sources may be released already (a target destroyed since and
                # cloned again by this run is checked again; the clone needed the checkpoint)
                rep.validation = {**plan.validation, "checked_by": "an earlier run"}
            else:
                self.validate(plan, fan, fused)
                plan = replace(plan, status="validated", validation=dict(rep.validation))
                record.update(self.store, plan)
        with rep.phase("detach"):
            pending = []
            for i, t in enumerate(plan.targets):
                got = detach_target(self.store, plan, t, self.clock)
                rep.targets[i]["detach"] = got
                pending += [f"{t.path} from {d['source']}: {d['reason']}" for d in got
                            if d["status"] == "pending"]
            if pending:
                raise InvalidDbStateError("rescale job " + plan.job_id + ": targets still "
                                          "attached to their sources: " + "; ".join(pending))
        with rep.phase("release"):
            for src in plan.sources:
                if plan.options.get("own_checkpoint", True):
                    self._delete_checkpoint(src.path, uuid.UUID(src.checkpoint_id))
        rep.status = "done"
        record.finish(self.store, plan, rep.to_dict())
        log.info("rescale done [job=%s, kind=%s, targets=%d]", plan.job_id, plan.kind,
                 len(plan.targets))
        return rep

    def fanout(self, plan: RescalePlan) -> Fanout:
        """Targets compacted at once, ranges per target, chunks per target
        (:func:`~slatelib.core.rescale_fanout.plan_fanout`)."""
        cs = self.settings.compaction
        return plan_fanout(len(plan.targets), self.slots(), db_concurrency=cs.db_concurrency,
                           concurrency=self.options.concurrency,
                           parallelism=self.options.parallelism,
                           parallelism_setting=cs.parallelism)

    def compact_all(self, plan: RescalePlan, fan: Fanout) -> FusedCheck | None:
        """Step 5, targets isolated: every one is tried, then the first failure raised. The
        key-range tasks of the targets compacted at once run as one batch
        (:mod:`~.pipeline`: one Spark job in the job), unless a ``runner_factory`` gives each
        target a runner of its own. With a batch (and ``options.check_in_tasks``), every
        task also checks its outputs against its parts (:mod:`~.task_check`); returns that
        check's state for :meth:`validate` (None: no task checked anything).

        Raises:
            SlateError: a compaction failed (its target's entry in the report says how).
        """
        rep = self.report

        def compact(i: int, gathered: TaskRunner | None) -> dict[str, Any]:
            t = plan.targets[i]
            runner = gathered if self.runner_factory is None else self.runner_factory(
                f"rescale {t.path}")
            got = compact_target(self.store, plan, t, self.settings, runner=runner,
                                 parallelism=fan.ranges, clock=self.clock)
            rep.targets[i]["compaction"] = got
            return got

        fused = None
        segmented = any(ManifestStore(self.store, s.path).read_latest().value.has_segments
                        for s in plan.sources)
        if segmented:  # a segmented target is checked by the scan (docs/rfcs/0018-segments.md)
            log.info("rescale: segmented sources; every target is checked by the scan")
        if self.runner_factory is None and self.options.check_in_tasks and not segmented:
            try:
                checkpoints = source_checkpoints(self.store, plan)
            except InvalidDbStateError as gone:  # the separate check reports it
                log.warning("rescale: no check in the compaction tasks [error=%s]", gone)
            else:
                fused = FusedCheck(self.store, plan, checkpoints,
                                   self.settings.compaction.merge_operator)
        batch = None if self.runner_factory is not None else (
            self.batch_runner or ThreadTaskRunner(self.slots(),
                                                  task_fn=run_checked_compaction_task))
        if batch is not None and fused is not None:
            batch = fused.batch_runner(batch)
        done = compact_targets(len(plan.targets), compact, concurrency=fan.concurrency,
                               run_batch=batch)
        for i, exc in enumerate(done.errors):
            if exc is not None:
                rep.targets[i]["compaction"] = {
                    "outcome": "failed", "error": {"type": type(exc).__name__,
                                                   "message": str(exc)}}
        done.raise_first()
        return fused

    def validate(self, plan: RescalePlan, fan: Fanout, fused: FusedCheck | None = None,
                 ) -> None:
        """Step 6: the ranges tile the key space (a split); every target as committed
        equals its parts at the checkpoints. A target whose compaction tasks checked it
        (``fused``, :meth:`FusedCheck.verify`) needs no scan; the others' chunks, each a
        scan of the target and of its parts over the same keys, run in one mapper call.

        Raises:
            DataError: a gap or overlap between the ranges, or a target that differs
                (nothing is released).
            InvalidDbStateError: a source checkpoint to compare with is gone.
            UnavailableError / StorageError: a scan failed.
        """
        self._check_tiling(plan)
        rep = self.report
        checks: dict[int, TargetCheck] = {}
        for i, t in enumerate(plan.targets):
            got: TargetCheck | str = "no check in the compaction tasks"
            if fused is not None:
                cid = rep.targets[i].get("compaction", {}).get("compaction_id")
                got = fused.verify(i, t.path, cid)
            if isinstance(got, TargetCheck):
                checks[i] = got
                rep.targets[i]["checked_by"] = CHECKED_BY_TASKS
            else:
                rep.targets[i]["checked_by"] = CHECKED_BY_SCAN
                if fused is not None:
                    rep.targets[i]["scan_reason"] = got
                    log.info("rescale target checked by a scan [target=%s, reason=%s]",
                             t.path, got)
        scan = [i for i in range(len(plan.targets)) if i not in checks]
        scanned = check_targets(self.store, plan, self.mapper,
                                self.settings.compaction.merge_operator, chunks=fan.chunks,
                                only=scan)
        checks.update(zip(scan, scanned, strict=True))
        rep.validation["checked_in_tasks"] = len(plan.targets) - len(scan)
        self._report_checks(plan, [checks[i] for i in range(len(plan.targets))])

    def slots(self) -> int:
        """The executor slots the scans and compactions share (``options.slots``, else the
        compaction parallelism, else this machine's CPUs)."""
        return (self.options.slots or self.settings.compaction.parallelism
                or os.cpu_count() or 1)

    def _check_tiling(self, plan: RescalePlan) -> None:
        """The split's ranges tile the key space.

        Raises:
            DataError: a gap or an overlap.
        """
        if plan.kind != SPLIT:
            return
        ranges = [t.parts[0].range for t in plan.targets]
        try:
            check_tiling([r for r in ranges if r is not None])
        except InvalidDbStateError as exc:
            raise DataError(f"rescale job {plan.job_id}: {exc}") from exc
        self.report.validation["tiling"] = "ok: the ranges tile the key space"

    def _report_checks(self, plan: RescalePlan, checks: Sequence[TargetCheck]) -> None:
        """The validation figures per target and in total.

        Raises:
            DataError: a target differs from its parts (nothing is released).
        """
        rep = self.report
        for i, c in enumerate(checks):
            rep.targets[i]["keys"] = c.actual.keys
            rep.targets[i]["bytes"] = c.actual.nbytes
        rep.validation["targets"] = [c.to_dict() for c in checks]
        src_keys = sum(c.expected.keys for c in checks)
        src_bytes = sum(c.expected.nbytes for c in checks)
        rep.validation.update({
            "source_keys": src_keys, "target_keys": sum(c.actual.keys for c in checks),
            "source_bytes": src_bytes, "target_bytes": sum(c.actual.nbytes for c in checks),
            "ok": all(c.problem is None for c in checks),
        })
        problems = [c.problem for c in checks if c.problem is not None]
        if problems:
            raise DataError(f"rescale job {plan.job_id}: a target differs from its sources' "
                            f"ranges at the checkpoint: {'; '.join(problems)}; the sources "
                            "are still attached; nothing was released")

    def _delete_checkpoint(self, path: str, cp: uuid.UUID) -> None:
        update_versioned(ManifestStore(self.store, path),
                         lambda cur: remove_checkpoints(cur.value, {cp}), clock=self.clock)
