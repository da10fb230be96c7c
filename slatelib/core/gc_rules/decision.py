"""What GC does with one listed object: its kind, keep or delete, and why. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from slatelib.core.gc_text import fmt_time


class ObjectKind(StrEnum):
    """What a listed object is; the report counts objects and bytes per kind."""

    MANIFEST = "manifest"
    WAL = "wal"
    WAL_FENCE = "wal_fence"
    COMPACTED = "compacted"
    COMPACTIONS = "compactions"
    BOUNDARY = "boundary"
    UNKNOWN = "unknown"


class Action(StrEnum):
    KEEP = "keep"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class GcDecision:
    """What GC does with one object, and why."""

    path: str
    kind: ObjectKind
    action: Action
    reason: str
    size: int
    last_modified_ms: int

    @property
    def deletes(self) -> bool:
        return self.action is Action.DELETE

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action.value, "kind": self.kind.value, "path": self.path,
            "size": self.size, "last_modified": fmt_time(self.last_modified_ms),
            "reason": self.reason,
        }
