"""Deleting a soft-destroyed database (design doc 'checkpoints and clones'; ``destroyed_at_s`` is
slatelib's extension, see ``docs/rfcs/0002-destroyed-at-slot.md``).

Once ``destroyed_at_s + db_delete_grace`` has passed and no checkpoint is live:

1. release the database's final checkpoints in its parents (a clone's ``external_dbs``),
   so the parents can collect what the clone pinned;
2. re-read the latest manifest: it must be the same version, still due;
3. delete every object in the database's directories, the latest manifest last, so an
   interrupted destroy is simply resumed by the next run.

Objects under the root but outside SlateDB's directories (``manifest/``, ``wal/``,
``compacted/``, ``compactions/``, ``gc/``), such as a database nested below this one, are
kept and reported.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from slatelib.clock import Clock
from slatelib.core.external_dbs import check_external_dbs
from slatelib.core.gc_plan import (
    CompactionsState,
    DestroyState,
    DestroyVerdict,
    LiveSet,
    build_rules,
    destroy_rules,
    destroy_verdict,
)
from slatelib.core.gc_rules import GcDecision, GcOptions, ObjectKind
from slatelib.core.manifest import Manifest
from slatelib.db_manifest import DbManifest
from slatelib.errors import ConflictError, ManifestMissingError
from slatelib.objstore import ObjectStore
from slatelib.ops.gc.backend import GcBackend
from slatelib.ops.gc.clone import release_checkpoint
from slatelib.ops.gc.exec import delete_objects
from slatelib.ops.gc.report import GcReport
from slatelib.ops.gc.state import read_latest_manifest
from slatelib.paths import COMPACTED_DIR, COMPACTIONS_DIR, GC_DIR, MANIFEST_DIR, WAL_DIR
from slatelib.store.sequenced import Versioned

log = logging.getLogger(__name__)

DESTROY_DIRS = (WAL_DIR, COMPACTED_DIR, COMPACTIONS_DIR, GC_DIR, MANIFEST_DIR)
"""Deletion order: data first, manifests last."""


def _parents(m: Manifest) -> list[tuple[str, uuid.UUID]]:
    seen: dict[tuple[str, uuid.UUID], None] = {}
    for ext in m.external_dbs:
        if ext.final_checkpoint_id is not None:
            seen[(ext.path, ext.final_checkpoint_id)] = None
    return list(seen)


def run_destroy(
    store: ObjectStore,
    root: str,
    latest: Versioned[Manifest],
    verdict: DestroyVerdict,
    options: GcOptions,
    *,
    backend: GcBackend,
    clock: Clock,
    dry_run: bool,
    report: GcReport,
    on_decision: Callable[[GcDecision], None] | None = None,
) -> GcReport:
    """Delete the soft-destroyed database at ``root`` (or report what would go).

    Raises:
        ConflictError: the database changed while it was being destroyed (a new manifest,
            or no longer due); nothing of it was deleted yet.
        SlateError: releasing a parent's checkpoint failed (nothing deleted yet).
        CorruptObjectError: an unsafe ``external_dbs`` path (nothing written).
    """
    check_external_dbs(root, latest.value, manifest_id=latest.id)  # before any write
    rules = build_rules(root, LiveSet(latest.id, latest.value), CompactionsState(),
                        now_ms=report.now_ms, options=options,
                        destroy=destroy_rules(root, latest.id, verdict))
    assert rules.destroy is not None
    last = rules.destroy.latest_manifest_path
    parents: list[dict[str, Any]] = [
        {"parent": p, "final_checkpoint_id": str(c)} for p, c in _parents(latest.value)]
    report.destroy = {"state": DestroyState.DUE.value, "reason": verdict.reason,
                      "parents": parents, "completed": False}
    with report.phase("list_and_plan"):
        decisions = {d: backend.decide(backend.list_dir(store, root, d, report.now_ms), rules, {})
                     for d in DESTROY_DIRS}
    for d in DESTROY_DIRS:
        report.add_tally(decisions[d].tally())
        if on_decision is not None:
            for decision in decisions[d]:
                on_decision(decision)
    if dry_run:
        for entry in parents:
            entry["status"] = "would release"
        return report
    with report.phase("release_parents"):
        for entry, (path, cid) in zip(parents, _parents(latest.value), strict=True):
            try:
                entry["status"] = ("released" if release_checkpoint(store, path, cid, clock)
                                   else "already gone")
            except ManifestMissingError:  # as 0.17's delete_db: nothing left to release
                entry["status"] = (
                    f"parent has no manifest at {path!r} in {store.url}: already destroyed, "
                    "or this is not the store root the clone was created in (jobs: "
                    "--store-root)")
                log.warning("gc destroy found no parent manifest [root=%s, parent=%s, "
                            "store=%s]", root, path, store.url)
    with report.phase("destroy"):
        fresh = read_latest_manifest(store, root, latest.id)
        again = destroy_verdict(fresh.value, clock.now_ms() / 1000, options.db_delete_grace_s)
        if fresh.id != latest.id or again.state is not DestroyState.DUE:
            raise ConflictError(
                f"{root}: the database changed during destroy (manifest {latest.id} -> "
                f"{fresh.id}, {again.reason}); nothing deleted, run GC again")
        for d in DESTROY_DIRS:
            report.add_deleted(backend.execute(store, decisions[d], rules, {},
                                               skip=frozenset({last})))
        if report.error_count:
            report.error(f"{root}: the latest manifest is kept until every other object is "
                         "deleted; run GC again", count=0)
            return report
        ms = DbManifest(store, root)
        if ms.try_read(latest.id + 1) is not None:
            raise ConflictError(f"{root}: manifest {latest.id + 1} was written during destroy; "
                                "the latest manifest is kept")
        size = store.head(last).size
        report.add_deleted(delete_objects(store, root, [(last, ObjectKind.MANIFEST, size)]))
        report.destroy["completed"] = True
        log.info("gc destroyed database [root=%s, manifest=%d]", root, latest.id)
    return report
