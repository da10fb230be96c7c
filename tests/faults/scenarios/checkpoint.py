"""Checkpoint scenarios: a checkpoint that expires while readers read it (F19), and the
checkpoint churn of the background workload."""

from __future__ import annotations

import time

from slatelib import DbReader
from slatelib.errors import DataError, InvalidDbStateError
from slatelib.ops.checkpoint import delete_checkpoint
from tests.faults.faults import judge
from tests.faults.ledger import AuditFailure
from tests.faults.readers import reader_settings
from tests.faults.scenarios.common import (
    ensure_writer,
    gc_now,
    record_checkpoint,
    run_compaction_here,
    write_some,
)
from tests.faults.world import DB, World


def checkpoint_expiring_during_read(world: World) -> None:
    """F19: readers (slatelib and official) read a 2 s checkpoint; it expires, a
    compaction makes what it pins garbage and GC removes it: reads through the open
    readers return the checkpoint's data or fail cleanly (never other data), and a new
    reader on it is refused."""
    world.note("F19")
    from tests.interop.official import OfficialReader

    w = ensure_writer(world)
    write_some(world, world.rng.randint(10, 30))
    if w is not None and w.alive:
        w.flush()
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
        run_compaction_here(world, what="compaction under an expiring checkpoint")
        time.sleep(max(0.0, rec.created + 2.3 - time.monotonic()))
        gc_now(world, kind="slatelib", min_age=0.5, what="gc after the checkpoint expired")
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
        try:
            DbReader.open(DB, world.store, checkpoint=rec.id, settings=reader_settings()).close()
        except InvalidDbStateError:
            pass
        else:
            raise AuditFailure(f"a reader opened expired, collected checkpoint {rec.id}")
    finally:
        ours.close()
        theirs.close()


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
    record_checkpoint(world, lifetime=rng.choice((None, None, 30.0, 3.0)))
