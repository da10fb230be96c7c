"""``CompactionReport``: what one compaction job did, as a JSON-ready value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slatelib.core.compaction_plan import CompactionSpec, Policy
from slatelib.core.ranges import BytesRange
from slatelib.ids import ulid_to_str
from slatelib.ops.compaction.task import CompactionResult, sum_retention

if TYPE_CHECKING:
    from slatelib.ops.compaction.commit import CommitOutcome
    from slatelib.ops.compaction.plan_io import InputView
    from slatelib.ops.compaction.run import CompactionJob

MB = 1_000_000


@dataclass(frozen=True)
class CompactionReport:
    """The outcome of :func:`slatelib.ops.compaction.run_compaction`.

    ``status`` is ``committed``, ``dry_run`` or ``nothing_to_do``. Byte counts are stored
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
    sst_options: Mapping[str, Any] = field(default_factory=dict)
    """The output SSTs' block size, codec, ``min_filter_keys`` and filter policies, each
    with its origin (``set``, ``database (<SST id>)`` or ``default``)."""

    def to_dict(self) -> dict[str, Any]:
        out = {k: (list(v) if isinstance(v, tuple) else (dict(v) if isinstance(v, Mapping)
                                                          else v))
               for k, v in self.__dict__.items()}
        out["versions_dropped"] = self.retention.get("versions_dropped", 0)
        out["tombstones_dropped"] = self.retention.get("tombstones_dropped", 0)
        return out


def _round(timing: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in timing.items()}


def _spec_fields(spec: CompactionSpec | None) -> dict[str, Any]:
    if spec is None:
        return {}
    return {"sources": tuple(str(s) for s in spec.sources), "destination": spec.destination,
            "bottom": spec.bottom}


def plan_report(db: str, policy: Policy, spec: CompactionSpec | None,
                ranges: Sequence[BytesRange], *, dry_run: bool,
                timing: Mapping[str, float],
                compactor: Mapping[str, Any] | None = None) -> CompactionReport:
    """The report of a dry run, or of a run that found nothing to compact."""
    status = "nothing_to_do" if spec is None else "dry_run" if dry_run else "planned"
    inputs: dict[str, Any] = {}
    if spec is not None:
        inputs = {"l0_views": len(spec.l0_views), "sorted_runs": len(spec.runs),
                  "ssts": len(spec.views())}
    return CompactionReport(
        db=db, status=status, policy=policy.value, ranges=tuple(str(r) for r in ranges),
        inputs=inputs, phases_s=_round(timing), tasks=len(ranges), **_spec_fields(spec),
        compactor=dict(compactor or {}),
    )


def _throughput(bytes_in: int, timing: Mapping[str, float]) -> dict[str, float]:
    out = {}
    for phase in ("execute", "total"):
        s = timing.get(phase, 0.0)
        if s > 0:
            out[phase] = round(bytes_in / MB / s, 2)
    return out


def build_report(db: str, job: CompactionJob, views: Sequence[InputView],
                 ranges: Sequence[BytesRange], results: Sequence[CompactionResult],
                 outcome: CommitOutcome, task_runs: int,
                 timing: Mapping[str, float]) -> CompactionReport:
    """The report of a committed compaction."""
    spec = job.spec
    retention = sum_retention(list(results))
    outputs = [h for r in sorted(results, key=lambda r: r.index) for h in r.outputs]
    bytes_in = sum(r.metrics.bytes_in for r in results)
    bytes_out = sum(r.metrics.bytes_out for r in results)
    return CompactionReport(
        db=db, status="committed", policy=spec.policy.value,
        compaction_id=ulid_to_str(job.compaction_id),
        ranges=tuple(str(r) for r in ranges),
        inputs={"l0_views": len(spec.l0_views), "sorted_runs": len(spec.runs),
                "ssts": len(views), "estimated_bytes": sum(v.size for v in views)},
        outputs={"ssts": [ulid_to_str(h.id) for h in outputs], "count": len(outputs)},
        rows_in=retention.rows_in, rows_out=retention.rows_out, bytes_in=bytes_in,
        bytes_out=bytes_out, retention=retention.as_dict(), tasks=len(results),
        task_runs=task_runs, rebases=outcome.rebases, compactor_epoch=job.claim.epoch,
        manifest_id=outcome.manifest.id, phases_s=_round(timing),
        throughput_mb_s=_throughput(bytes_in, timing),
        peak_task_rss_bytes=max((r.metrics.peak_rss_bytes for r in results), default=0),
        task_metrics=tuple(_task_dict(r) for r in sorted(results, key=lambda r: r.index)),
        **_spec_fields(spec),
    )


def _task_dict(r: CompactionResult) -> dict[str, Any]:
    m = r.metrics
    return {"task": r.index, "attempt": r.attempt, "rows_in": m.rows_in,
            "rows_out": m.rows_out, "bytes_in": m.bytes_in, "bytes_out": m.bytes_out,
            "ssts_in": m.ssts_in, "ssts_out": len(r.outputs), "read_s": m.read_s,
            "merge_s": m.merge_s, "write_s": m.write_s, "total_s": m.total_s,
            "cpu_s": m.cpu_s,
            "peak_rss_bytes": m.peak_rss_bytes}
