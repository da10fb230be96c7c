"""Prometheus metrics (docs/metrics.md): the catalog of every metric
(:mod:`~slatelib.metrics.catalog`), pure family builders from reports, statuses and
database stats (:mod:`~slatelib.metrics.families`), and the I/O shell: textfile,
Pushgateway, ``/metrics`` (:mod:`~slatelib.metrics.output`)."""

from __future__ import annotations

from slatelib.metrics.catalog import METRICS, MetricDef, exposed_name
from slatelib.metrics.families import L0LimitClock, run_families, standing_families
from slatelib.metrics.output import (
    StandingMetrics,
    emit_run_metrics,
    push_run_metrics,
    write_run_textfile,
)

__all__ = ["METRICS", "L0LimitClock", "MetricDef", "StandingMetrics", "emit_run_metrics",
           "exposed_name", "push_run_metrics", "run_families", "standing_families",
           "write_run_textfile"]
