"""``RescaleReport``: what a rescale job did (or, dry, would do), as a JSON-ready value; and
the job's report around it (:func:`rescale_report`, in the shape every job shares,
:mod:`slatelib.ops.job_report`) with its headline. Building a report does no I/O (its phases show on the progress output, when one is
installed: :mod:`slatelib.ops.progress`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from slatelib.core.humanize import fmt_bytes, fmt_count, fmt_seconds
from slatelib.exit_codes import EXIT_OK, exit_name
from slatelib.ops.job_report import job_report
from slatelib.ops.progress import start

__all__ = ["RescaleReport", "rescale_headline", "rescale_report"]


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
        """Time the block as phase ``name``; it shows as ``rescale <kind> <name>`` on the
        installed progress output (:mod:`slatelib.ops.progress`; none: nothing shown)."""
        t = time.perf_counter()
        progress = start(f"rescale {self.kind} {name}", unit="")
        progress.update(0)
        try:
            yield
        finally:
            progress.finish()
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


# ------------------------------------------------------------------------- the job's report
ROLE_TOTALS = ("keys", "bytes", "estimated_bytes")
"""A target's fields copied into its database entry and summed into ``totals``."""


def rescale_report(command: str, code: int, result: dict[str, Any], *, seconds: float,
                   dry_run: bool) -> dict[str, Any]:
    """The report of a rescale run: ``result`` is :meth:`RescaleReport.to_dict` with its
    ``status`` as ``outcome``, or ``{"error": ...}``. ``databases`` has one entry per
    source and target, with its ``role``; ``totals`` counts them and sums the targets'
    keys and bytes."""
    databases = [{"db": src.get("path"), "role": "source", "status": exit_name(code)}
                 for src in result.get("sources", [])]
    databases += [{"db": t.get("path"), "role": "target", "status": exit_name(code),
                   **{k: t[k] for k in ROLE_TOTALS if k in t}}
                  for t in result.get("targets", [])]
    totals = {"databases": len(databases), "failed": 0 if code == EXIT_OK else 1,
              "sources": len(result.get("sources", [])),
              "targets": len(result.get("targets", [])),
              **{k: sum(int(d.get(k) or 0) for d in databases)
                 for k in ROLE_TOTALS if any(k in d for d in databases)}}
    return job_report("rescale", code, totals=totals, databases=databases, seconds=seconds,
                      headline=rescale_headline, command=command, dry_run=dry_run,
                      exit_code=code, **result)


def rescale_headline(report: dict[str, Any]) -> str:
    """``split src into 3 databases (10,317 keys, 1.2 MB); validated; 4.1 s`` and the like."""
    secs = fmt_seconds(float(report.get("seconds", 0)))
    command = report.get("command", "rescale")
    if "error" in report:
        err = report["error"]
        return f"{command} failed ({report.get('status')}): {err.get('message')}; {secs}"
    t = report.get("totals", {})
    dbs = report.get("databases", [])
    srcs = [d["db"] for d in dbs if d.get("role") == "source"]
    n = int(t.get("targets", 0))
    target = next((d["db"] for d in dbs if d.get("role") == "target"), "?")
    what = (f"split {srcs[0] if srcs else '?'} into {n} databases" if command == "split"
            else f"merged {len(srcs)} databases into {target}")
    outcome = report.get("outcome")
    if outcome == "dry_run":
        size = f"~{fmt_bytes(t.get('estimated_bytes', 0))}" if "estimated_bytes" in t else ""
        return f"dry run: would {what}" + (
            f" ({size})" if size else "") + f"; nothing written; {secs}"
    size = ", ".join(([f"{fmt_count(int(t['keys']))} keys"] if "keys" in t else [])
                     + ([fmt_bytes(t["bytes"])] if "bytes" in t else []))
    line = what + (f" ({size})" if size else "")
    if outcome == "already_done":
        line += "; already done by an earlier run"
    elif (report.get("validation") or {}).get("ok"):
        line += "; validated"
    return f"{line}; {secs}"
