"""The auditor: what must hold after every GC and at the end of a soak run.

- :func:`check_references`: every SST and WAL object referenced by the latest manifest and
  by the manifest of every checkpoint it lists exists (a clone's SSTs in its parent too),
  and every pinned manifest exists. Run after every GC (no GC runs meanwhile, so nothing
  may legitimately vanish between reading the manifest and listing the objects).
- :func:`check_checkpoints`: every checkpoint the harness recorded, while still listed,
  reads exactly what it read when it was created, through both readers.
- :func:`check_clones`: every initialized clone reads what its source checkpoint read.
- :func:`final_audit`: every acknowledged write is readable by both readers, nothing
  unacknowledged-and-never-attempted appears, and all of the above.
"""

from __future__ import annotations

import time
import uuid

from slatelib.core.manifest import Manifest
from slatelib.errors import ManifestMissingError
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from tests.faults.ledger import AuditFailure
from tests.faults.readers import read_ours, read_theirs
from tests.faults.world import DB, World


def _listing(world: World, prefix: str) -> set[str]:
    return {m.path for m in world.store.list(prefix)}


def _missing(world: World, path: str, m: Manifest, label: str,
             listed: dict[str, set[str]]) -> list[str]:
    paths = DbPaths(path)
    out = []
    external = m.external_sst_paths()

    def present(prefix: str) -> set[str]:
        if prefix not in listed:
            listed[prefix] = _listing(world, prefix)
        return listed[prefix]

    for sid in sorted(m.referenced_sst_ids()):
        owner = DbPaths(external.get(sid, path))
        if owner.compacted(sid) not in present(owner.compacted_dir):
            out.append(f"{label}: SST {owner.compacted(sid)} is gone")
    wal = present(paths.wal_dir)
    for wid in range(m.replay_after_wal_id + 1, m.wal_id_last_seen + 1):
        if paths.wal(wid) not in wal:
            out.append(f"{label}: WAL {paths.wal(wid)} (replay range "
                       f"({m.replay_after_wal_id}, {m.wal_id_last_seen}]) is gone")
    return out


def check_references(world: World, path: str, what: str) -> None:
    """No referenced object is gone (latest manifest and every checkpoint's manifest)."""
    manifests = ManifestStore(world.store, path)
    try:
        latest = manifests.read_latest()
    except ManifestMissingError:
        return  # destroyed (or never created)
    listed: dict[str, set[str]] = {}
    problems = _missing(world, path, latest.value, f"latest manifest {latest.id}", listed)
    for cp in latest.value.checkpoints:
        pinned = manifests.try_read(cp.manifest_id)
        if pinned is None:
            problems.append(f"checkpoint {cp.id} ({cp.name}): its manifest {cp.manifest_id} "
                            "is gone")
            continue
        problems += _missing(world, path, pinned.value,
                             f"checkpoint {cp.id} ({cp.name}) manifest {cp.manifest_id}", listed)
    if problems:
        raise AuditFailure(f"{what}: referenced objects of {path!r} deleted:\n  "
                           + "\n  ".join(problems[:12]))


def check_clone_pins(world: World, path: str, what: str) -> None:
    """An initialized, live clone's final checkpoints exist in every database it reads SSTs
    from (design doc 'checkpoints and clones': they are what keeps those SSTs)."""
    stored = ManifestStore(world.store, path).try_read_latest()
    if stored is None or not stored.value.initialized or stored.value.destroyed_at_s is not None:
        return
    for ext in stored.value.external_dbs:
        parent = ManifestStore(world.store, ext.path).try_read_latest()
        held = parent is not None and ext.final_checkpoint_id is not None and \
            parent.value.checkpoint(ext.final_checkpoint_id) is not None
        if not held:
            raise AuditFailure(f"{what}: clone {path!r} is initialized but {ext.path!r} no "
                               f"longer holds its final checkpoint {ext.final_checkpoint_id} "
                               f"({len(ext.sst_ids)} SSTs unprotected)")


def listed_checkpoints(world: World, path: str) -> set[uuid.UUID]:
    try:
        m = ManifestStore(world.store, path).read_latest().value
    except ManifestMissingError:
        return set()
    return {c.id for c in m.checkpoints}


def check_checkpoints(world: World, what: str) -> None:
    for rec in list(world.checkpoints.values()):
        if rec.content is None or rec.id not in listed_checkpoints(world, rec.path):
            continue
        ours = read_ours(world, rec.path, rec.id)
        if ours != rec.content:
            if rec.id not in listed_checkpoints(world, rec.path):
                continue  # it expired and went while we read (a short-lived one)
            raise AuditFailure(f"{what}: checkpoint {rec.id} now reads {len(ours)} rows, had "
                               f"{len(rec.content)} (slatelib reader)")
        theirs = read_theirs(world, rec.path, rec.id)
        if theirs != rec.content:
            raise AuditFailure(f"{what}: checkpoint {rec.id}: the official reader reads "
                               f"{len(theirs)} rows, slatelib {len(ours)}")


def check_clones(world: World, what: str) -> None:
    for rec in world.clones.values():
        if not rec.initialized:
            continue
        ours = read_ours(world, rec.path)
        theirs = read_theirs(world, rec.path)
        if ours != rec.content or theirs != rec.content:
            raise AuditFailure(f"{what}: clone {rec.path!r} reads {len(ours)} rows (slatelib) / "
                               f"{len(theirs)} (official), its source checkpoint had "
                               f"{len(rec.content)}")


def after_gc(world: World, what: str) -> None:
    for path in [DB, *world.clones]:
        check_references(world, path, what)
    for path in world.clone_paths:
        check_clone_pins(world, path, what)
    check_checkpoints(world, what)
    check_clones(world, what)


def final_audit(world: World) -> None:
    """After every writer and child is gone: both readers see every acknowledged write."""
    required = world.ledger.snapshot()
    for mode in ("latest", "managed"):
        ours = read_ours(world, DB, mode=mode)
        world.ledger.check_read(ours, f"final: slatelib reader ({mode})", required=required)
    theirs = read_theirs(world, DB)
    world.ledger.check_read(theirs, "final: official reader", required=required)
    if ours != theirs:
        only_ours = sorted(set(ours) - set(theirs))[:5]
        only_theirs = sorted(set(theirs) - set(ours))[:5]
        raise AuditFailure(f"final: the readers differ: slatelib only {only_ours}, "
                           f"official only {only_theirs}")
    after_gc(world, "final")
    world.log(f"final audit ok: {len(ours)} keys, ledger {world.ledger.counts()}, "
              f"{time.monotonic() - world.started:.1f}s")
