"""Checkpoint scenarios: a checkpoint that expires while readers read it (F19), and the
checkpoint churn of the background workload."""

from __future__ import annotations

import time
import uuid

from slatelib import DbReader
from slatelib.errors import DataError, InvalidDbStateError
from slatelib.ops.checkpoint import delete_checkpoint, list_checkpoints
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from tests.faults.faults import judge
from tests.faults.ledger import AuditFailure
from tests.faults.readers import reader_settings
from tests.faults.scenarios.common import (
    ensure_writer,
    gc_now,
    open_writer,
    readers,
    record_checkpoint,
    run_compaction_here,
    write_some,
)
from tests.faults.world import DB, World
from tests.faults.writers import ChildWriter

COMPACTION_CHECKPOINT_S = 900


def checkpoint_expiring_during_read(world: World) -> None:
    """F19: readers (slatelib and official) read a 2 s checkpoint; it expires, a
    compaction makes what it pins garbage and GC removes it: reads through the open
    readers return the checkpoint's data or fail cleanly (never other data), and a new
    reader on it is refused."""
    world.note("F19")
    from tests.interop.official import OfficialReader

    w = ensure_writer(world)
    if w is None or not w.alive or isinstance(w, ChildWriter):
        w = open_writer(world, world.rng.choice(("slatelib", "official")))
    write_some(world, world.rng.randint(10, 30))
    if w is not None and w.alive:
        w.flush()
    if world.readers is not None:
        world.readers.close()  # their checkpoints would pin the same SSTs
    if world.rng.random() < 0.7:  # so that only this checkpoint pins what GC may delete
        for old in [c for c in world.checkpoints.values() if c.path == DB]:
            delete_checkpoint(DB, world.store, old.id)
            del world.checkpoints[old.id]
    rec = record_checkpoint(world, lifetime=2.0, what="short-lived checkpoint")
    if rec is None or rec.content is None:
        return
    ours = DbReader.open(DB, world.store, checkpoint=rec.id, settings=reader_settings(),
                         auto_refresh=False)
    try:
        theirs = OfficialReader.open(world.root, DB, checkpoint=str(rec.id))
    except Exception:
        ours.close()
        raise
    try:
        write_some(world, 20)
        w = world.current
        if w is not None and w.alive:
            w.flush()
        run_compaction_here(world, what="compaction under an expiring checkpoint",
                            policy="full")
        drop_compaction_checkpoints(world)  # else they pin what the expiring one pins
        time.sleep(max(0.0, rec.created + 2.3 - time.monotonic()))
        pinned = only_pinned_by(world, rec.id)
        gc_now(world, kind="slatelib", min_age=0.5, what="gc after the checkpoint expired")
        gone = pinned - {m.path for m in world.store.list(DbPaths(DB).compacted_dir)}
        world.log(f"  GC deleted {len(gone)} of the {len(pinned)} SSTs only the expired "
                  "checkpoint pinned")
        for name, read in (("slatelib", lambda: list(ours.scan())), ("official", theirs.scan)):
            try:
                got = read()
            except DataError as exc:
                world.log(f"  {name} read of the expired checkpoint failed: {type(exc).__name__}")
                continue
            except Exception as exc:  # noqa: BLE001 - the official binding's error types
                if name == "slatelib":
                    judge(exc, "slatelib read of an expired checkpoint")
                world.log(f"  official read of the expired checkpoint failed: {type(exc).__name__}")
                continue
            if got != rec.content:
                raise AuditFailure(f"the {name} reader of expired checkpoint {rec.id} returned "
                                   f"{len(got)} rows, not its {len(rec.content)}")
            world.log(f"  {name} read of the expired checkpoint: its data, unchanged")
        try:
            DbReader.open(DB, world.store, checkpoint=rec.id, settings=reader_settings()).close()
        except InvalidDbStateError:
            pass
        else:
            raise AuditFailure(f"a reader opened expired, collected checkpoint {rec.id}")
    finally:
        ours.close()
        theirs.close()
    readers(world).open()


def only_pinned_by(world: World, checkpoint_id: uuid.UUID) -> set[str]:
    """SSTs of the checkpoint's manifest that neither the latest manifest nor any other
    checkpoint references (what GC may delete once the checkpoint expires)."""
    manifests = ManifestStore(world.store, DB)
    m = manifests.read_latest().value
    cp = m.checkpoint(checkpoint_id)
    if cp is None:
        return set()
    ids = manifests.read(cp.manifest_id).value.referenced_sst_ids() - m.referenced_sst_ids()
    for other in m.checkpoints:
        if other.id != checkpoint_id:
            pinned = manifests.try_read(other.manifest_id)
            ids -= pinned.value.referenced_sst_ids() if pinned is not None else set()
    return {DbPaths(DB).compacted(i) for i in ids}


def checkpoint_churn(world: World) -> None:
    """Background step: create a recorded checkpoint, or delete one the harness made."""
    rng = world.rng
    live = [c for c in world.checkpoints.values() if not c.expires]
    if live and rng.random() < 0.4:
        rec = rng.choice(live)
        found = delete_checkpoint(DB, world.store, rec.id)
        del world.checkpoints[rec.id]
        world.log(f"  checkpoint {rec.id} deleted ({found})")
        return
    if rng.random() < 0.3:
        drop_compaction_checkpoints(world)
        return
    record_checkpoint(world, lifetime=rng.choice((None, None, 30.0, 3.0)))


def drop_compaction_checkpoints(world: World) -> None:
    """Delete the 15-minute checkpoints that every compaction commit leaves on the version
    it replaced (0.17 does the same), as an operator may: they would keep GC from ever
    deleting compacted SSTs in a short run. Readers' and writers' checkpoints have other
    lifetimes and stay."""
    dropped = 0
    for cp in list_checkpoints(DB, world.store):
        lifetime = None if cp.expire_time_s is None else cp.expire_time_s - cp.create_time_s
        if cp.name is None and lifetime is not None and abs(lifetime - COMPACTION_CHECKPOINT_S) <= 2:
            dropped += delete_checkpoint(DB, world.store, cp.id)
    world.log(f"  dropped {dropped} compaction checkpoint(s)")
