"""Health thresholds over :class:`~slatelib.core.db_stats.DbStats`: which ones a database
crosses (``slate health --max-l0 ...``). Pure.

A threshold is crossed when the value is strictly above the limit (``--max-l0 8`` allows 8
L0 SSTs). A value that is unknown (no checkpoint, so no checkpoint age) crosses nothing,
except that a database that never compacted crosses ``--max-compaction-age`` once it has L0
SSTs waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slatelib.core.db_stats import DbStats
from slatelib.core.gc_text import fmt_seconds
from slatelib.core.humanize import fmt_bytes

__all__ = ["THRESHOLDS", "Breach", "Threshold", "Thresholds", "check_thresholds"]


@dataclass(frozen=True)
class Threshold:
    """One threshold: its flag, the field of :class:`Thresholds` holding the limit, what it
    measures, how the value is read from the stats, and how values are shown."""

    flag: str
    name: str
    what: str
    value: Callable[[DbStats], float | int | None]
    show: Callable[[float], str] = str


def _count(n: float) -> str:
    return f"{int(n):,}"


THRESHOLDS: tuple[Threshold, ...] = (
    Threshold("--max-l0", "max_l0", "L0 SSTs of the deepest tree",
              lambda s: s.l0_ssts_max_tree, _count),
    Threshold("--max-sorted-runs", "max_sorted_runs", "sorted runs of the tree with the most",
              lambda s: s.sorted_runs_max_tree, _count),
    Threshold("--max-manifests", "max_manifests", "manifest versions on storage",
              lambda s: s.manifest_versions, _count),
    Threshold("--max-gc-backlog-bytes", "max_gc_backlog_bytes", "bytes GC could reclaim",
              lambda s: s.gc_reclaimable_bytes, fmt_bytes),
    Threshold("--max-gc-backlog-objects", "max_gc_backlog_objects", "objects GC could reclaim",
              lambda s: s.gc_reclaimable_objects, _count),
    Threshold("--max-checkpoint-age", "max_checkpoint_age_s", "age of the oldest live checkpoint",
              lambda s: s.oldest_checkpoint_age_s, fmt_seconds),
    Threshold("--max-wal-to-replay", "max_wal_to_replay",
              "WAL SSTs after the replay point (a reopen replays them)",
              lambda s: s.wal_ssts_to_replay, _count),
    Threshold("--max-compaction-age", "max_compaction_age_s", "time since the last compaction",
              lambda s: s.last_compaction_age_s, fmt_seconds),
)
"""Every numeric threshold, in the order breaches are reported."""


@dataclass(frozen=True)
class Thresholds:
    """The limits given (None: not checked); ``no_foreign_compactor``: a foreign compactor
    holding the epoch is a breach too."""

    max_l0: int | None = None
    max_sorted_runs: int | None = None
    max_manifests: int | None = None
    max_gc_backlog_bytes: int | None = None
    max_gc_backlog_objects: int | None = None
    max_checkpoint_age_s: float | None = None
    max_wal_to_replay: int | None = None
    max_compaction_age_s: float | None = None
    no_foreign_compactor: bool = False

    def given(self) -> dict[str, Any]:
        """The limits set, by flag (for reports)."""
        out: dict[str, Any] = {t.flag: getattr(self, t.name) for t in THRESHOLDS
                               if getattr(self, t.name) is not None}
        if self.no_foreign_compactor:
            out["--no-foreign-compactor"] = True
        return out


@dataclass(frozen=True)
class Breach:
    """A threshold a database crossed: the flag, the limit, the value and a sentence."""

    flag: str
    limit: float | int | bool
    value: float | int | bool | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.flag, "limit": self.limit, "value": self.value,
                "message": self.message}


def check_thresholds(stats: DbStats, limits: Thresholds) -> list[Breach]:
    """The thresholds ``stats`` crosses, in :data:`THRESHOLDS` order (then the foreign
    compactor)."""
    out: list[Breach] = []
    for t in THRESHOLDS:
        limit = getattr(limits, t.name)
        if limit is None:
            continue
        value = t.value(stats)
        if value is None:
            if t.name == "max_compaction_age_s" and stats.l0_ssts > 0:
                out.append(Breach(t.flag, limit, None,
                                  f"never compacted, with {stats.l0_ssts} L0 SSTs waiting "
                                  f"({t.flag} {t.show(limit)})"))
            continue
        if value > limit:
            out.append(Breach(t.flag, limit, value,
                              f"{t.what} {t.show(value)} > {t.flag} {t.show(limit)}"))
    if limits.no_foreign_compactor and stats.foreign_compactor:
        out.append(Breach("--no-foreign-compactor", True, True,
                          f"a foreign compactor holds epoch {stats.compactor_holder_epoch} "
                          f"({stats.compactor_reason})"))
    return out
