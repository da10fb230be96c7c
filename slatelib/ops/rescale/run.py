"""Rescaling: split a database into shards by key range, or merge shards into one
(docs/rfcs/0008-rescale-job.md).

Public API (re-exported by :mod:`slatelib.ops.rescale`)::

    split_database(source, store, targets, *, at=None, ...) -> RescaleReport
    merge_databases(sources, target, store, ...) -> RescaleReport

Steps (each one resumable: a rerun of the same call after a crash anywhere finishes the job):

1. **Check** everything before the first write: paths, split keys, targets free, sources
   initialized and not segmented, no likely-live writer (:func:`~.source.check_live`), the
   WAL tail flushable, for a merge disjoint source ranges; choose the split keys from the
   block indexes (:mod:`~.balance`). A dry run stops here and reports the plan.
2. **Record** the job under every source (:mod:`~.record`): a second job on a source is
   refused, a rerun of this one resumes it.
3. **Flush and checkpoint** each source: move a WAL tail into an L0 (fencing its writer),
   or fence it on request, then create the job's checkpoint (its id is in the record).
4. **Clone** each target from its parts, all at the job's checkpoints
   (:func:`~.targets.ensure_clone`).
5. **Compact** each target into its own SSTs, up to ``concurrency`` at once
   (:func:`~.targets.compact_target`).
6. **Validate**: ranges tile the source (a split); every target's keys, bytes and digest
   equal its parts' at the checkpoints (:mod:`~.validate`).
7. **Detach** each target from its sources, releasing their final checkpoints
   (:func:`~.targets.detach_target`); then delete the job's checkpoints and mark the
   record done. The sources can then be destroyed.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import Settings
from slatelib.core.checkpoints import remove_checkpoints
from slatelib.core.manifest import Manifest
from slatelib.core.rescale_check import check_tiling
from slatelib.core.rescale_plan import (
    MERGE,
    SPLIT,
    RescalePlan,
    check_disjoint,
    check_shard_count,
    check_split_keys,
    check_target_paths,
    describe_range,
    format_key,
    manifest_span,
    plan_merge,
    plan_split,
    same_job,
    shard_ranges,
    span_union,
    with_split_keys,
)
from slatelib.errors import DataError, InvalidArgumentError, InvalidDbStateError, SlateError
from slatelib.objstore import ObjectStore
from slatelib.ops.checkpoint import as_checkpoint_id
from slatelib.ops.clone import CloneSource, create_clone_from_sources
from slatelib.ops.compaction.execute import load_merge_operator
from slatelib.ops.compaction.runner import TaskRunner
from slatelib.ops.rescale import record
from slatelib.ops.rescale.balance import (
    estimate_shards,
    manifest_views,
    plan_weights,
    read_weights,
    wal_weight,
)
from slatelib.ops.rescale.report import RescaleReport
from slatelib.ops.rescale.source import (
    SourceInfo,
    check_flushable,
    check_live,
    ensure_checkpoint,
    flush_wal_to_l0,
    pinned_wal_data,
    read_source,
)
from slatelib.ops.rescale.targets import (
    check_target_free,
    compact_target,
    detach_target,
    ensure_clone,
)
from slatelib.ops.rescale.validate import Mapper, check_targets, thread_mapper
from slatelib.paths import normalize_path
from slatelib.store.manifest_store import ManifestStore
from slatelib.txn import update_versioned

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_LIVE_WINDOW_S", "RescaleOptions", "RunnerFactory", "merge_databases",
           "split_database"]

DEFAULT_LIVE_WINDOW_S = 300.0
JOB_CHECKPOINT_LIFETIME_S = 7 * 86400.0
"""Lifetime of the job's source checkpoints, renewed by every rerun (an abandoned job's
checkpoints expire by themselves)."""

RunnerFactory = Callable[[str], TaskRunner | None]
"""A compaction task runner for a target (by label); None: threads of this process."""


@dataclass(frozen=True)
class RescaleOptions:
    """How a rescale treats its sources, and how it runs.

    ``live_window_s``: manifest or WAL writes this recent count as a live writer.
    ``concurrency``: targets compacted at once (None: ``[compaction] db_concurrency``).
    """

    fence_source: bool = False
    allow_live_source: bool = False
    live_window_s: float = DEFAULT_LIVE_WINDOW_S
    checkpoint_lifetime_s: float = JOB_CHECKPOINT_LIFETIME_S
    parallelism: int | None = None
    concurrency: int | None = None
    dry_run: bool = False

    def recorded(self) -> dict[str, Any]:
        return {"fence_source": self.fence_source, "allow_live_source": self.allow_live_source}


def _new_job_id(clock: Clock) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(clock.now_ms() / 1000))
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


class _Job:
    """One rescale call: the store, settings and options, and the steps after the record."""

    def __init__(self, kind: str, store: ObjectStore | str, settings: Settings | None,
                 options: RescaleOptions, runner_factory: RunnerFactory | None,
                 mapper: Mapper | None, clock: Clock) -> None:
        from slatelib.objstore import resolve_store

        self.kind = kind
        self.store = resolve_store(store)
        self.settings = settings or Settings()
        self.options = options
        self.runner_factory = runner_factory
        self.mapper = mapper or thread_mapper()
        self.clock = clock
        self.report = RescaleReport(kind)
        if options.live_window_s < 0:
            raise InvalidArgumentError("the live-writer window must not be negative")
        if options.parallelism is not None and options.parallelism < 1:
            raise InvalidArgumentError(f"parallelism must be positive, got {options.parallelism}")
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
        if flush:
            check_flushable(info, self.settings, allow_live_source=o.allow_live_source,
                            fence_source=o.fence_source)
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
                if info.needs_flush or plan.options.get("fence_source"):
                    with self.report.phase("flush"):
                        flushed = flush_wal_to_l0(self.store, src.path, self.settings,
                                                  self.clock)
                    entry["flushed"] = {"manifest_id": flushed.id,
                                        "writer_epoch": flushed.value.writer_epoch,
                                        "wal_rows": info.wal_rows}
            with self.report.phase("checkpoint"):
                stored = ensure_checkpoint(self.store, src.path, cp,
                                           lifetime_s=self.options.checkpoint_lifetime_s,
                                           clock=self.clock)
            pinned = stored.value.checkpoint(cp)
            entry["checkpoint_manifest_id"] = None if pinned is None else pinned.manifest_id

    def choose_keys(self, plan: RescalePlan) -> RescalePlan:
        """Auto split keys from the checkpoint's manifest (deterministic, so a rerun that
        finds them unrecorded chooses the same), recorded before any clone."""
        if plan.kind != SPLIT or plan.split_keys is not None:
            return plan
        src = plan.sources[0]
        ms = ManifestStore(self.store, src.path)
        cp = ms.read_latest().value.checkpoint(uuid.UUID(src.checkpoint_id))
        if cp is None:  # pragma: no cover - prepare_sources created it
            raise InvalidDbStateError(f"checkpoint {src.checkpoint_id} of {src.path!r} is gone")
        pinned = ms.read(cp.manifest_id).value
        _, keys = plan_weights(self.store, src.path, pinned, len(plan.targets))
        if keys is None:
            raise InvalidArgumentError(
                f"cannot choose {len(plan.targets) - 1} split keys from checkpoint "
                f"{src.checkpoint_id} of {src.path!r}: too few distinct keys; rerun with --at")
        plan = with_split_keys(plan, keys)
        record.update(self.store, plan)
        return plan

    def run(self, plan: RescalePlan, fresh: dict[str, SourceInfo]) -> RescaleReport:
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
        with rep.phase("compact"):
            self.compact_all(plan)
        with rep.phase("validate"):
            if plan.status == "validated":  # a rerun: the sources may be released already
                rep.validation = {**plan.validation, "checked_by": "an earlier run"}
            else:
                self.validate(plan)
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

    def compact_all(self, plan: RescalePlan) -> None:
        """Step 5, targets isolated: every one is tried, then the first failure raised."""
        workers = self.options.concurrency or self.settings.compaction.db_concurrency

        def one(i: int) -> dict[str, Any]:
            t = plan.targets[i]
            runner = None if self.runner_factory is None else self.runner_factory(
                f"rescale {t.path}")
            return compact_target(self.store, plan, t, self.settings, runner=runner,
                                  parallelism=self.options.parallelism, clock=self.clock)

        errors: list[SlateError] = []

        def isolated(i: int) -> None:
            try:
                self.report.targets[i]["compaction"] = one(i)
            except SlateError as exc:
                log.error("rescale target compaction failed [target=%s, error=%s]",
                          plan.targets[i].path, exc)
                self.report.targets[i]["compaction"] = {
                    "outcome": "failed", "error": {"type": type(exc).__name__,
                                                   "message": str(exc)}}
                errors.append(exc)

        with ThreadPoolExecutor(max(1, min(workers, len(plan.targets))),
                                thread_name_prefix="rescale-target") as pool:
            list(pool.map(isolated, range(len(plan.targets))))
        if errors:
            raise errors[0]

    def validate(self, plan: RescalePlan) -> None:
        """Step 6.

        Raises:
            DataError: a gap or overlap between the ranges, or a target that differs.
        """
        rep = self.report
        if plan.kind == SPLIT:
            ranges = [t.parts[0].range for t in plan.targets]
            try:
                check_tiling([r for r in ranges if r is not None])
            except InvalidDbStateError as exc:
                raise DataError(f"rescale job {plan.job_id}: {exc}") from exc
            rep.validation["tiling"] = "ok: the ranges tile the key space"
        checks = check_targets(self.store, plan, self.mapper,
                               self.settings.compaction.merge_operator)
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
) -> RescaleReport:
    """Split ``source`` into ``len(targets)`` databases by key range (module docstring):
    at the keys ``at`` (``len(targets) - 1`` of them, ascending), or at keys that balance
    the source's bytes.

    ``checkpoint``: clone from this existing checkpoint of the source (its manifest must
    have no WAL data to replay) instead of flushing the WAL tail and checkpointing; it is
    left in place at the end.

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
    job = _Job(SPLIT, store, settings, options, runner_factory, mapper, clock)
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
                base, wal = info.latest.value, info.wal_sizes
            else:
                base, wal = _given_checkpoint(job.store, src, given, clock), ()
            weights, auto = plan_weights(job.store, src, base, len(tgts), wal)
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
        plan = plan_split(_new_job_id(clock), src, str(given or uuid.uuid4()), tgts, keys,
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
    job = _Job(MERGE, store, settings, options, runner_factory, mapper, clock)
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
            check_disjoint([(i.path, span_union(manifest_span(i.latest.value), i.wal_span))
                            for i in infos])
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
        plan = plan_merge(_new_job_id(clock), [(s, str(uuid.uuid4())) for s in srcs], tgt,
                          now_ms=clock.now_ms(), options=options.recorded())
        record.claim(job.store, plan)
    else:
        job.report.resumed = True
        record.claim(job.store, plan)  # sources whose record a killed claim did not write
    return job.run(plan, fresh)


def _given_checkpoint(store: ObjectStore, path: str, checkpoint: uuid.UUID,
                      clock: Clock) -> Manifest:
    """The manifest an existing checkpoint of the source pins.

    Raises:
        InvalidArgumentError: no such (unexpired) checkpoint, or its manifest has WAL data
            to replay (0.17 cannot project it).
    """
    ms = ManifestStore(store, path)
    cp = ms.read_latest().value.checkpoint(checkpoint)
    if cp is None or cp.is_expired(clock.now_ms() / 1000):
        state = "unknown" if cp is None else "expired"
        raise InvalidArgumentError(f"checkpoint {checkpoint} of {path!r} is {state}; nothing "
                                   "was written")
    pinned = ms.read(cp.manifest_id).value
    left = pinned_wal_data(store, path, pinned)
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
