"""Rescale scenario (R01): the main database split into shards by key range and the shards
merged back (:mod:`slatelib.ops.rescale`, Spark-free: threads for the compactions and the
scans), each job under the faults of the clone scenarios, then rerun.

One episode:

1. The main database gets a few more writes (its writer, or a child writer, keeps running:
   the split fences it, ``fence_source``), then is split into 2 or 3 shards, at balanced
   keys or at keys the seed picks.
2. The first run of each job gets one of: seeded store faults (errors before a call takes
   effect, lost responses after a write landed; under the production retry policy or
   bare), a :class:`SimulatedCrash` before or after its N-th matching store call, a child
   process (:mod:`tests.faults.rescale_child`) SIGKILLed before or after its N-th matching
   store write, or nothing.
3. If it did not finish: GC of the sources and of the targets made so far (the reference
   audit after each), sometimes a destroy (hard or soft) of a target of the split or of a
   source of the merge, then a fault-free rerun of the same call. Without a destroy the
   rerun must finish the job; with one it finishes or fails with an expected error (what
   is left), and the harness then abandons the job as its message says (hard-destroy the
   targets, drop the job record and checkpoints).
4. The sources at the job's checkpoints are read by both readers as soon as the checkpoints
   exist (a store hook right before the first target is cloned, or between the runs).

A job that reports success is audited: every key of its sources at the job's checkpoints is
in exactly the one target whose range holds it, with the same value, read by the slatelib
and the official reader (for the split: every write acknowledged before the fence, no
write of a zombie, and the main database's latest state equals the checkpoint); every target
is initialized, not destroyed and detached; the job record is finished and validated; and
no checkpoint of the job (its own, the targets' final ones) is left in a source. After every
GC, no object referenced by a live manifest or checkpoint of the main database, the clones,
the sources or the targets is gone. Last, the shards are destroyed and collected while the
merged database keeps reading everything, and the merged database is destroyed.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from slatelib import errors
from slatelib.core.rescale_plan import RescalePlan
from slatelib.errors import InvalidDbStateError, ManifestMissingError, SlateError
from slatelib.objstore import ObjectStore
from slatelib.objstore.registry import with_retries
from slatelib.ops.checkpoint import delete_checkpoint
from slatelib.ops.destroy import destroy, layout_objects
from slatelib.ops.rescale import (
    RescaleOptions,
    RescaleReport,
    merge_databases,
    record,
    split_database,
    thread_mapper,
)
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.faulty import FlakyObjectStore, SimulatedCrash
from tests.faults import auditor
from tests.faults.faults import StoreFaults, expected_errors, judge, pick_rules
from tests.faults.ledger import AuditFailure
from tests.faults.readers import read_ours, read_theirs
from tests.faults.scenarios.common import (
    ensure_writer,
    fence_previous,
    gc_now,
    maint_settings,
    readers,
    write_some,
)
from tests.faults.world import DB, World
from tests.faults.writers import ChildWriter, SlateWriter

Rows = dict[bytes, bytes]

FAULT_KINDS = ("/manifest/", "/compacted/", "/wal/", "/slatelib/rescale/", "/compactions/", "")
"""Where the seeded store faults of a rescale hit (as ``tests.faults.faults.KINDS``, and
the job records)."""
CHILD_TIMEOUT_S = 90.0


def job_options(*, fence_source: bool, allow_live_source: bool) -> RescaleOptions:
    """The options of every rescale of the harness (in process and in the child)."""
    return RescaleOptions(fence_source=fence_source, allow_live_source=allow_live_source,
                          parallelism=2, concurrency=2)


@dataclass
class Job:
    """One rescale call of the episode, and what the harness learned of it."""

    kind: str
    """``split`` or ``merge``."""
    sources: list[str]
    targets: list[str]
    at: list[bytes] | None = None
    fence_source: bool = True
    allow_live_source: bool = False
    content: Rows | None = None
    """The sources at the job's checkpoints (both readers), once captured."""
    pinned: dict[str, int] = field(default_factory=dict)
    """Source -> the manifest id the job's checkpoint pins (the targets' final checkpoints
    are copies of it: same manifest id)."""
    finals: set[uuid.UUID] = field(default_factory=set)
    """Final checkpoints of the targets seen in the sources."""
    destroyed: str | None = None
    hook_error: BaseException | None = None

    def __str__(self) -> str:
        keys = "" if self.at is None else f" at {[k[:16] for k in self.at]}"
        return f"{self.kind} {','.join(self.sources)} -> {','.join(self.targets)}{keys}"

    def run(self, store: ObjectStore) -> RescaleReport:
        opts = job_options(fence_source=self.fence_source,
                           allow_live_source=self.allow_live_source)
        if self.kind == "split":
            return split_database(self.sources[0], store, self.targets, at=self.at,
                                  settings=maint_settings(), options=opts,
                                  mapper=thread_mapper(2))
        return merge_databases(self.sources, self.targets[0], store, settings=maint_settings(),
                               options=opts, mapper=thread_mapper(2))

    def argv(self, root: str) -> list[str]:
        out = ["tests.faults.rescale_child", self.kind, "--root", root]
        for s in self.sources:
            out += ["--source", s]
        for t in self.targets:
            out += ["--target", t]
        for k in self.at or ():
            out += ["--at", k.hex()]
        if self.fence_source:
            out.append("--fence-source")
        if self.allow_live_source:
            out.append("--allow-live-source")
        return out

    def write_paths(self) -> list[str]:
        """Path fragments of the job's writes (where a crash or a kill is put)."""
        first, last = self.sources[0], self.targets[-1]
        return [f"{first}/manifest/", f"{first}/slatelib/rescale/", f"{first}/wal/",
                f"{first}/compacted/", f"{self.targets[0]}/manifest/", f"{last}/compacted/",
                f"{last}/compactions/", "/manifest/", "/"]


def rescale_under_faults(world: World) -> None:
    """R01: split the main database into shards and merge them back, each job under seeded
    faults (store errors, lost responses, a crash or a SIGKILL at a write) and rerun; GC
    and destroys between the runs (module docstring)."""
    world.note("R01")
    rng = world.rng
    w = ensure_writer(world)
    write_some(world, rng.randint(10, 30))
    if w is not None and w.alive and rng.random() < 0.5:
        w.flush()
    tag = f"{rng.randrange(10**6):06d}"
    shards = [f"rs{tag}-{i}" for i in range(rng.choice((2, 3)))]
    split = Job("split", [DB], shards, at=_split_keys(world, len(shards)))
    if not _run_job(world, split):
        return
    assert split.content is not None
    merged = Job("merge", list(shards), [f"rm{tag}"], fence_source=rng.random() < 0.5)
    merged.allow_live_source = not merged.fence_source
    expected = dict(split.content)
    if _run_job(world, merged, expected=expected):
        _teardown(world, shards, merged.targets[0], expected)
    else:
        for s in shards:
            _destroy_quietly(world, s)


# ----------------------------------------------------------------------------- one job
def _run_job(world: World, job: Job, *, expected: Rows | None = None) -> bool:
    """Run ``job`` under faults, then rerun it; audit it when it reports success (True)."""
    rng = world.rng
    world.log(f"  rescale {job}")
    epoch = _writer_epoch(world)
    since = time.monotonic()
    job_id = _first_run(world, job)
    if job_id is None:
        _capture(world, job)
        _between(world, job)
        job_id = _rerun(world, job)
    if job.hook_error is not None:
        raise job.hook_error
    if job.kind == "split":
        _note_fence(world, job, since, epoch, done=job_id is not None)
    if job_id is None:
        _abandon(world, job)
        gc_now(world, what="gc after an abandoned rescale")
        _check_paths(world, job, "after an abandoned rescale")
        return False
    _audit_done(world, job, job_id, expected)
    if job.kind == "split":
        readers(world).check("after a split of the main database")
    gc_now(world, what=f"gc after the {job.kind}")
    for t in job.targets if rng.random() < 0.5 else job.targets[:1]:
        gc_now(world, kind="slatelib", path=t, audit=False, what=f"gc of {t}")
    _check_paths(world, job, f"after the {job.kind}")
    return True


def _first_run(world: World, job: Job) -> str | None:
    """The job's first run, under faults; its job id when it reported success."""
    rng = world.rng
    mode = rng.choices(("store", "crash", "kill", "none"), weights=(3, 3, 3, 1))[0]
    if mode == "kill":
        return _child_run(world, job)
    base = _capture_layer(world, job, world.raw)
    retries = rng.random() < 0.7
    flaky = FlakyObjectStore(base)
    if mode == "store":
        rules = pick_rules(rng, flaky, count=rng.randint(1, 3), kinds=FAULT_KINDS,
                           latency=False)
        world.log_faults(f"rescale {job.kind}", StoreFaults(tuple(rules), retries))
    elif mode == "crash":
        op = rng.choice(("put_if_absent", "put", "put_if_match", "delete", None))
        where = rng.choice(job.write_paths())
        when = rng.choice(("before", "after"))
        flaky.crash(op, where, when=when, skip=rng.randint(0, 8))  # type: ignore[arg-type]
        world.log(f"  crash of the {job.kind} {when} {op or 'a call'} on {where!r} "
                  f"(skip {flaky.rules[0].skip}, {'retries' if retries else 'bare'})")
    else:
        retries = True
    store: ObjectStore = with_retries(flaky) if retries else flaky
    try:
        report = job.run(store)
    except SimulatedCrash:
        world.log(f"  {job.kind} crashed")
        return None
    except Exception as exc:  # noqa: BLE001 - judged
        world.log(f"  {job.kind} under faults: {judge(exc, f'rescale {job.kind}')}")
        return None
    return _succeeded(world, job, report, "under faults")


def _child_run(world: World, job: Job) -> str | None:
    """The job in a child process SIGKILLed before or after its N-th matching write (or
    never, when it has fewer)."""
    rng = world.rng
    hook = f"{rng.choice(('kill', 'kill-after'))}:{rng.randint(0, 10)}:" \
           f"{rng.choice(job.write_paths())}"
    proc = world.spawn(f"rescale-{job.kind}", [*job.argv(str(world.root)), "--hook", hook])
    rc = proc.wait(CHILD_TIMEOUT_S)
    line = next((ln for ln in proc.out if ln.startswith(("RESULT ", "ERROR "))), None)
    world.log(f"  {job.kind} child ({hook}): exit {rc}, {line}")
    if line is None:
        if rc < 0:
            return None
        raise AuditFailure(f"rescale {job.kind} child exited {rc} without a result\n"
                           f"{proc.tail()}")
    word, name, *rest = line.split(" ", 2)
    if word == "ERROR":
        kind = getattr(errors, name, None)
        if not (isinstance(kind, type) and issubclass(kind, expected_errors())):
            raise AuditFailure(f"rescale {job.kind} child: unexpected {name}: "
                               f"{rest[0] if rest else ''}\n{proc.tail()}")
        return None
    if name not in ("done", "already_done"):
        raise AuditFailure(f"rescale {job.kind} child reported {line}")
    return rest[0] if rest else None


def _rerun(world: World, job: Job) -> str | None:
    """The same call, fault-free: it finishes the job, or (after a destroy) fails with an
    expected error (None)."""
    try:
        report = job.run(_capture_layer(world, job, world.store))
    except Exception as exc:
        if job.destroyed is None:
            raise AuditFailure(f"rerun of rescale {job} failed: {type(exc).__name__}: "
                               f"{exc}") from exc
        if not isinstance(exc, (*expected_errors(), ManifestMissingError)):
            raise AuditFailure(f"rerun of rescale {job} after {job.destroyed} was destroyed: "
                               f"unexpected {type(exc).__name__}: {exc}") from exc
        world.log(f"  rerun after destroying {job.destroyed}: {type(exc).__name__}: "
                  f"{str(exc)[:200]}")
        return None
    return _succeeded(world, job, report, "rerun")


def _succeeded(world: World, job: Job, report: RescaleReport, what: str) -> str:
    if report.status not in ("done", "already_done") or report.job_id is None:
        raise AuditFailure(f"rescale {job} ({what}) returned status {report.status}")
    world.log(f"  {job.kind} {what}: {report.status} (job {report.job_id}, "
              f"resumed {report.resumed})")
    return report.job_id


# ----------------------------------------------------------------- what the job read
def _capture_layer(world: World, job: Job, inner: ObjectStore) -> ObjectStore:
    """``inner`` with a hook right before the first target's first manifest write, where
    the job's checkpoints exist: the sources are read there (:func:`_capture`)."""

    def hook(_seconds: float) -> None:
        try:
            _capture(world, job)
        except BaseException as exc:  # noqa: BLE001 - raised once the job returned
            job.hook_error = exc

    layer = FlakyObjectStore(inner, sleep=hook)
    layer.delay("put_if_absent", f"{job.targets[0]}/manifest/", seconds=1.0, times=1)
    return layer


def _capture(world: World, job: Job) -> None:
    """Read every source at the job's checkpoint through both readers (once, when they
    all exist); they must agree."""
    if job.content is not None:
        return
    plan = _active_plan(world, job)
    if plan is None:
        return
    rows: Rows = {}
    pinned: dict[str, int] = {}
    for src in plan.sources:
        cp_id = uuid.UUID(src.checkpoint_id)
        stored = ManifestStore(world.store, src.path).try_read_latest()
        cp = None if stored is None else stored.value.checkpoint(cp_id)
        if cp is None:
            return
        ours = read_ours(world, src.path, cp_id)
        theirs = read_theirs(world, src.path, cp_id)
        if ours != theirs:
            raise AuditFailure(f"rescale {job}: {src.path!r} at the job's checkpoint {cp_id}: "
                               f"slatelib reads {len(ours)} rows, official {len(theirs)}")
        overlap = set(rows) & {k for k, _ in ours}
        if overlap:
            raise AuditFailure(f"rescale {job}: sources overlap at {sorted(overlap)[:3]}")
        rows.update(ours)
        pinned[src.path] = cp.manifest_id
    job.content = dict(sorted(rows.items()))
    job.pinned = pinned
    world.log(f"  {job.kind}: the sources at the job's checkpoints read {len(rows)} rows")


def _active_plan(world: World, job: Job) -> RescalePlan | None:
    for s in job.sources:
        try:
            plan = record.read_active(world.store, s)
        except SlateError:
            continue
        if plan is not None and sorted(plan.source_paths) == sorted(job.sources) and \
                list(plan.target_paths) == job.targets:
            return plan
    return None


def _note_finals(world: World, job: Job) -> None:
    for t in job.targets:
        stored = ManifestStore(world.store, t).try_read_latest()
        for e in () if stored is None else stored.value.external_dbs:
            if e.path in job.sources and e.final_checkpoint_id is not None:
                job.finals.add(e.final_checkpoint_id)


def _writer_epoch(world: World) -> int:
    return ManifestStore(world.store, DB).read_latest().value.writer_epoch


def _note_fence(world: World, job: Job, since: float, epoch_before: int, *,
                done: bool) -> None:
    """The split's flush opened a slatelib ``Db`` on the main database (a new writer
    epoch), which fences every writer: they are zombies from now on (as
    ``common.fence_previous``), and may have noticed since the job began.

    The fence is complete once the job's checkpoint exists (the flush opened and closed the
    ``Db``, writing its WAL fence first). A run that died after claiming the epoch but
    before its WAL fence left the old writer able to write on (a newer writer replays it):
    then a slatelib writer opens now, which completes the fence."""
    if _writer_epoch(world) == epoch_before:
        return
    if done or DB in job.pinned:
        now = time.monotonic()
        for w in world.writers:
            if w.fenced_at is None:
                w.fenced_at = now
                w.fencing_since = since
            if w.alive and not isinstance(w, ChildWriter):
                w.close()
        world.log(f"  the split fenced the main database's writers (writer epoch "
                  f"{epoch_before} -> {_writer_epoch(world)})")
        return
    try:
        w = SlateWriter.open(world, world.store)
    except Exception as exc:  # noqa: BLE001 - judged
        world.log(f"  opening a writer after the split: {judge(exc, 'open slatelib writer')}")
        return
    fence_previous(world, w, since=since)
    world.log(f"  the split's fence may be incomplete: opened slatelib writer {w.wid} "
              f"(gen {w.gen})")


# ------------------------------------------------------------------- between the runs
def _between(world: World, job: Job) -> None:
    """After a run that did not finish: GC of a source and of a target (audited), and
    sometimes a destroy of a target (split) or a source (merge)."""
    rng = world.rng
    _note_finals(world, job)
    if rng.random() < 0.5:
        src = rng.choice(job.sources)
        if src == DB:
            gc_now(world, what="gc of the source during a rescale")
        else:
            gc_now(world, path=src, audit=False, what=f"gc of source {src} during a merge")
        _check_paths(world, job, "gc of a source during a rescale")
    made = [t for t in job.targets if ManifestStore(world.store, t).try_read_latest()]
    if made and rng.random() < 0.4:
        t = rng.choice(made)
        gc_now(world, path=t, audit=False, what=f"gc of target {t} during a rescale")
        _check_paths(world, job, "gc of a target during a rescale")
    if rng.random() < 0.25 and not _finished(world, job):
        pool = made if job.kind == "split" else job.sources
        if pool:
            victim = rng.choice(pool)
            soft = rng.random() < 0.5
            try:
                destroy(victim, world.store, soft=soft)
                job.destroyed = victim
                world.log(f"  {'soft' if soft else 'hard'}-destroyed {victim} during the "
                          f"{job.kind}")
            except SlateError as exc:
                world.log(f"  destroying {victim} during the {job.kind}: "
                          f"{judge(exc, 'destroy during a rescale')}")
            _check_paths(world, job, "destroy during a rescale")


def _finished(world: World, job: Job) -> bool:
    """Whether the job is recorded as finished (a run died after that, before it released
    its record): a destroy now comes after the job, not during it."""
    return any(sorted(p.source_paths) == sorted(job.sources) and
               list(p.target_paths) == job.targets
               for p in record.read_finished(world.store, job.sources[0]))


def _check_paths(world: World, job: Job, what: str) -> None:
    """The reference audit of every source and target of the job (the main database's is
    done by ``gc_now``)."""
    for p in [*job.sources, *job.targets]:
        if p != DB:
            auditor.check_references(world, p, what)


def _abandon(world: World, job: Job) -> None:
    """The way out the failed rerun names: hard-destroy the targets, remove the job record
    and the job's checkpoints of the sources."""
    plan = _active_plan(world, job)
    for t in job.targets:
        _destroy_quietly(world, t)
    if plan is None:
        return
    for src in plan.sources:
        current = record.read_active(world.store, src.path)
        if current is not None and current.job_id == plan.job_id:
            world.store.delete(record.active_path(src.path))
        if plan.options.get("own_checkpoint", True):
            try:
                delete_checkpoint(src.path, world.store, src.checkpoint_id)
            except ManifestMissingError:
                pass  # hard-destroyed
            except SlateError as exc:
                world.log(f"  deleting the job's checkpoint of {src.path}: "
                          f"{judge(exc, 'delete checkpoint')}")
    world.log(f"  abandoned rescale job {plan.job_id}")


def _destroy_quietly(world: World, path: str) -> None:
    """Hard-destroy ``path`` if anything is there (expected refusals are logged)."""
    if ManifestStore(world.store, path).try_read_latest() is None and \
            not layout_objects(world.store, DbPaths(path)):
        return
    try:
        destroy(path, world.store, soft=False)
    except SlateError as exc:
        world.log(f"  destroying {path}: {judge(exc, f'destroy {path}')}")


# --------------------------------------------------------------------------- audit
def _audit_done(world: World, job: Job, job_id: str, expected: Rows | None) -> None:
    """A job that reported success: its record, its sources released, its targets
    initialized, detached and holding exactly their ranges of the sources."""
    what = f"rescale {job} (job {job_id})"
    for s in job.sources:
        if record.read_active(world.store, s) is not None:
            raise AuditFailure(f"{what} reported success, but {s!r} still has a running job")
    raw = world.store.get(record.finished_path(job.sources[0], job_id))
    plan = RescalePlan.from_json(raw)
    report: dict[str, Any] = json.loads(raw).get("report") or {}
    validation = report.get("validation") or dict(plan.validation)
    if plan.status != "done" or not validation.get("ok"):
        raise AuditFailure(f"{what}: finished record status {plan.status}, validation "
                           f"{validation}")
    if [t.path for t in plan.targets] != job.targets:
        raise AuditFailure(f"{what}: the record names targets {plan.target_paths}")
    cloned = [t.get("path") for t in report.get("targets", [])
              if (t.get("clone") or {}).get("created")]
    if cloned and validation.get("checked_by"):
        raise AuditFailure(f"{what}: the run that reported success cloned {cloned}, but took "
                           f"the validation from {validation['checked_by']}")
    for t in report.get("targets", []):
        for d in t.get("detach", []):
            if d.get("final_checkpoint_id") not in (None, "None"):
                job.finals.add(uuid.UUID(d["final_checkpoint_id"]))
    _check_released(world, job, plan, what)
    _check_targets(world, job, plan, what, expected)


def _check_released(world: World, job: Job, plan: RescalePlan, what: str) -> None:
    """No checkpoint of the job is left in a source: neither its own (unless given) nor a
    target's final one (a copy of it: the same pinned manifest)."""
    for src in plan.sources:
        stored = ManifestStore(world.store, src.path).try_read_latest()
        if stored is None or stored.value.destroyed_at_s is not None:
            continue  # destroyed meanwhile
        own = uuid.UUID(src.checkpoint_id)
        pinned = job.pinned.get(src.path)
        left = [c for c in stored.value.checkpoints
                if (c.id == own and plan.options.get("own_checkpoint", True))
                or c.id in job.finals or (pinned is not None and c.manifest_id == pinned)]
        if left:
            raise AuditFailure(f"{what}: done, but {src.path!r} still holds checkpoints of the "
                               f"job: {[(str(c.id), c.manifest_id) for c in left]}")


def _check_targets(world: World, job: Job, plan: RescalePlan, what: str,
                   expected: Rows | None) -> None:
    content = _expected_content(world, job, what, expected)
    seen: Rows = {}
    for t in plan.targets:
        stored = ManifestStore(world.store, t.path).try_read_latest()
        if stored is None:
            raise AuditFailure(f"{what}: done, but target {t.path!r} has no manifest")
        m = stored.value
        if not m.initialized or m.destroyed_at_s is not None:
            raise AuditFailure(f"{what}: done, but target {t.path!r} is "
                               f"{'destroyed' if m.initialized else 'not initialized'}")
        attached = [e.path for e in m.external_dbs if e.path in plan.source_paths]
        if attached:
            raise AuditFailure(f"{what}: done, but target {t.path!r} is still attached to "
                               f"{attached}")
        ours = read_ours(world, t.path)
        theirs = read_theirs(world, t.path)
        if ours != theirs:
            raise AuditFailure(f"{what}: target {t.path!r}: slatelib reads {len(ours)} rows, "
                               f"official {len(theirs)}")
        for k, _v in ours:
            if not any(p.range is None or p.range.contains(k) for p in t.parts):
                raise AuditFailure(f"{what}: target {t.path!r} holds {k!r}, outside its range")
            if k in seen:
                raise AuditFailure(f"{what}: {k!r} is in two targets")
        seen.update(ours)
    if seen != content:
        lost = sorted(set(content) - set(seen))
        extra = sorted(set(seen) - set(content))
        changed = sorted(k for k in set(seen) & set(content) if seen[k] != content[k])
        raise AuditFailure(f"{what}: the targets hold {len(seen)} rows, the sources at the "
                           f"job's checkpoints {len(content)}: lost {lost[:5]}, "
                           f"not in the sources {extra[:5]}, other values {changed[:5]}")
    if job.kind == "split":
        world.pump()
        world.ledger.check_read(seen, f"{what}: the shards together",
                                required=world.ledger.snapshot())
    job.content = content
    world.log(f"  {job.kind} audited: {len(seen)} rows in {len(plan.targets)} target(s), "
              "detached, the sources released")


def _expected_content(world: World, job: Job, what: str, expected: Rows | None) -> Rows:
    """What the targets must hold: the sources at the job's checkpoints (captured while
    they existed), which for a split also equals the main database now (every writer was
    fenced and none opened since), and for a merge the split's shards."""
    content = job.content
    if job.kind == "split":
        ours, theirs = read_ours(world, DB), read_theirs(world, DB)
        if ours != theirs:
            raise AuditFailure(f"{what}: the main database reads {len(ours)} rows (slatelib), "
                               f"{len(theirs)} (official)")
        now = dict(ours)
        if content is not None and now != content:
            raise AuditFailure(f"{what}: the main database reads {len(now)} rows, at the job's "
                               f"checkpoint {len(content)}, but no writer wrote since")
        content = now
    if expected is not None:
        if content is not None and content != expected:
            raise AuditFailure(f"{what}: the sources read {len(content)} rows at the job's "
                               f"checkpoints, {len(expected)} when they were made")
        content = expected
    assert content is not None
    return content


# ------------------------------------------------------------------------ the end
def _teardown(world: World, shards: list[str], merged: str, content: Rows) -> None:
    """The shards destroyed (hard, else soft) and collected: the merged database still
    reads everything; then it is destroyed too."""
    rng = world.rng
    for s in shards:
        if ManifestStore(world.store, s).try_read_latest() is None:
            continue
        soft = rng.random() < 0.3
        try:
            destroy(s, world.store, soft=soft)
        except InvalidDbStateError as exc:  # e.g. a reader's unexpired checkpoint
            world.log(f"  hard destroy of {s}: {type(exc).__name__}; soft instead")
            soft = True
            destroy(s, world.store, soft=True)
        if soft:
            gc_now(world, kind="slatelib", path=s, min_age=0.5, audit=False,
                   what=f"gc of the soft-destroyed shard {s}")
    auditor.check_references(world, merged, "after the shards were destroyed")
    ours, theirs = dict(read_ours(world, merged)), dict(read_theirs(world, merged))
    if ours != content or theirs != content:
        raise AuditFailure(f"the merged database {merged!r} reads {len(ours)} (slatelib) / "
                           f"{len(theirs)} (official) rows after its sources were destroyed, "
                           f"{len(content)} before")
    _destroy_quietly(world, merged)
    world.log(f"  shards {shards} and {merged} destroyed")


def _split_keys(world: World, shards: int) -> list[bytes] | None:
    """None (balanced keys chosen by the job), keys of the database, or fixed keys."""
    rng = world.rng
    pick = rng.random()
    if pick < 0.5:
        return None
    if pick < 0.8:
        keys = sorted({k for k, _ in read_ours(world, DB)})
        if len(keys) >= shards:
            return sorted(rng.sample(keys, shards - 1))
    fixed = [b"hot/04", b"hot/08", b"u/c", b"u/o", b"u/p", b"u/s"]
    return sorted(rng.sample(fixed, shards - 1))
