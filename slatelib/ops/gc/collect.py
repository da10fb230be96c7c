"""Garbage collection of one database: :func:`collect_garbage` (single process) and
:func:`run_gc`, the orchestration that the Spark job (``jobs/gc.py``) shares.

A run, in 0.17.0's order (``GarbageCollector::run_gc_once``):

1. List ``manifest/`` (on the driver, once), read the compactor state, then the latest
   manifest (probed forward by id from the newest listed one, past a stale listing; later
   re-reads probe from the last id read, as 0.17 does, instead of listing again). Refuse to
   run on a root without a manifest, on malformed manifests or unsafe ``external_dbs``
   paths (:mod:`slatelib.core.external_dbs`; checked in every live manifest before the
   first write, and again on every re-read that a write follows), or with ``min_age``
   below the floor without force.
2. A soft-destroyed database past its grace with no live checkpoint is deleted entirely
   (:mod:`slatelib.ops.gc.destroy`).
3. Remove expired checkpoints (CAS, reloading on conflict).
4. Read the live set (latest + pinned manifests), list ``compactions/`` (driver),
   ``wal/`` and ``compacted/`` (the backend: in-process, or ranges on Spark executors), and
   decide every object (:mod:`slatelib.core.gc_rules`).
5. Unless dry run, per kind: advance the boundary file for manifests and compactions
   (SlateDB RFC-0026), re-read the compactor state and manifests, re-decide the candidates against
   that fresh state, delete the survivors. A failure in one kind is reported and the next
   kind still runs, as 0.17 isolates its tasks.
6. Detach clones whose external databases are no longer referenced (parent first).

A dry run writes nothing at all (0.17 still advances boundaries and removes expired
checkpoints in its dry runs; slatelib does not) and reports what a real run would do.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.config import GcDirectorySettings, Settings, parse_duration
from slatelib.core.external_dbs import check_external_dbs
from slatelib.core.gc_plan import (
    CompactionsState,
    DestroyState,
    LiveSet,
    build_rules,
    destroy_verdict,
    own_referenced_ssts,
    plan_detach,
    referenced_ssts,
    without_expired_checkpoints,
)
from slatelib.core.gc_rules import (
    GC_KINDS,
    DirOptions,
    GcDecision,
    GcOptions,
    GcRules,
    ObjectKind,
    classify,
)
from slatelib.core.manifest import Manifest
from slatelib.errors import ConflictError, InvalidArgumentError, ObjectMissingError, SlateError
from slatelib.ids import Ulid, ulid_to_str
from slatelib.objstore import ObjectStore, wal_store_of
from slatelib.ops.gc.backend import DecisionSet, GcBackend, LocalBackend, LocalListing
from slatelib.ops.gc.clone import drop_external_dbs, release_checkpoint, remove_expired_checkpoints
from slatelib.ops.gc.report import GcReport
from slatelib.ops.gc.state import (
    advance_boundary,
    boundary_path,
    read_boundary,
    read_compactions_state,
    read_latest_manifest,
    read_live_set,
)
from slatelib.paths import COMPACTED_DIR, COMPACTIONS_DIR, MANIFEST_DIR, WAL_DIR, DbPaths
from slatelib.store.sequenced import Versioned
from slatelib.store.wal_store import WalStore

log = logging.getLogger(__name__)

DIRS = (MANIFEST_DIR, WAL_DIR, COMPACTED_DIR, COMPACTIONS_DIR)
"""Directories in the order 0.17 collects them."""

DecisionSink = Callable[[GcDecision], None]


class _FixedClock:
    """``now`` pinned by the caller; sleeping and monotonic time stay real."""

    def __init__(self, now_ms: int, base: Clock) -> None:
        self._now_ms = now_ms
        self._base = base

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic_s(self) -> float:
        return self._base.monotonic_s()

    def sleep(self, seconds: float) -> None:
        self._base.sleep(seconds)


def check_db_spelling(spelled: str, what: str = "database path") -> None:
    """Refuse a database named with a trailing ``/`` (or, for a path, a leading one): such a
    name is a prefix spelling, and GC, which deletes, takes a database only as its objects
    are listed (``tenants/db``), never a guess at which prefix was meant.

    Raises:
        InvalidArgumentError: naming the spelling and the way to say what was meant.
    """
    if spelled.endswith("/"):
        raise InvalidArgumentError(
            f"gc {what} {spelled!r} ends with '/': that names a prefix (which may hold "
            f"several databases), not a database; nothing was deleted. Name the database "
            f"itself ({spelled.rstrip('/')!r}), or use --discover to collect every database "
            "below a prefix")
    if what == "database path" and spelled.startswith("/"):
        raise InvalidArgumentError(
            f"gc database path {spelled!r} starts with '/': database paths are relative to "
            f"the store root ({spelled.lstrip('/')!r}); nothing was deleted")


def gc_options(
    settings: Settings,
    *,
    min_age: float | str | None = None,
    force: bool = False,
    dry_run: bool | None = False,
    min_ages: Mapping[str, float | str | None] | None = None,
    dry_runs: Mapping[str, bool | None] | None = None,
    boundary_files: bool | None = None,
) -> GcOptions:
    """Options from the ``[gc]`` settings and their per-directory sub-tables
    (``[gc.manifest_options]`` ..., 0.17's ``GarbageCollectorOptions``), overridden by the
    caller's (a CLI's flags): ``min_age`` and ``dry_run`` are the defaults of every
    directory (``dry_run`` None: ``[gc] dry_run``; its default False leaves the whole run's
    dry run to :func:`run_gc`'s ``dry_run``, as before per-directory options existed),
    ``min_ages`` / ``dry_runs`` (kind -> value; None: not given) set one directory's,
    ``boundary_files`` sets ``boundary_files_enabled``.

    A directory's ``min_age`` is, first found: ``min_ages[kind]``, the directory's
    ``min_age`` in the settings, ``min_age``, ``[gc] min_age``; its dry run likewise
    (``dry_runs``, the settings' directory ``dry_run``, ``dry_run``, ``[gc] dry_run``): the
    setting for one directory wins over a default for all (docs/rfcs/0013-gc-options.md).

    Raises:
        InvalidArgumentError: a malformed duration, or a kind with no options.
    """
    g = settings.gc
    age = g.min_age if min_age is None else parse_duration(min_age, what="min_age")
    base_dry = g.dry_run if dry_run is None else dry_run
    flag_ages = {_kind(k): v for k, v in (min_ages or {}).items() if v is not None}
    flag_dry = {_kind(k): v for k, v in (dry_runs or {}).items() if v is not None}
    dirs: list[tuple[ObjectKind, DirOptions]] = []
    for kind in GC_KINDS:
        conf: GcDirectorySettings = getattr(g, f"{kind.value}_options")
        kind_age = flag_ages.get(kind, conf.min_age)
        dirs.append((kind, DirOptions(
            enabled=conf.enabled,
            min_age_s=None if kind_age is None else parse_duration(
                kind_age, what=f"{kind.value}_options min_age"),
            dry_run=flag_dry.get(kind, conf.dry_run),
            interval_s=conf.interval,
        )))
    return GcOptions(
        min_age_s=age, force=force, min_age_floor_s=g.min_age_floor,
        db_delete_grace_s=g.db_delete_grace, wal_fence_dry_run=g.wal_fence_dry_run,
        dry_run=base_dry, directories=tuple(dirs),
        boundary_files_enabled=(g.boundary_files_enabled if boundary_files is None
                                else boundary_files),
        detach_enabled=g.detach_options.enabled,
    )


def _kind(name: str) -> ObjectKind:
    try:
        kind = ObjectKind(name.replace("-", "_"))
    except ValueError:
        kind = ObjectKind.UNKNOWN
    if kind not in GC_KINDS:
        raise InvalidArgumentError(f"gc: no directory {name!r} (known: {', '.join(GC_KINDS)})")
    return kind


def collect_garbage(
    path: str,
    store: ObjectStore | str,
    *,
    min_age: float | str | None = None,
    force: bool = False,
    dry_run: bool | None = True,
    now: float | datetime | None = None,
    settings: Settings | None = None,
    clock: Clock | None = None,
    on_decision: DecisionSink | None = None,
    options: GcOptions | None = None,
    wal_store: ObjectStore | str | None = None,
) -> GcReport:
    """Collect the garbage of the database at ``path`` in ``store`` (an object store or its
    URL) in this process.

    ``wal_store``: the object store (or URL) that keeps the database's WAL, as 0.17's
    ``with_wal_object_store`` (None: ``store``'s own, else ``[object_store] wal_store``):
    ``wal/`` is then listed and collected there, by the rules 0.17's ``run_gc_once`` applies
    given the same WAL store (the main store's ``wal/`` is not looked at, as in 0.17).

    ``min_age`` is seconds or a duration string (default ``[gc] min_age``, 5 minutes): the
    ``min_age`` of every directory that sets none of its own (``[gc.wal_options]
    min_age``); a value below ``[gc] min_age_floor`` needs ``force``. ``dry_run=True`` (the
    default) writes nothing and reports every decision; ``False`` runs for real, with each
    directory's own ``dry_run`` (``[gc.<dir>_options]``) still applying; ``None`` takes
    ``[gc] dry_run`` as the default of the directories. ``options`` (built by
    :func:`gc_options`) replaces ``settings``, ``min_age`` and ``force`` when given. ``now``
    (Unix seconds or a datetime) fixes the time GC decides with; by default ``clock`` (the
    system clock) is read. Every decision is kept in ``report.decisions`` and passed to
    ``on_decision``.

    Raises:
        InvalidArgumentError: bad options, ``min_age`` below the floor without ``force``, a
            ``path`` spelled with a leading or trailing ``/``.
        ManifestMissingError: no manifest at ``path``, or a checkpoint pins a missing one.
        CorruptObjectError / UnsupportedFormatVersionError: a malformed manifest or an
            unsafe ``external_dbs`` path.
        StorageError: the store listed an object outside the directory it was asked for.
        WalStoreMissingError: the latest manifest's WAL tail is not in the store read (a
            separate WAL store not given); nothing was written.
    """
    s = settings or Settings()
    base = clock or SYSTEM_CLOCK
    if now is not None:
        secs = now.timestamp() if isinstance(now, datetime) else float(now)
        base = _FixedClock(int(secs * 1000), base)
    kept: list[GcDecision] = []

    def sink(d: GcDecision) -> None:
        kept.append(d)
        if on_decision is not None:
            on_decision(d)

    from slatelib.objstore import resolve_store, with_wal_store

    if options is None:
        options = gc_options(s, min_age=min_age, force=force,
                             dry_run=None if dry_run is None else False)
    routed = with_wal_store(resolve_store(store), wal_store, default=s.object_store.wal_store)
    report = run_gc(routed, path, options, dry_run=bool(dry_run),
                    backend=LocalBackend(concurrency=s.gc.delete_concurrency), clock=base,
                    on_decision=sink)
    report.decisions = kept
    return report


@dataclass
class _Plan:
    rules: GcRules
    refs: dict[Ulid, str]
    listings: dict[str, object]
    decisions: dict[str, DecisionSet]
    planned_latest_id: int


def run_gc(
    store: ObjectStore,
    path: str,
    options: GcOptions,
    *,
    dry_run: bool,
    backend: GcBackend,
    clock: Clock = SYSTEM_CLOCK,
    on_decision: DecisionSink | None = None,
) -> GcReport:
    """One GC run on one database with ``backend`` doing the listing and deleting.
    ``dry_run`` makes the whole run a dry run (nothing is written), as does ``options``
    when every directory is a dry run (:meth:`GcOptions.writes_nothing`). A database with a
    separate WAL store is collected through a ``store`` that has it attached
    (:func:`slatelib.objstore.with_wal_store`); before anything else the latest manifest's
    WAL tail must be there (:meth:`slatelib.store.wal_store.WalStore.check_tail`).

    Raises:
        See :func:`collect_garbage`.
    """
    try:
        return _run_gc(store, path, options, dry_run=dry_run, backend=backend, clock=clock,
                       on_decision=on_decision)
    finally:
        backend.release()


def _run_gc(
    store: ObjectStore,
    path: str,
    options: GcOptions,
    *,
    dry_run: bool,
    backend: GcBackend,
    clock: Clock,
    on_decision: DecisionSink | None,
) -> GcReport:
    options.check()
    check_db_spelling(path)
    dry_run = dry_run or options.writes_nothing()
    root = DbPaths.of(path).root
    now_ms = clock.now_ms()
    report = GcReport(root, store.url, dry_run, options.min_age_s, now_ms,
                      directories={k.value: p.to_json() for k, p in options.policies().items()},
                      boundary_files_enabled=options.boundary_files_enabled,
                      detach_enabled=options.detach_enabled)
    with report.phase("read_state"):
        # manifest/ is listed once, by the driver: for the manifest decisions and to start
        # probing for the latest version from the newest listed one.
        manifests = LocalBackend().list_dir(store, root, MANIFEST_DIR, 0)
        compactions = read_compactions_state(store, root)
        latest = read_latest_manifest(store, root, _newest_listed(store, root, manifests))
        check_external_dbs(root, latest.value, manifest_id=latest.id)
        WalStore(store, root).check_tail(latest.value, manifest_id=latest.id)
    report.latest_manifest_id = latest.id
    wal = wal_store_of(store)
    report.wal_store = None if wal is None else wal.url
    verdict = destroy_verdict(latest.value, now_ms / 1000, options.db_delete_grace_s)
    if verdict.state is DestroyState.DUE:
        from slatelib.ops.gc.destroy import run_destroy

        # Deleting a whole database is all or nothing: only a run in which every directory
        # of it deletes does it (the WAL fences' default dry run aside: the database and its
        # writers are gone); otherwise it is reported as a dry run.
        partial = (options.dry_kinds(False) | options.disabled_kinds()) - {ObjectKind.WAL_FENCE}
        if partial and not dry_run:
            report.dry_run = True
            report.refused.append(
                "destroy: the database is due for deletion, but GC of "
                f"{', '.join(sorted(k.value for k in partial))} is a dry run or disabled in "
                "this run; it is deleted only by a run in which every directory deletes")
        return run_destroy(store, root, latest, verdict, options, backend=backend, clock=clock,
                           dry_run=dry_run or bool(partial), report=report,
                           on_decision=on_decision)
    if verdict.state is DestroyState.PENDING:
        report.destroy = {"state": verdict.state.value, "reason": verdict.reason}
    if not dry_run:
        with report.phase("read_state"):
            _check_before_expiring(store, root, latest, now_ms)
    with report.phase("expire_checkpoints"):
        live_latest = _expire_checkpoints(store, root, latest, clock, dry_run, report)
    with report.phase("read_state"):
        live = read_live_set(store, root, live_latest)
        if live_latest.id != latest.id and dry_run:
            live = replace(live, note="written when the expired checkpoints are removed")
        check_live_external_dbs(root, live)
    with report.phase("list_and_plan"):
        plan = _plan(store, root, live, compactions, options, now_ms, backend, report, latest.id,
                     manifests, dry_run)
    for d in DIRS:
        report.add_tally(plan.decisions[d].tally())
        if on_decision is not None:
            for decision in plan.decisions[d]:
                on_decision(decision)
    if dry_run:
        if options.detach_enabled:
            _detach(store, root, live, clock, report, dry_run=True)
        return report
    for d in DIRS:
        _delete_kind(store, root, d, plan, options, now_ms, backend, report)
    _collect_cas_records(store, root, options, report)
    if not options.detach_enabled:
        return report
    with report.phase("detach"):
        try:
            fresh = read_latest_manifest(store, root, plan.planned_latest_id)
            fresh_live = read_live_set(store, root, fresh)
            check_live_external_dbs(root, fresh_live)
            _detach(store, root, fresh_live, clock, report, dry_run=options.dry_run)
        except SlateError as exc:
            report.error(f"detach: {exc}")
    return report


# A two-phase write's steps 1 and 2 (temporary object, then intent record) are never further
# apart than this in practice; collect() deletes unnamed temporary objects older than it.
CAS_COLLECT_MIN_AGE_S = 3600.0


def _collect_cas_records(store: ObjectStore, root: str, options: GcOptions,
                         report: GcReport) -> None:
    """On a store whose conditional writes go through two-phase CAS, sweep what crashed
    writers left below the database (docs/rfcs/0012-two-phase-cas.md): incomplete intents
    are finished or rolled back, committed records whose object is gone are dropped, and
    orphaned temporary objects are deleted, all older than the largest of the GC's min ages
    and an hour. Deleting objects already dropped their records; this is only the crash
    residue. A failure is an error of the run, not a reason to stop it."""
    from slatelib.objstore import main_store_of
    from slatelib.objstore.two_phase import TwoPhaseObjectStore

    store = main_store_of(store)
    if not isinstance(store, TwoPhaseObjectStore):
        return
    min_age_s = max([CAS_COLLECT_MIN_AGE_S, options.min_age_s,
                     *(p.min_age_s for p in options.policies().values())])
    with report.phase("cas_collect"):
        try:
            done = store.collect(min_age_s, prefix=root)
        except SlateError as exc:
            report.error(f"cas collect: {exc}")
            return
    report.cas_collect = {"finished": done.finished, "rolled_back": done.rolled_back,
                          "records_deleted": done.records_deleted,
                          "temps_deleted": done.temps_deleted, "min_age_s": int(min_age_s)}


def check_live_external_dbs(root: str, live: LiveSet) -> None:
    """Check the ``external_dbs`` of every live manifest (GC follows them to release and
    detach parents, and their SSTs are kept out of this database's deletions).

    Raises:
        CorruptObjectError: an unsafe path (:mod:`slatelib.core.external_dbs`).
    """
    for mid, m in sorted(live.manifests().items()):
        check_external_dbs(root, m, manifest_id=mid)


def _check_before_expiring(store: ObjectStore, root: str, latest: Versioned[Manifest],
                           now_ms: int) -> None:
    """Before the first write of a real run (removing expired checkpoints), read and check
    the live set that write leaves, so that a refusal leaves the database untouched."""
    kept, expired = without_expired_checkpoints(latest.value, now_ms / 1000)
    if expired:
        check_live_external_dbs(root, read_live_set(store, root, Versioned(latest.id, kept)))


def _expire_checkpoints(store: ObjectStore, root: str, latest: Versioned[Manifest], clock: Clock,
                        dry_run: bool, report: GcReport) -> Versioned[Manifest]:
    if dry_run:
        kept, expired = without_expired_checkpoints(latest.value, clock.now_ms() / 1000)
        report.expired_checkpoints = [f"would remove {c.id}" for c in expired]
        # A real run writes the next version without them; plan as if it had.
        return Versioned(latest.id + 1, kept) if expired else latest
    _, removed = remove_expired_checkpoints(store, root, clock, current=latest)
    report.expired_checkpoints = [str(c.id) for c in removed]
    fresh = read_latest_manifest(store, root, latest.id)
    if fresh.id < latest.id:
        raise ConflictError(f"{root}: latest manifest went back from {latest.id} to {fresh.id}")
    return fresh


def _newest_listed(store: ObjectStore, root: str, manifests: LocalListing) -> int | None:
    boundary, _, _ = read_boundary(store, boundary_path(root, MANIFEST_DIR))
    ids = [c.id for c in (classify(root, p, s) for p, s, _ in manifests.rows)
           if c.kind is ObjectKind.MANIFEST and c.id is not None and c.id > boundary]
    return max(ids, default=None)


def _plan(store: ObjectStore, root: str, live: LiveSet, compactions: CompactionsState,
          options: GcOptions, now_ms: int, backend: GcBackend, report: GcReport,
          read_latest_id: int, manifests: LocalListing, whole_dry_run: bool) -> _Plan:
    refs = referenced_ssts(live)
    rules = build_rules(root, live, compactions, now_ms=now_ms, options=options,
                        whole_dry_run=whole_dry_run)
    listings: dict[str, object] = {
        MANIFEST_DIR: manifests,
        COMPACTIONS_DIR: LocalBackend().list_dir(store, root, COMPACTIONS_DIR, 0),
    }
    for d, hint in ((WAL_DIR, live.latest.wal_id_last_seen + 1), (COMPACTED_DIR, now_ms)):
        listings[d] = backend.list_dir(store, root, d, hint)
        report.listing[d] = backend.describe(listings[d])
    problem = None
    missing = backend.unlisted(listings[COMPACTED_DIR], own_referenced_ssts(live))
    if missing:
        problem = _confirm_listing_problem(store, root, missing, live.latest_id)
    decisions = {d: backend.decide(listings[d], rules, refs) for d in DIRS}
    for d in (MANIFEST_DIR, COMPACTIONS_DIR):
        target = decisions[d].max_delete_id()
        current, _, _ = read_boundary(store, boundary_path(root, d))
        report.boundaries[d] = {"before": current, "target": (
            max(current, target or 0) if options.boundary_files_enabled else current)}
    if problem is not None:
        report.refused.append(f"compacted: {problem}")
    elif rules.compacted.blocked is not None:
        report.refused.append(f"compacted: {rules.compacted.blocked}")
    elif rules.compacted.low_watermark_ms == 0:
        report.refused.append(f"compacted: {rules.compacted.low_watermark_why}")
    elif rules.compacted.newest_l0_ms == 0:
        report.refused.append(f"compacted: {rules.compacted.newest_l0_why}")
    if problem is not None:
        rules = build_rules(root, live, compactions, now_ms=now_ms, options=options,
                            compacted_block=problem, whole_dry_run=whole_dry_run)
        decisions = {d: backend.decide(listings[d], rules, refs) for d in DIRS}
    return _Plan(rules, refs, listings, decisions, read_latest_id)


def _confirm_listing_problem(store: ObjectStore, root: str, missing: list[Ulid],
                             known_id: int) -> str | None:
    """SSTs the manifest referenced but the listing lacked: a concurrent GC may have
    deleted them legitimately in between; otherwise the listing cannot be trusted (wrong
    prefix, stale, differently encoded) or the database has lost SSTs."""
    fresh = read_latest_manifest(store, root, known_id)
    still = sorted(set(missing) & own_referenced_ssts(read_live_set(store, root, fresh)))
    if not still:
        return None
    paths = DbPaths.of(root)
    present = []
    for sid in still[:10]:
        try:
            store.head(paths.compacted(sid))
            present.append(sid)
        except ObjectMissingError:
            pass
    sample = ", ".join(ulid_to_str(s) for s in still[:3])
    if present:
        return (f"{len(still)} SSTs referenced by the live manifests exist but are missing from "
                f"the listing of {paths.compacted_dir}/ (e.g. {sample}): the listing is stale or "
                "spelled differently from the manifest's paths, so nothing in compacted/ is deleted")
    return (f"{len(still)} SSTs referenced by the live manifests do not exist (e.g. {sample}): "
            "the database has lost data; nothing in compacted/ is deleted until it is repaired")


def fresh_rules(store: ObjectStore, root: str, options: GcOptions, now_ms: int,
                planned: GcRules, min_latest_id: int) -> tuple[GcRules, dict[Ulid, str]]:
    """Rules and references from a fresh read (compactor state first, then manifests), with
    the planned refusals carried over. Every checkpoint counts, expired or not.

    Raises:
        ConflictError: the latest manifest is older than the one the plan was made from.
        ManifestMissingError / CorruptObjectError: as when planning.
    """
    compactions = read_compactions_state(store, root)
    latest = read_latest_manifest(store, root, min_latest_id)
    if latest.id < min_latest_id:
        raise ConflictError(f"{root}: latest manifest is {latest.id}, older than the "
                            f"{min_latest_id} GC planned with; nothing deleted")
    live = read_live_set(store, root, latest)
    check_live_external_dbs(root, live)
    rules = build_rules(root, live, compactions, now_ms=now_ms, options=options,
                        compactions_block=planned.compactions.blocked,
                        compacted_block=planned.compacted.blocked)
    return rules, referenced_ssts(live)


def _delete_kind(store: ObjectStore, root: str, d: str, plan: _Plan, options: GcOptions,
                 now_ms: int, backend: GcBackend, report: GcReport) -> None:
    decisions = plan.decisions[d]
    if not any(action == "delete" for (_, action) in decisions.tally()):
        return
    with report.phase(f"delete_{d}"):
        try:
            if d in (MANIFEST_DIR, COMPACTIONS_DIR) and options.boundary_files_enabled:
                target = decisions.max_delete_id()
                assert target is not None
                before, after = advance_boundary(store, boundary_path(root, d), target)
                report.boundaries[d] = {"before": before, "after": after}
            rules, refs = fresh_rules(store, root, options, now_ms, plan.rules,
                                      plan.planned_latest_id)
            report.add_deleted(backend.execute(store, decisions, rules, refs))
        except SlateError as exc:
            log.error("gc failed [root=%s, kind=%s, error=%s]", root, d, exc)
            report.error(f"{d}: {exc}")


def _detach(store: ObjectStore, root: str, live: LiveSet, clock: Clock, report: GcReport,
            *, dry_run: bool) -> None:
    detachable = plan_detach(live)
    done: set[uuid.UUID] = set()
    for ext in detachable:
        assert ext.final_checkpoint_id is not None
        entry = {"parent": ext.path, "final_checkpoint_id": str(ext.final_checkpoint_id)}
        if dry_run:
            report.detached.append({**entry, "status": "would detach"})
            continue
        try:
            released = release_checkpoint(store, ext.path, ext.final_checkpoint_id, clock)
        except SlateError as exc:
            report.error(f"detach from {ext.path!r}: releasing checkpoint "
                         f"{ext.final_checkpoint_id} failed: {exc}")
            continue
        done.add(ext.final_checkpoint_id)
        report.detached.append({**entry, "status": "detached",
                                "parent_checkpoint": "removed" if released else "already gone"})
    if done:
        drop_external_dbs(store, root, done, clock)
