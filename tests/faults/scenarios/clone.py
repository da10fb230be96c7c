"""Clone scenarios: a clone crashed mid-way and retried (F20), a destroy while a clone is
being created (F21)."""

from __future__ import annotations

import random

from slatelib.errors import SlateError
from slatelib.objstore import ObjectStore
from slatelib.objstore.registry import with_retries
from slatelib.ops.clone import create_clone
from slatelib.ops.destroy import destroy
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash
from tests.faults.faults import Gate, arm, gate_layer, judge
from tests.faults.ledger import AuditFailure
from tests.faults.readers import read_ours, read_theirs
from tests.faults.scenarios.common import (
    ensure_writer,
    gc_now,
    readers,
    record_checkpoint,
    write_some,
)
from tests.faults.scenarios.gc import Background
from tests.faults.world import DB, CheckpointRecord, CloneRecord, World

MAX_CLONES = 4


def _source(world: World) -> tuple[str, CheckpointRecord] | None:
    if len(world.clones) >= MAX_CLONES:
        return None
    w = ensure_writer(world)
    write_some(world, world.rng.randint(5, 20))
    if w is not None and w.alive:
        w.flush()
    rec = record_checkpoint(world, lifetime=None, what="clone source checkpoint")
    if rec is None or rec.content is None:
        return None
    path = f"clone{world.rng.randrange(10**6):06d}"
    world.clone_paths.add(path)
    return path, rec


def _adopt(world: World, path: str, content: list[tuple[bytes, bytes]], what: str) -> None:
    """The clone is complete: it reads what its source checkpoint read, in both readers."""
    ours, theirs = read_ours(world, path), read_theirs(world, path)
    if ours != content or theirs != content:
        raise AuditFailure(f"{what}: clone {path!r} reads {len(ours)} (slatelib) / "
                           f"{len(theirs)} (official) rows, its source {len(content)}")
    world.clones[path] = CloneRecord(path, content, initialized=True)
    world.log(f"  clone {path} complete: {len(content)} rows")


def clone_crash_midway(world: World) -> None:
    """F20: ``create_clone`` "dies" (SimulatedCrash) before or after one of its writes; the
    retry completes the clone, which reads exactly its source checkpoint; GC of the parent
    and the clone keeps what the clone references."""
    world.note("F20")
    src = _source(world)
    if src is None:
        return
    path, rec = src
    rng = world.rng
    flaky = FlakyObjectStore(world.raw)
    op = rng.choice(("put_if_absent", "put", None))
    flaky.crash(op, None, when=rng.choice(("before", "after")), skip=rng.randint(0, 6))  # type: ignore[arg-type]
    store = with_retries(flaky) if rng.random() < 0.7 else flaky
    try:
        create_clone(path, DB, store, parent_checkpoint=rec.id)
        world.log(f"  clone {path}: the crash point was never reached")
    except SimulatedCrash:
        world.log(f"  clone {path} crashed at {op or 'a call'} (write {flaky.rules[0].seen})")
    except Exception as exc:  # noqa: BLE001 - judged
        world.log(f"  clone {path}: {judge(exc, 'clone')}")
    try:
        create_clone(path, DB, world.store, parent_checkpoint=rec.id)
    except Exception as exc:
        raise AuditFailure(f"retrying clone {path!r} after a crash failed: "
                           f"{type(exc).__name__}: {exc}") from exc
    _adopt(world, path, rec.content or [], "clone after a crash")
    gc_now(world, path=path, what="gc of the clone")
    gc_now(world, what="gc of the clone's parent")


def destroy_during_clone(world: World) -> None:
    """F21: the clone's path is destroyed (hard or soft) while ``create_clone`` is stalled
    at one of its writes, or after the creator died at one of its writes (a half-created
    clone); then the creator resumes, or a retry runs.
    Whatever the outcome, the parent keeps its data, a complete clone reads its source
    and GC keeps everything referenced.

    A hard destroy while the creator runs once left an initialized clone whose final
    checkpoint it had released (finding K2, ``test_findings.py``): the creator now fails."""
    world.note("F21")
    src = _source(world)
    if src is None:
        return
    path, rec = src
    rng = world.rng
    concurrent = rng.random() < 0.6
    soft = rng.random() < 0.5
    outcome: dict[str, str] = {}

    def clone(store: ObjectStore) -> None:
        try:
            create_clone(path, DB, store, parent_checkpoint=rec.id)
            outcome["clone"] = "created"
        except SimulatedCrash:
            outcome["clone"] = "crashed"
        except SlateError as exc:
            outcome["clone"] = f"{type(exc).__name__}: {exc}"[:160]

    if concurrent:
        gate = Gate(timeout_s=30)
        layer = gate_layer(world.store, gate)
        arm(layer, "put_if_absent", rng.choice(("/manifest/", None)), skip=rng.randint(0, 3))
        bg = Background(lambda: clone(layer), "clone")
        gate.wait_reached(5)
    else:
        flaky = FlakyObjectStore(world.raw)
        flaky.crash(rng.choice(("put_if_absent", None)), None,  # type: ignore[arg-type]
                    when=rng.choice(("before", "after")), skip=rng.randint(0, 5))
        clone(flaky)
    try:
        destroy(path, world.store, soft=soft)
        outcome["destroy"] = "destroyed (soft)" if soft else "destroyed (hard)"
    except SlateError as exc:
        outcome["destroy"] = f"{type(exc).__name__}"
    if concurrent:
        gate.open()
        bg.join(60)
    world.log(f"  destroy {'during' if concurrent else 'after a crash of'} clone {path}: "
              f"{outcome}")
    _settle(world, path, rec, rng)
    gc_now(world, what="gc of the parent after destroy-during-clone")
    readers(world).check("after destroy during clone")


def _settle(world: World, path: str, rec: CheckpointRecord, rng: random.Random) -> None:
    """Bring the clone path to a known state: complete (adopted) or gone."""
    content = rec.content or []
    stored = ManifestStore(world.store, path).try_read_latest()
    if stored is None:
        world.log(f"  {path}: nothing left")
        return
    m = stored.value
    if m.destroyed_at_s is not None:
        gc_now(world, kind="slatelib", path=path, min_age=0.5, audit=False,
               what="gc of the soft-destroyed clone")
        left = ManifestStore(world.store, path).try_read_latest()
        world.log(f"  {path}: soft-destroyed, collected: {left is None}")
        return
    if m.initialized:
        _adopt(world, path, content, "clone that survived a destroy")
        return
    if rng.random() < 0.5:
        try:
            destroy(path, world.store, soft=False)
            world.log(f"  {path}: half-created clone destroyed")
            return
        except SlateError as exc:
            world.log(f"  {path}: destroying the half-created clone: {judge(exc, 'destroy')}")
    try:
        create_clone(path, DB, world.store, parent_checkpoint=rec.id)
    except Exception as exc:  # noqa: BLE001 - judged
        world.log(f"  {path}: retry: {judge(exc, 'clone retry')}")
        return
    _adopt(world, path, content, "clone retried after a destroy")
