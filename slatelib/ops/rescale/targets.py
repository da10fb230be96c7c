"""The steps of one rescale target, each one safe to repeat: clone, compact, detach.

1. :func:`ensure_clone`: the target as a clone of its parts (each a source at the job's
   checkpoint, projected to its range) with
   :func:`slatelib.ops.clone.create_clone_from_sources`; skipped when the target is that
   clone already.
2. :func:`compact_target`: every view of the target into one sorted run of its own SSTs
   (:func:`slatelib.ops.compaction.run_compaction`, policy ``full``), so that it no longer
   reads any source SST. The compaction's checkpoint (which keeps the replaced views
   readable for readers of the older manifest) is made already expired: nobody reads a
   target before the job is done, and it would keep the target attached to its sources.
3. :func:`detach_target`: GC's detach (0.17's ``DetachGcTask``): once no live manifest of the
   target references a source SST, the target's final checkpoint is released in the source
   (:func:`slatelib.ops.gc.clone.release_checkpoint`) and the entry is removed from the
   target's ``external_dbs`` (:func:`slatelib.ops.gc.clone.drop_external_dbs`). The marker
   checkpoints that failed compaction runs left are dropped first
   (:func:`drop_superseded_claim_markers`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from slatelib.clock import Clock
from slatelib.config import Settings
from slatelib.core.checkpoints import remove_checkpoints
from slatelib.core.gc_plan import plan_detach
from slatelib.core.manifest import ExternalDb, Manifest
from slatelib.core.rescale_plan import PlanTarget, RescalePlan
from slatelib.errors import (
    InvalidArgumentError,
    InvalidDbStateError,
)
from slatelib.objstore import ObjectStore
from slatelib.ops.clone import CloneSource, create_clone_from_sources
from slatelib.ops.compaction import run_compaction
from slatelib.ops.destroy import layout_objects
from slatelib.ops.engine import TaskRunner
from slatelib.ops.gc import (
    drop_external_dbs,
    read_live_set,
    release_checkpoint,
    remove_expired_checkpoints,
)
from slatelib.ops.rescale.record import active_path
from slatelib.paths import DbPaths
from slatelib.store.claim_store import ClaimStore
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.txn import update_versioned

log = logging.getLogger(__name__)


def clone_sources(plan: RescalePlan, target: PlanTarget) -> list[CloneSource]:
    """The clone sources of ``target``: each part's source at the job's checkpoint."""
    out = []
    for part in target.parts:
        src = plan.sources[part.source]
        out.append(CloneSource(src.path, uuid.UUID(src.checkpoint_id), part.range))
    return out


def _entries_of(m: Manifest, plan: RescalePlan) -> list[ExternalDb]:
    paths = set(plan.source_paths)
    return [e for e in m.external_dbs if e.path in paths]


def is_job_target(m: Manifest, plan: RescalePlan, target: PlanTarget) -> bool:
    """Whether the database at a target path is this job's clone: every entry its
    ``external_dbs`` has for the job's sources names one of its parts' sources at the job's
    checkpoint, or (after detach) there is none.

    Not every part has an entry: a union clone names only the sources that contribute SSTs
    (an empty shard has none), and a target may be detached from some sources already."""
    entries = _entries_of(m, plan)
    if not entries:
        return True  # detached (the record proves the path was free when the job began)
    wanted = {(plan.sources[p.source].path, plan.sources[p.source].checkpoint_id)
              for p in target.parts}
    have = {(e.path, str(e.source_checkpoint_id)) for e in entries}
    return have <= wanted


def check_target_free(store: ObjectStore, path: str) -> None:
    """Before a new job's first write: nothing at the target path.

    Raises:
        InvalidArgumentError: a database (or what is left of one) is there.
    """
    if ManifestStore(store, path).try_read_latest() is not None:
        raise InvalidArgumentError(f"target {path!r} already exists (it has a manifest); "
                                   "choose another path; nothing was written")
    leftovers = layout_objects(store, DbPaths(path))
    if leftovers:
        raise InvalidArgumentError(
            f"target {path!r} holds {len(leftovers)} objects of a database (e.g. "
            f"{leftovers[0]!r}); choose another path or remove them; nothing was written")


def read_target(store: ObjectStore, plan: RescalePlan, target: PlanTarget,
                ) -> StoredManifest | None:
    """The target's latest manifest (None: not created yet).

    Raises:
        InvalidDbStateError: another database is at the target path, or the target was
            destroyed while the job ran (a rerun must not report it done: its validation may
            be an earlier run's).
    """
    latest = ManifestStore(store, target.path).try_read_latest()
    if latest is not None and not is_job_target(latest.value, plan, target):
        raise InvalidDbStateError(
            f"target {target.path!r} is not a clone made by rescale job {plan.job_id} "
            "(its external databases name other sources or checkpoints)")
    if latest is not None and latest.value.destroyed_at_s is not None:
        active = ", ".join(active_path(s) for s in plan.source_paths)
        raise InvalidDbStateError(
            f"target {target.path!r} of rescale job {plan.job_id} was destroyed (at "
            f"{latest.value.destroyed_at_s}) while the job ran: the job cannot finish; the "
            "sources are unchanged. Hard-destroy its targets (`slate --path T destroy "
            f"--hard`), delete {active} and start again")
    return latest


def ensure_clone(store: ObjectStore, plan: RescalePlan, target: PlanTarget,
                 clock: Clock) -> dict[str, Any]:
    """Step 1; returns what was done.

    Raises:
        InvalidDbStateError: another database is there, or a source checkpoint is gone.
        SlateError: as :func:`create_clone_from_sources`.
    """
    latest = read_target(store, plan, target)
    if latest is not None and latest.value.initialized:
        return {"created": False, "manifest_id": latest.id}
    report = create_clone_from_sources(target.path, clone_sources(plan, target), store,
                                       clock=clock)
    log.info("rescale target cloned [target=%s, manifest=%d]", target.path, report.manifest_id)
    return {"created": report.created, "manifest_id": report.manifest_id}


def source_ssts(m: Manifest, plan: RescalePlan) -> int:
    """How many SSTs of the job's sources ``m`` still references."""
    return sum(len(e.sst_ids) for e in _entries_of(m, plan))


def compact_target(store: ObjectStore, plan: RescalePlan, target: PlanTarget,
                   settings: Settings, *, runner: TaskRunner | None, parallelism: int | None,
                   clock: Clock) -> dict[str, Any]:
    """Step 2 (skipped when the target no longer reads a source SST); returns the
    compaction's summary (:class:`~slatelib.ops.compaction.CompactionSummary`, ``outcome``
    its status) or why it was skipped.

    Raises:
        SlateError: as :func:`run_compaction`.
    """
    latest = ManifestStore(store, target.path).read_latest()
    if not source_ssts(latest.value, plan):
        return {"outcome": "not_needed"}
    cs = replace(settings.compaction, checkpoint_lifetime=0.0)
    report = run_compaction(target.path, store, settings=replace(settings, compaction=cs),
                            policy="full", parallelism=parallelism, takeover=True,
                            runner=runner, clock=clock)
    return report.summary().to_dict()


def detach_target(store: ObjectStore, plan: RescalePlan, target: PlanTarget,
                  clock: Clock) -> list[dict[str, str]]:
    """Step 3; one entry per source: ``detached``, ``already`` or ``pending`` (why).

    Raises:
        ConflictError: a manifest kept conflicting.
        ManifestMissingError: a checkpoint pins a missing manifest.
    """
    remove_expired_checkpoints(store, target.path, clock)
    drop_superseded_claim_markers(store, target.path, clock)
    latest = ManifestStore(store, target.path).read_latest()
    live = read_live_set(store, target.path, latest)
    detachable = {e.final_checkpoint_id: e for e in plan_detach(live)
                  if e.path in plan.source_paths}
    out: list[dict[str, str]] = []
    done: set[uuid.UUID] = set()
    entries = _entries_of(latest.value, plan)
    for e in entries:
        entry = {"source": e.path, "final_checkpoint_id": str(e.final_checkpoint_id)}
        if e.final_checkpoint_id is None or e.final_checkpoint_id not in detachable:
            why = (f"still references {len(e.sst_ids)} SSTs of the source" if e.sst_ids else
                   "a live checkpoint of the target still pins a manifest that references "
                   "the source's SSTs")
            out.append({**entry, "status": "pending", "reason": why})
            continue
        released = release_checkpoint(store, e.path, e.final_checkpoint_id, clock)
        done.add(e.final_checkpoint_id)
        out.append({**entry, "status": "detached",
                    "source_checkpoint": "removed" if released else "already gone"})
    if done:
        drop_external_dbs(store, target.path, done, clock)
    seen = {e.path for e in entries}
    out.extend({"source": s, "status": "already"} for s in _part_paths(plan, target)
               if s not in seen)
    return out


def drop_superseded_claim_markers(store: ObjectStore, path: str, clock: Clock) -> int:
    """Remove the target's marker checkpoints of slatelib compactor claims older than its
    current compactor epoch; returns how many.

    A compaction's fence manifest carries its claim record's marker checkpoint (it lives
    ``CLAIM_MARKER_LIFETIME_S``, a day), dropped by the commit. A run that failed after its
    claim was recorded (a store error, a lost response, a killed task) leaves it behind, and
    the next run drops a stale marker only while its record is still ``claiming``. The
    marker pins the fence manifest, which references the sources' SSTs, so the target could
    not be detached (nor the job finish) for a day. A claim of an older epoch is never judged
    again (claims are judged at the current epoch), so its marker is safe to drop.

    Raises:
        ConflictError: the manifest kept conflicting.
    """
    ms = ManifestStore(store, path)
    latest = ms.read_latest()
    if not latest.value.checkpoints:
        return 0
    markers = ClaimStore(store, path).markers_up_to(latest.value.compactor_epoch - 1)
    dropped: list[uuid.UUID] = []

    def mutate(cur: StoredManifest) -> Manifest | None:
        dropped[:] = [c.id for c in cur.value.checkpoints if c.id in markers]
        return remove_checkpoints(cur.value, set(dropped)) if dropped else None

    if markers & {c.id for c in latest.value.checkpoints}:
        update_versioned(ms, mutate, clock=clock, current=latest)
        log.info("rescale target: dropped marker checkpoints of failed compaction runs "
                 "[target=%s, count=%d]", path, len(dropped))
    return len(dropped)


def _part_paths(plan: RescalePlan, target: PlanTarget) -> Sequence[str]:
    return sorted({plan.sources[p.source].path for p in target.parts})
