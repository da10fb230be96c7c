"""The result of one GC run on one database (:class:`GcReport`), as the CLI and the Spark
job print it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from slatelib.core.gc_rules import GcDecision, ObjectKind
from slatelib.core.gc_text import fmt_time
from slatelib.ops.gc.exec import MAX_ERROR_SAMPLES, DeleteTally


@dataclass
class KindTally:
    """Objects and bytes of one kind: listed, kept, planned for deletion, deleted, and how
    many candidates a fresh re-check before deleting kept after all."""

    listed: int = 0
    listed_bytes: int = 0
    kept: int = 0
    kept_bytes: int = 0
    to_delete: int = 0
    to_delete_bytes: int = 0
    deleted: int = 0
    deleted_bytes: int = 0
    kept_on_recheck: int = 0

    def to_json(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass
class GcReport:
    """One database's GC run. ``decisions`` holds every decision when the run kept them
    (single-process runs); the Spark job streams them instead."""

    path: str
    store: str
    dry_run: bool
    min_age_s: float
    now_ms: int
    latest_manifest_id: int | None = None
    kinds: dict[str, KindTally] = field(default_factory=dict)
    expired_checkpoints: list[str] = field(default_factory=list)
    detached: list[dict[str, Any]] = field(default_factory=list)
    boundaries: dict[str, dict[str, int]] = field(default_factory=dict)
    listing: dict[str, dict[str, int]] = field(default_factory=dict)
    destroy: dict[str, Any] | None = None
    refused: list[str] = field(default_factory=list)
    error_count: int = 0
    errors: list[str] = field(default_factory=list)
    phases_s: dict[str, float] = field(default_factory=dict)
    decisions: list[GcDecision] = field(default_factory=list)
    directories: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each kind's resolved options: ``enabled``, ``min_age_s``, ``dry_run``, ``interval_s``."""
    boundary_files_enabled: bool = True
    detach_enabled: bool = True
    cas_collect: dict[str, int] | None = None
    wal_store: str | None = None
    """The URL of the separate WAL store ``wal/`` was collected in (None: the store's own)."""

    def kind(self, kind: ObjectKind | str) -> KindTally:
        return self.kinds.setdefault(str(kind), KindTally())

    def add_tally(self, tally: dict[tuple[str, str], tuple[int, int]]) -> None:
        """Fold in a plan's ``(kind, action) -> (objects, bytes)``."""
        for (kind, action), (n, b) in tally.items():
            t = self.kind(kind)
            t.listed += n
            t.listed_bytes += b
            if action == "delete":
                t.to_delete += n
                t.to_delete_bytes += b
            else:
                t.kept += n
                t.kept_bytes += b

    def add_deleted(self, tally: DeleteTally) -> None:
        for kind, (n, b) in tally.deleted.items():
            t = self.kind(kind)
            t.deleted += n
            t.deleted_bytes += b
        for kind, n in tally.revalidated_kept.items():
            self.kind(kind).kept_on_recheck += n
        for message in tally.errors:
            self.error(message, count=0)
        self.error_count += tally.error_count

    def error(self, message: str, *, count: int = 1) -> None:
        self.error_count += count
        if len(self.errors) < MAX_ERROR_SAMPLES:
            self.errors.append(message)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases_s[name] = round(self.phases_s.get(name, 0.0)
                                        + time.monotonic() - started, 3)

    @property
    def deleted_objects(self) -> int:
        return sum(t.deleted for t in self.kinds.values())

    @property
    def deleted_bytes(self) -> int:
        return sum(t.deleted_bytes for t in self.kinds.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "store": self.store,
            "wal_store": self.wal_store,
            "dry_run": self.dry_run,
            "min_age_s": self.min_age_s,
            "directories": self.directories,
            "boundary_files_enabled": self.boundary_files_enabled,
            "detach_enabled": self.detach_enabled,
            "now": fmt_time(self.now_ms),
            "latest_manifest_id": self.latest_manifest_id,
            "kinds": {k: v.to_json() for k, v in sorted(self.kinds.items())},
            "totals": {
                "to_delete": sum(t.to_delete for t in self.kinds.values()),
                "to_delete_bytes": sum(t.to_delete_bytes for t in self.kinds.values()),
                "deleted": self.deleted_objects,
                "deleted_bytes": self.deleted_bytes,
            },
            "expired_checkpoints": self.expired_checkpoints,
            "detached": self.detached,
            "boundaries": self.boundaries,
            "listing": self.listing,
            "destroy": self.destroy,
            "cas_collect": self.cas_collect,
            "refused": self.refused,
            "error_count": self.error_count,
            "errors": self.errors,
            "phases_s": self.phases_s,
        }
