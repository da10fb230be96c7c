"""``RescaleReport``: what a rescale job did (or, dry, would do), as a JSON-ready value."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RescaleReport:
    """Filled in as the job runs; :meth:`to_dict` is the JSON report.

    ``status``: ``done``, ``dry_run`` or ``already_done`` (a rerun of a finished job, with
    the report it recorded under ``recorded``). ``phases_s``: seconds per phase (plan, flush,
    checkpoint, clone, compact, validate, detach, release, total).
    """

    kind: str
    job_id: str | None = None
    status: str = "running"
    sources: list[dict[str, Any]] = field(default_factory=list)
    split_keys: list[str] | None = None
    targets: list[dict[str, Any]] = field(default_factory=list)
    validation: dict[str, Any] = field(default_factory=dict)
    objects_to_write: list[str] = field(default_factory=list)
    resumed: bool = False
    recorded: dict[str, Any] | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.phases_s[name] = round(self.phases_s.get(name, 0.0) + time.perf_counter() - t,
                                        3)

    def target(self, i: int) -> dict[str, Any]:
        return self.targets[i]

    def to_dict(self) -> dict[str, Any]:
        self.phases_s["total"] = round(time.perf_counter() - self.started, 3)
        out: dict[str, Any] = {
            "kind": self.kind, "job_id": self.job_id, "status": self.status,
            "resumed": self.resumed, "sources": self.sources, "targets": self.targets,
        }
        if self.split_keys is not None:
            out["split_keys"] = self.split_keys
        if self.validation:
            out["validation"] = self.validation
        if self.objects_to_write:
            out["objects_to_write"] = self.objects_to_write
        if self.recorded is not None:
            out["recorded"] = self.recorded
        out["phases_s"] = dict(self.phases_s)
        return out
