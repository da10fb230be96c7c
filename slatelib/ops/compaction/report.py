"""``CompactionReport``: what one compaction job did, as a JSON-ready value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slatelib.core.compaction_plan import CompactionSpec, Policy
from slatelib.core.manifest import SstHandle
from slatelib.core.ranges import BytesRange
from slatelib.ids import ulid_to_str
from slatelib.ops.engine import CompactionResult, sum_retention

if TYPE_CHECKING:
    from slatelib.ops.compaction.commit import CommitOutcome
    from slatelib.ops.compaction.run import CompactionJob
    from slatelib.ops.engine import InputView

MB = 1_000_000


@dataclass(frozen=True)
class CompactionReport:
    """The outcome of :func:`slatelib.ops.compaction.run_compaction`.

    ``status`` is ``committed``, ``dry_run`` or ``nothing_to_do``. A segmented database
    may have one compaction per segment in one run: ``compaction_id``, ``destination`` and
    ``bottom`` are then None and ``compactions`` lists each. Byte counts are stored
    (compressed) SST bytes; ``rows_in`` counts input versions read, ``rows_out`` the rows
    written. ``phases_s`` holds seconds per phase (plan, fence, split, execute, commit,
    total) and ``throughput_mb_s`` the input MB per second of execution and of the whole job.
    """

    db: str
    status: str
    policy: str
    compaction_id: str | None = None
    sources: tuple[str, ...] = ()
    destination: int | None = None
    bottom: bool | None = None
    ranges: tuple[str, ...] = ()
    inputs: Mapping[str, Any] = field(default_factory=dict)
    outputs: Mapping[str, Any] = field(default_factory=dict)
    rows_in: int = 0
    rows_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    retention: Mapping[str, int] = field(default_factory=dict)
    tasks: int = 0
    task_runs: int = 0
    rebases: int = 0
    compactor_epoch: int | None = None
    manifest_id: int | None = None
    phases_s: Mapping[str, float] = field(default_factory=dict)
    throughput_mb_s: Mapping[str, float] = field(default_factory=dict)
    compactor: Mapping[str, Any] = field(default_factory=dict)
    peak_task_rss_bytes: int = 0
    task_metrics: tuple[Mapping[str, Any], ...] = ()
    compactions: tuple[Mapping[str, Any], ...] = ()
    """One entry per compaction: one, or one per segment compacted (SlateDB RFC-0024),
    each with its ``segment`` (``(top-level)`` for the top-level tree), sources,
    destination, and once committed its id, outputs and row and byte counts."""
    sst_options: Mapping[str, Any] = field(default_factory=dict)
    execute_breakdown: Mapping[str, Any] = field(default_factory=dict)
    """A committed run's ``execute`` phase: the tasks' time and where the rest went
    (:func:`slatelib.ops.compaction.breakdown.execute_breakdown`)."""
    reason: str | None = None
    """Why nothing was compacted (``nothing_to_do``), for the headline."""
    """The output SSTs' block size, codec, ``min_filter_keys`` and filter policies, each
    with its origin (``set``, ``database (<SST id>)`` or ``default``); with segments whose
    compactions differ, ``by_segment`` too."""

    def to_dict(self) -> dict[str, Any]:
        out = {k: (list(v) if isinstance(v, tuple) else (dict(v) if isinstance(v, Mapping)
                                                          else v))
               for k, v in self.__dict__.items()}
        out["versions_dropped"] = self.retention.get("versions_dropped", 0)
        out["tombstones_dropped"] = self.retention.get("tombstones_dropped", 0)
        return out


    def summary(self) -> CompactionSummary:
        """The figures of this run that a caller embedding it in its own report keeps
        (a rescale target's compaction)."""
        return CompactionSummary(
            status=self.status, compaction_id=self.compaction_id, inputs=dict(self.inputs),
            tasks=self.tasks, rows_in=self.rows_in, rows_out=self.rows_out,
            bytes_in=self.bytes_in, bytes_out=self.bytes_out,
            compactor_epoch=self.compactor_epoch, manifest_id=self.manifest_id,
            phases_s=dict(self.phases_s), outputs=int(self.outputs.get("count", 0)))


@dataclass(frozen=True)
class CompactionSummary:
    """A compaction run in brief (:meth:`CompactionReport.summary`): its status, id, inputs,
    task, row and byte counts, epoch, manifest, phases and the number of output SSTs."""

    status: str
    compaction_id: str | None
    inputs: Mapping[str, Any]
    tasks: int
    rows_in: int
    rows_out: int
    bytes_in: int
    bytes_out: int
    compactor_epoch: int | None
    manifest_id: int | None
    phases_s: Mapping[str, float]
    outputs: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``outcome`` (the status), then the other fields by name."""
        return {"outcome": self.status, "compaction_id": self.compaction_id,
                "inputs": dict(self.inputs), "tasks": self.tasks, "rows_in": self.rows_in,
                "rows_out": self.rows_out, "bytes_in": self.bytes_in,
                "bytes_out": self.bytes_out, "compactor_epoch": self.compactor_epoch,
                "manifest_id": self.manifest_id, "phases_s": dict(self.phases_s),
                "outputs": self.outputs}


def _round(timing: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in timing.items()}


def _spec_fields(specs: Sequence[CompactionSpec]) -> dict[str, Any]:
    """The top-level fields: every source; the destination and bottom of the only
    compaction (None when a segmented database had several)."""
    if not specs:
        return {}
    only = specs[0] if len(specs) == 1 else None
    return {"sources": tuple(str(s) for spec in specs for s in spec.sources),
            "destination": None if only is None else only.destination,
            "bottom": None if only is None else only.bottom}


def _compaction_entry(spec: CompactionSpec, ranges: Sequence[BytesRange],
                      compaction_id: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"segment": spec.segment_label}
    if compaction_id is not None:
        entry["compaction_id"] = compaction_id
    entry.update({"sources": [str(s) for s in spec.sources], "destination": spec.destination,
                  "bottom": spec.bottom, "ranges": len(ranges),
                  "inputs": {"l0_views": len(spec.l0_views), "sorted_runs": len(spec.runs),
                             "ssts": len(spec.views())}})
    return entry


def plan_report(db: str, policy: Policy, specs: Sequence[CompactionSpec],
                ranges: Sequence[Sequence[BytesRange]], *, dry_run: bool,
                timing: Mapping[str, float],
                compactor: Mapping[str, Any] | None = None,
                reason: str | None = None) -> CompactionReport:
    """The report of a dry run, or of a run that found nothing to compact (``ranges[i]``:
    the key ranges of ``specs[i]``; ``reason``: why, for the headline)."""
    status = "nothing_to_do" if not specs else "dry_run" if dry_run else "planned"
    inputs: dict[str, Any] = {}
    if specs:
        inputs = {"l0_views": sum(len(s.l0_views) for s in specs),
                  "sorted_runs": sum(len(s.runs) for s in specs),
                  "ssts": sum(len(s.views()) for s in specs)}
    flat = [r for rs in ranges for r in rs]
    return CompactionReport(
        db=db, status=status, policy=policy.value, ranges=tuple(str(r) for r in flat),
        inputs=inputs, phases_s=_round(timing), tasks=len(flat), **_spec_fields(specs),
        compactor=dict(compactor or {}),
        compactions=tuple(_compaction_entry(s, r) for s, r in zip(specs, ranges, strict=True)),
        reason=reason if not specs else None,
    )


def _throughput(bytes_in: int, timing: Mapping[str, float]) -> dict[str, float]:
    out = {}
    for phase in ("execute", "total"):
        s = timing.get(phase, 0.0)
        if s > 0:
            out[phase] = round(bytes_in / MB / s, 2)
    return out


@dataclass(frozen=True)
class ExecutedPart:
    """What one compaction of a job (``job.specs[i]``) read and produced."""

    views: Sequence[InputView]
    ranges: Sequence[BytesRange]
    results: Sequence[CompactionResult]

    @property
    def outputs(self) -> list[SstHandle]:
        return [h for r in sorted(self.results, key=lambda r: r.index) for h in r.outputs]


def build_report(db: str, job: CompactionJob, parts: Sequence[ExecutedPart],
                 outcome: CommitOutcome, task_runs: int,
                 timing: Mapping[str, float]) -> CompactionReport:
    """The report of a committed job (``parts[i]``: what ``job.specs[i]`` did)."""
    specs = job.specs
    results = [r for p in parts for r in p.results]
    views = [v for p in parts for v in p.views]
    ranges = [r for p in parts for r in p.ranges]
    outputs = [h for p in parts for h in p.outputs]
    retention = sum_retention(list(results))
    bytes_in = sum(r.metrics.bytes_in for r in results)
    bytes_out = sum(r.metrics.bytes_out for r in results)
    entries = []
    for spec, cid, part in zip(specs, job.compaction_ids, parts, strict=True):
        entry = _compaction_entry(spec, part.ranges, ulid_to_str(cid))
        entry["outputs"] = {"ssts": [ulid_to_str(h.id) for h in part.outputs],
                            "count": len(part.outputs)}
        for key in ("rows_in", "rows_out", "bytes_in", "bytes_out"):
            entry[key] = sum(getattr(r.metrics, key) for r in part.results)
        entries.append(entry)
    return CompactionReport(
        db=db, status="committed", policy=specs[0].policy.value,
        compaction_id=ulid_to_str(job.compaction_id) if len(specs) == 1 else None,
        ranges=tuple(str(r) for r in ranges),
        inputs={"l0_views": sum(len(s.l0_views) for s in specs),
                "sorted_runs": sum(len(s.runs) for s in specs),
                "ssts": len(views), "estimated_bytes": sum(v.size for v in views)},
        outputs={"ssts": [ulid_to_str(h.id) for h in outputs], "count": len(outputs)},
        rows_in=retention.rows_in, rows_out=retention.rows_out, bytes_in=bytes_in,
        bytes_out=bytes_out, retention=retention.as_dict(), tasks=len(results),
        task_runs=task_runs, rebases=outcome.rebases, compactor_epoch=job.claim.epoch,
        manifest_id=outcome.manifest.id, phases_s=_round(timing),
        throughput_mb_s=_throughput(bytes_in, timing),
        peak_task_rss_bytes=max((r.metrics.peak_rss_bytes for r in results), default=0),
        task_metrics=tuple(_task_dict(r) for r in sorted(results, key=lambda r: r.index)),
        compactions=tuple(entries),
        **_spec_fields(specs),
    )


def _task_dict(r: CompactionResult) -> dict[str, Any]:
    m = r.metrics
    return {"task": r.index, "attempt": r.attempt, "rows_in": m.rows_in,
            "rows_out": m.rows_out, "bytes_in": m.bytes_in, "bytes_out": m.bytes_out,
            "ssts_in": m.ssts_in, "ssts_out": len(r.outputs), "read_s": m.read_s,
            "merge_s": m.merge_s, "write_s": m.write_s, "total_s": m.total_s,
            "cpu_s": m.cpu_s,
            "peak_rss_bytes": m.peak_rss_bytes}
