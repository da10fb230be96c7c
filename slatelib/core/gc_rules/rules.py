"""What a GC run may do (:class:`GcOptions`) and everything that decides one database's
objects (:class:`GcRules`, built by :mod:`slatelib.core.gc_plan`). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from slatelib.core.gc_rules.decision import Action, ObjectKind
from slatelib.core.gc_text import fmt_age, fmt_seconds
from slatelib.errors import InvalidArgumentError

DEFAULT_MIN_AGE_S = 300.0
"""0.17.0's ``DEFAULT_MIN_AGE`` (5 minutes); also the floor below which a run needs force."""

Verdict = tuple[Action, str]
"""What the rule of one kind says about an object: the action and its reason."""


GC_KINDS: tuple[ObjectKind, ...] = (
    ObjectKind.MANIFEST, ObjectKind.WAL, ObjectKind.WAL_FENCE, ObjectKind.COMPACTED,
    ObjectKind.COMPACTIONS,
)
"""The kinds with their own options, in 0.17's task order (``manifest_options``,
``wal_options``, ``wal_fence_options``, ``compacted_options``, ``compactions_options``)."""


@dataclass(frozen=True, slots=True)
class DirOptions:
    """One directory's options as given (0.17's ``GarbageCollectorDirectoryOptions`` plus
    ``enabled``): None takes the run's default (:meth:`GcOptions.directory`)."""

    enabled: bool = True
    min_age_s: float | None = None
    dry_run: bool | None = None
    interval_s: float | None = None


@dataclass(frozen=True, slots=True)
class DirPolicy:
    """One directory's resolved options; ``explicit_dry_run``: its dry run was configured
    for the directory itself (or is the WAL fence default), not inherited from the run's
    default ``dry_run``."""

    enabled: bool
    min_age_s: float
    dry_run: bool
    explicit_dry_run: bool
    interval_s: float | None = None

    def to_json(self) -> dict[str, object]:
        return {"enabled": self.enabled, "min_age_s": self.min_age_s, "dry_run": self.dry_run,
                "interval_s": self.interval_s}


@dataclass(frozen=True)
class GcOptions:
    """What a GC run may do. Durations are seconds (docs/rfcs/0013-gc-options.md).

    ``min_age_s`` and ``dry_run`` are the defaults of every directory that does not set its
    own in ``directories`` (kind -> :class:`DirOptions`, 0.17's per-directory options); the
    WAL fence is also a dry run by default when ``wal_fence_dry_run`` is set (true, as in
    0.17: deleting a fence that a stalled writer still races against can lose data). A
    ``min_age`` below ``min_age_floor_s`` (default 5 minutes, 0.17's default) is refused
    unless ``force`` is set. ``db_delete_grace_s`` is how long a soft-destroyed database
    waits. ``boundary_files_enabled`` false (0.17's option for stores without ``If-Match``)
    deletes manifests and compactions files without advancing ``gc/*.boundary`` first.
    ``detach_enabled`` false leaves clones attached (0.17: ``detach_options`` None).
    """

    min_age_s: float = DEFAULT_MIN_AGE_S
    force: bool = False
    min_age_floor_s: float = DEFAULT_MIN_AGE_S
    db_delete_grace_s: float = 86400.0
    wal_fence_dry_run: bool = True
    dry_run: bool = False
    directories: tuple[tuple[ObjectKind, DirOptions], ...] = ()
    boundary_files_enabled: bool = True
    detach_enabled: bool = True

    def directory(self, kind: ObjectKind) -> DirPolicy:
        """The resolved options of one kind's directory."""
        given = dict(self.directories).get(kind, DirOptions())
        fence = kind is ObjectKind.WAL_FENCE
        if given.dry_run is not None:
            dry, explicit = given.dry_run, given.dry_run
        else:
            dry = self.dry_run or (fence and self.wal_fence_dry_run)
            explicit = fence and self.wal_fence_dry_run
        age = self.min_age_s if given.min_age_s is None else given.min_age_s
        return DirPolicy(given.enabled, age, dry, explicit, given.interval_s)

    def policies(self) -> dict[ObjectKind, DirPolicy]:
        return {k: self.directory(k) for k in GC_KINDS}

    def writes_nothing(self) -> bool:
        """Whether every enabled directory is a dry run and detach is too (it follows the
        default ``dry_run``, as 0.17's ``detach_options`` have none): the run then writes
        nothing at all, as a dry run."""
        dirs = [p for p in self.policies().values() if p.enabled]
        return all(p.dry_run for p in dirs) and (self.dry_run or not self.detach_enabled)

    def dry_kinds(self, whole_dry_run: bool) -> frozenset[ObjectKind]:
        """The kinds whose deletable objects are kept and reported as a dry run of their
        directory. In a run that writes, every dry directory; in a dry run of the whole
        database (which reports what a real run would delete), only the directories whose
        dry run is their own (:attr:`DirPolicy.explicit_dry_run`)."""
        return frozenset(k for k, p in self.policies().items()
                         if (p.explicit_dry_run if whole_dry_run else p.dry_run))

    def disabled_kinds(self) -> frozenset[ObjectKind]:
        return frozenset(k for k, p in self.policies().items() if not p.enabled)

    def check(self) -> None:
        """Refuse unsafe options.

        Raises:
            InvalidArgumentError: a negative or non-finite duration, or a ``min_age`` (the
                default or a directory's) below the floor without ``force``.
        """
        for name in ("min_age_s", "min_age_floor_s", "db_delete_grace_s"):
            _check_duration(f"gc {name}", getattr(self, name))
        for kind, given in self.directories:
            if kind not in GC_KINDS:
                raise InvalidArgumentError(f"gc options: no directory options for {str(kind)!r} "
                                           f"(known: {', '.join(GC_KINDS)})")
            for name in ("min_age_s", "interval_s"):
                if getattr(given, name) is not None:
                    _check_duration(f"gc {kind}_options {name}", getattr(given, name))
        if self.force:
            return
        for kind, p in self.policies().items():
            if p.enabled and p.min_age_s < self.min_age_floor_s:
                where = "min_age" if p.min_age_s == self.min_age_s else f"{kind}_options min_age"
                raise InvalidArgumentError(
                    f"gc {where} {fmt_seconds(p.min_age_s)} is below the safety floor "
                    f"{fmt_seconds(self.min_age_floor_s)}: objects that a writer or compactor "
                    "has uploaded but not yet published could be deleted; pass force (--force) "
                    "to run with it anyway"
                )

    @property
    def min_age_ms(self) -> int:
        return int(self.min_age_s * 1000)


def _check_duration(what: str, value: object) -> None:
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value < 0):
        raise InvalidArgumentError(f"{what} must be a finite duration >= 0: {value!r}")


@dataclass(frozen=True, slots=True)
class WalRange:
    """WAL ids ``start <= id < end`` (``end`` None: unbounded) that ``label`` replays."""

    start: int
    end: int | None
    label: str
    detail: str

    def contains(self, wal_id: int) -> bool:
        return wal_id >= self.start and (self.end is None or wal_id < self.end)


@dataclass(frozen=True, slots=True)
class CompactedCutoff:
    """The SlateDB RFC-0029 cutoff of compacted SSTs: ULID time must be before all three limits.

    A limit of 0 (the Unix epoch) means nothing in ``compacted/`` can be deleted; ``blocked``
    refuses deletion in ``compacted/`` outright (unreadable compactions state, a listing that
    disagrees with the manifests).
    """

    min_age_ms: int
    low_watermark_ms: int
    low_watermark_why: str
    newest_l0_ms: int
    newest_l0_why: str
    blocked: str | None = None
    newest_l0_id: int | None = None
    """The SST (or compacted L0 view) that sets ``newest_l0_ms``."""

    @property
    def cutoff_ms(self) -> int:
        return min(self.min_age_ms, self.low_watermark_ms, self.newest_l0_ms)


@dataclass(frozen=True, slots=True)
class SequencedRules:
    """Manifests or compactions files: the latest id, the pinned ids (manifest id -> who
    pins it) and a refusal (e.g. the boundary file cannot be advanced)."""

    latest_id: int | None
    pinned: Mapping[int, str] = field(default_factory=dict)
    blocked: str | None = None


@dataclass(frozen=True, slots=True)
class DestroyRules:
    """A soft-destroyed database past its grace: every object goes, the manifest last."""

    reason: str
    latest_manifest_path: str


@dataclass(frozen=True)
class GcRules:
    """Everything needed to decide any object of one database (small and picklable).

    SST references are not part of the rules: they are joined in per object (a dict
    lookup in-process, a DataFrame join on Spark).
    """

    root: str
    now_ms: int
    min_age_ms: int
    live_summary: str
    latest_label: str
    manifests: SequencedRules
    compactions: SequencedRules
    wal_ranges: tuple[WalRange, ...]
    wal_fence_dry_run: bool
    compacted: CompactedCutoff
    destroy: DestroyRules | None = None
    kind_min_age_ms: tuple[tuple[ObjectKind, int], ...] = ()
    """Per-kind ``min_age`` where it differs from ``min_age_ms``."""
    dry_kinds: frozenset[ObjectKind] = frozenset()
    """Kinds whose directory is a dry run: what the rule would delete is kept."""
    disabled_kinds: frozenset[ObjectKind] = frozenset()
    """Kinds whose GC is disabled: everything is kept."""

    def min_age_for(self, kind: ObjectKind) -> int:
        """``min_age`` (ms) of ``kind``'s directory."""
        return dict(self.kind_min_age_ms).get(kind, self.min_age_ms)


def is_young(rules: GcRules, age_ms: int, kind: ObjectKind) -> bool:
    """Whether an object of ``kind`` written ``age_ms`` ago is within its directory's
    ``min_age`` (kept: strictly older objects may go)."""
    return age_ms <= rules.min_age_for(kind)


def age_text(rules: GcRules, age_ms: int, kind: ObjectKind) -> str:
    """The object's age against its directory's ``min_age``, as the reasons say it."""
    return f"written {fmt_age(age_ms)} ago (min_age {fmt_age(rules.min_age_for(kind))})"
