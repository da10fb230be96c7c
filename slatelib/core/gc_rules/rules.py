"""What a GC run may do (:class:`GcOptions`) and everything that decides one database's
objects (:class:`GcRules`, built by :mod:`slatelib.core.gc_plan`). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from slatelib.core.gc_rules.decision import Action
from slatelib.core.gc_text import fmt_age, fmt_seconds
from slatelib.errors import InvalidArgumentError

DEFAULT_MIN_AGE_S = 300.0
"""0.17.0's ``DEFAULT_MIN_AGE`` (5 minutes); also the floor below which a run needs force."""

Verdict = tuple[Action, str]
"""What the rule of one kind says about an object: the action and its reason."""


@dataclass(frozen=True)
class GcOptions:
    """What a GC run may do. Durations are seconds.

    ``min_age_s`` below ``min_age_floor_s`` (default 5 minutes, 0.17's default ``min_age``)
    is refused unless ``force`` is set. ``wal_fence_dry_run`` keeps zero-byte WAL fences,
    as 0.17 does by default (deleting a fence that a stalled writer still races against can
    lose data). ``db_delete_grace_s`` is how long a soft-destroyed database waits.
    """

    min_age_s: float = DEFAULT_MIN_AGE_S
    force: bool = False
    min_age_floor_s: float = DEFAULT_MIN_AGE_S
    db_delete_grace_s: float = 86400.0
    wal_fence_dry_run: bool = True

    def check(self) -> None:
        """Refuse unsafe options.

        Raises:
            InvalidArgumentError: a negative or non-finite duration, or ``min_age_s`` below
                the floor without ``force``.
        """
        for name in ("min_age_s", "min_age_floor_s", "db_delete_grace_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise InvalidArgumentError(f"gc {name} must be a finite duration >= 0: {value!r}")
        if self.min_age_s < self.min_age_floor_s and not self.force:
            raise InvalidArgumentError(
                f"gc min_age {fmt_seconds(self.min_age_s)} is below the safety floor "
                f"{fmt_seconds(self.min_age_floor_s)}: objects that a writer or compactor has "
                "uploaded but not yet published could be deleted; pass force (--force) to run "
                "with it anyway"
            )

    @property
    def min_age_ms(self) -> int:
        return int(self.min_age_s * 1000)


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


def is_young(rules: GcRules, age_ms: int) -> bool:
    """Whether an object written ``age_ms`` ago is within ``min_age`` (kept: strictly
    older objects may go)."""
    return age_ms <= rules.min_age_ms


def age_text(rules: GcRules, age_ms: int) -> str:
    """The object's age against ``min_age``, as the reasons say it."""
    return f"written {fmt_age(age_ms)} ago (min_age {fmt_age(rules.min_age_ms)})"
