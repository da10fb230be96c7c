"""What the scenarios share: opening writers (fencing the older ones), the background
workload, GC, compaction, checkpoints, ``slate`` child processes."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from slatelib.config import CompactionSettings, GcSettings, Settings
from slatelib.errors import CompactorActiveError
from slatelib.objstore import ObjectStore
from slatelib.ops.checkpoint import create_checkpoint
from slatelib.ops.compaction import run_compaction
from slatelib.ops.gc import collect_garbage
from tests.faults import auditor
from tests.faults.faults import SkewedClock, judge
from tests.faults.ledger import AuditFailure
from tests.faults.procs import Proc
from tests.faults.readers import Readers, read_ours, read_theirs
from tests.faults.world import DB, CheckpointRecord, World
from tests.faults.writers import ChildWriter, OfficialWriter, SlateWriter, Writer

KINDS = ("slatelib", "official", "child")


def maint_settings() -> Settings:
    """Compaction and GC settings of in-process runs (as the children's slate.toml)."""
    return replace(
        Settings(),
        compaction=replace(CompactionSettings(), min_range_bytes=1, max_sst_size=16 << 10,
                           parallelism=2, manifest_update_timeout=20.0),
        gc=replace(GcSettings(), db_delete_grace=0.0),
    )


# ---------------------------------------------------------------------------- writers
def fence_previous(world: World, new: Writer, *, keep_previous: bool = False,
                   since: float | None = None) -> None:
    """``new`` just opened (its open began at ``since``): every older writer is a zombie
    from now on, and may have noticed from ``since`` on."""
    now = time.monotonic()
    for w in world.writers:
        if w.fenced_at is None:
            w.fenced_at = now
            w.fencing_since = now if since is None else since
        if not keep_previous and w.alive and not isinstance(w, ChildWriter):
            w.close()
    world.writers.append(new)
    if new.kind != "official":
        world.needs_slatelib_open = False


def open_writer(world: World, kind: str | None = None, *, store: ObjectStore | None = None,
                skew_s: float = 0.0, keep_previous: bool = False,
                child: dict[str, Any] | None = None) -> Writer | None:
    """Open a writer of ``kind`` (seeded when None; slatelib when a WAL gap waits for
    repair); on an expected failure, try again on a fault-free store (twice)."""
    rng = world.rng
    kind = kind or rng.choice(KINDS)
    if kind == "official" and not world.official_writer_may_open():
        kind = "slatelib"
    if skew_s:
        world.clock_taint_until = max(world.clock_taint_until,
                                      time.monotonic() + abs(skew_s) + 5.0)
    if skew_s > 0:  # its clock ticks are in the future: 0.17 writers refuse until then
        world.official_writers_after = max(world.official_writers_after,
                                           time.monotonic() + skew_s + 5.0)
    since = time.monotonic()  # an attempt that failed may still have fenced the others
    for attempt in range(3):
        use = store if attempt == 0 and store is not None else world.store
        try:
            w: Writer
            if kind == "slatelib":
                w = SlateWriter.open(world, use, skew_s=skew_s)
            elif kind == "official":
                w = OfficialWriter.open(world)
            else:
                opts: dict[str, Any] = {
                    "ops": 3000, "pace": rng.choice((0.002, 0.01, 0.03)),
                    "flush_every": rng.choice((0, 25, 60)), "skew_s": skew_s}
                opts.update(child or {})
                if opts.get("official") and not world.official_writer_may_open():
                    opts["official"] = False
                cw = ChildWriter.start(world, **opts)  # type: ignore[arg-type]
                if not cw.wait_open() and not cw.hooked:
                    cw.close()
                    raise AuditFailure(f"child writer {cw.wid} did not open: {cw.stop_reason}")
                w = cw  # (killed by its hook while opening: it may have fenced the others)
        except AuditFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - judged
            world.log(f"  open {kind} failed: {judge(exc, f'open {kind} writer')}")
            continue
        world.log(f"  opened {kind} writer {w.wid} (gen {w.gen})")
        fence_previous(world, w, keep_previous=keep_previous, since=since)
        return w
    return None


def ensure_writer(world: World, kinds: tuple[str, ...] = KINDS) -> Writer | None:
    world.pump()
    w = world.current
    if w is not None and w.alive:
        return w
    return open_writer(world, world.rng.choice(kinds))


def write_some(world: World, count: int | None = None) -> None:
    w = ensure_writer(world)
    if w is None:
        return
    n = count if count is not None else world.rng.randint(3, 25)
    if isinstance(w, ChildWriter):
        w.wait_acks(len(w.acked) + min(n, 10), 2.0)
    else:
        w.write(n)
        if world.rng.random() < 0.3:
            w.flush()


# ------------------------------------------------------------------------ maintenance
def run_compaction_here(world: World, store: ObjectStore | None = None, *,
                        path: str = DB, what: str = "compaction",
                        policy: str | None = None) -> bool:
    """One in-process compaction; True when it committed or had nothing to do."""
    policy = policy or world.rng.choice(("l0", "full"))
    try:
        report = run_compaction(path, store or world.store, settings=maint_settings(),
                                policy=policy, parallelism=2)
    except Exception as exc:  # noqa: BLE001 - judged
        compaction_failed(world, exc, what)
        return False
    world.log(f"  {what}: {report.status}")
    return True


def compaction_failed(world: World, exc: BaseException, what: str) -> None:
    """Judge a compaction's failure. No official compactor ever runs, so a refusal to fence
    is a failure (also when other slatelib compactions raced it: finding K1)."""
    if isinstance(exc, CompactorActiveError):
        raise AuditFailure(f"{what}: refused, but no official compactor runs: {exc}") from exc
    world.log(f"  {what}: {judge(exc, what)}")


def gc_now(world: World, *, kind: str | None = None, min_age: float | None = None,
           skew_s: float = 0.0, store: ObjectStore | None = None, path: str = DB,
           audit: bool = True, what: str = "gc") -> None:
    """One GC run (slatelib or official), then the reference audit.

    Official GC and skewed or sub-second GC are kept away while a writer's clock was
    skewed (see ``World.clock_taint_until``)."""
    rng = world.rng
    kind = kind or rng.choice(("slatelib", "slatelib", "official"))
    min_age = min_age if min_age is not None else rng.choice((0.5, 1.0, 2.0))
    if world.clock_tainted:
        kind, skew_s, min_age = "slatelib", 0.0, max(min_age, 1.0)
    label = f"{what} ({kind}, min_age {min_age}s, skew {skew_s}s, {path})"
    if kind == "slatelib":
        try:
            rep = collect_garbage(path, store or world.store, min_age=min_age, force=True,
                                  dry_run=False, settings=maint_settings(),
                                  clock=SkewedClock(skew_s) if skew_s else None)
            world.log(f"  {label}: deleted {_deleted(rep)}")
        except Exception as exc:  # noqa: BLE001 - judged
            world.log(f"  {label}: {judge(exc, label)}")
    else:
        official_gc(world, path, int(min_age * 1000))
        world.log(f"  {label}: done")
    if audit:
        auditor.after_gc(world, label)


def _deleted(report: Any) -> str:
    parts = [f"{k} {t.deleted}" for k, t in report.kinds.items() if t.deleted]
    if report.errors:
        parts.append(f"errors {report.errors[:2]}")
    return ", ".join(parts) or "nothing"


def official_gc(world: World, path: str, min_age_ms: int) -> None:
    from slatedb.uniffi._slatedb_uniffi.slatedb import (
        GarbageCollectorDirectoryOptions,
        GarbageCollectorOptions,
        GarbageCollectorScheduleOptions,
    )

    from tests.interop.official import OfficialAdmin, run

    d = GarbageCollectorDirectoryOptions(interval_ms=None, min_age_ms=min_age_ms, dry_run=False)
    opts = GarbageCollectorOptions(
        manifest_options=d, wal_options=d, wal_fence_options=d, compacted_options=d,
        compactions_options=d, detach_options=GarbageCollectorScheduleOptions(interval_ms=None))
    try:
        run(OfficialAdmin(world.root, path).admin.run_gc_once(opts))
    except Exception as exc:  # noqa: BLE001 - the binding's error types
        raise AuditFailure(f"official GC of {path!r} failed: {type(exc).__name__}: {exc}") from exc


def slate_child(world: World, name: str, *command: str, hook: str | None = None,
                path: str = DB) -> Proc:
    args = ["tests.faults.child", "slate"]
    if hook:
        args += ["--hook", hook]
    return world.spawn(name, [*args, "--", *world.slate_argv(path, *command)])


def gc_argv(min_age: float) -> list[str]:
    return ["gc", "--min-age", f"{int(min_age * 1000)}ms", "--force", "--no-dry-run"]


OK_EXITS = {0, 3, 4, 6}
"""Exit codes a faulted or raced maintenance process may end with: done, fenced,
conflict, storage unavailable / unknown outcome (exit_codes.py)."""


def check_exit(proc: Proc, rc: int, what: str) -> None:
    if rc < 0 or rc in OK_EXITS:
        return
    raise AuditFailure(f"{what}: exit code {rc}\n{proc.tail()}")


# ------------------------------------------------------------------------ checkpoints
def required_flushed(world: World) -> dict[str, Any]:
    world.pump()
    return world.ledger.flushed_snapshot()


def record_checkpoint(world: World, *, lifetime: float | None, store: ObjectStore | None = None,
                      what: str = "checkpoint") -> CheckpointRecord | None:
    """Create a checkpoint of the main database and record what both readers show at it:
    every write flushed to L0 before it, nothing never tried."""
    required = required_flushed(world)
    world.next_checkpoint += 1
    name = f"h{world.next_checkpoint}"
    try:
        cp = create_checkpoint(DB, store or world.store, lifetime=lifetime, name=name)
    except Exception as exc:  # noqa: BLE001 - judged
        world.log(f"  {what}: {judge(exc, what)}")
        return None
    same_name = [c for c in auditor_checkpoints(world) if c.name == name]
    if len(same_name) != 1:
        raise AuditFailure(f"{what}: {len(same_name)} checkpoints named {name!r} after one "
                           "create (a retried CAS added it twice?)")
    rec = CheckpointRecord(cp.id, DB, None, expires=lifetime is not None)
    try:
        content = read_ours(world, DB, cp.id)
        theirs = read_theirs(world, DB, cp.id)
    except Exception as exc:  # noqa: BLE001
        if lifetime is not None and lifetime < 5:
            world.log(f"  {what}: short-lived checkpoint unreadable already: {type(exc).__name__}")
            return None
        raise
    world.pump()
    world.ledger.check_read(content, f"{what} {cp.id} (slatelib)", required=required)
    if theirs != content:
        raise AuditFailure(f"{what} {cp.id}: official reader reads {len(theirs)} rows, "
                           f"slatelib {len(content)}")
    rec.content = content
    world.checkpoints[cp.id] = rec
    world.log(f"  {what}: {cp.id} (lifetime {lifetime}) pins manifest {cp.manifest_id}, "
              f"{len(content)} rows")
    return rec


def auditor_checkpoints(world: World) -> list[Any]:
    from slatelib.store.manifest_store import ManifestStore

    return list(ManifestStore(world.store, DB).read_latest().value.checkpoints)


def readers(world: World) -> Readers:
    if world.readers is None:
        world.readers = Readers(world, DB)
        world.readers.open()
    return world.readers
