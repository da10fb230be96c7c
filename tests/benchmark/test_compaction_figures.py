"""The arithmetic of ``benchmarks/_compaction_figures.py`` (what ``make bench-compaction``
prints and checks), on hand-made reports: no Spark, no official package, no timing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "_compaction_figures.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_compaction_figures", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_compaction_figures", module)
    spec.loader.exec_module(module)
    return module


F = _load()


def _db(execute: float, total: float, tasks: list[tuple[float, float]],
        bytes_in: int = 400_000_000, **extra: Any) -> dict[str, Any]:
    """A per-database report: ``tasks`` as (total_s, cpu_s) pairs."""
    return {"phases_s": {"execute": execute, "total": total}, "bytes_in": bytes_in,
            "tasks": len(tasks), "rows_in": 10, "rows_out": 10,
            "task_metrics": [{"total_s": t, "cpu_s": c, "read_s": 0.1, "merge_s": 0.2,
                              "write_s": 0.1, "bytes_in": bytes_in // len(tasks)}
                             for t, c in tasks], **extra}


def test_breakdown_is_computed_from_the_slowest_task_when_the_report_has_none() -> None:
    b = F.execute_breakdown(_db(2.0, 2.1, [(1.5, 1.4), (1.2, 1.1)]))
    assert b["computed"] is True
    assert b["tasks_s"] == pytest.approx(1.5)
    assert b["overhead_s"] == pytest.approx(0.5)
    assert b["task_share"] == pytest.approx(0.75)
    assert b["overhead_share"] == pytest.approx(0.25)


def test_breakdown_prefers_the_reports_own() -> None:
    own = {"execute_s": 1.0, "tasks_s": 0.9, "task_share": 0.9, "overhead_s": 0.1,
           "overhead_share": 0.1, "parts_s": {"schedule": 0.05}}
    b = F.execute_breakdown(_db(2.0, 2.1, [(1.5, 1.4)], execute_breakdown=own))
    assert b["computed"] is False
    assert b["overhead_share"] == pytest.approx(0.1)
    assert b["parts_s"] == {"schedule": 0.05}


def test_breakdown_fills_missing_shares_from_the_reports_seconds() -> None:
    b = F.execute_breakdown(_db(2.0, 2.1, [(1.5, 1.4)],
                                execute_breakdown={"execute_s": 2.0, "tasks_s": 1.6}))
    assert b["computed"] is False
    assert b["task_share"] == pytest.approx(0.8)
    assert b["overhead_share"] == pytest.approx(0.2)


def test_mb_s_per_core_divides_input_bytes_by_the_tasks_cpu_and_busy_seconds() -> None:
    j = F.job_figures(_db(2.0, 2.5, [(1.0, 0.5), (1.0, 0.5)]), wall_s=2.6)
    assert j["total_s"] == pytest.approx(2.5)
    assert j["wall_s"] == pytest.approx(2.6)
    assert j["mb_s_per_core"] == pytest.approx(400.0)
    assert j["mb_s_per_task_s"] == pytest.approx(200.0)
    assert j["logical_mb_s_per_core"] == 0.0
    assert F.job_figures(_db(2.0, 2.5, [(1.0, 0.5)]), 2.6, logical_bytes=1_000_000_000
                         )["logical_mb_s_per_core"] == pytest.approx(2000.0)


def test_medians_and_round_ratios() -> None:
    jobs = [F.job_figures(_db(e, t, [(1.0, 1.0)]), wall_s=t) for e, t in
            ((1.0, 1.1), (3.0, 3.3), (2.0, 2.2))]
    med = F.median_figures(jobs)
    assert med["total_s"] == pytest.approx(2.2)
    assert med["breakdown_computed"] is True
    assert med["overhead_shares"] == [0.0, pytest.approx(0.6667, abs=1e-4), 0.5]
    assert F.pair_ratios([5.5, 6.6], [1.1, 2.2]) == [5.0, 3.0]


def _results(ratio: float, rounds: list[float], overhead: float, per_core: float
             ) -> dict[str, Any]:
    ours = {"total_s": 1.0, "wall_s": 1.0, "execute_s": 0.9, "tasks_s": 0.8,
            "task_share": 1 - overhead, "overhead_share": overhead,
            "mb_s_per_core": per_core, "mb_s_per_task_s": per_core,
            "breakdown_computed": False, "overhead_shares": [overhead, overhead + 0.1]}
    return {"w1": {"ratio": ratio, "round_ratios": rounds, "official_s": 5.0, "ours": ours},
            "codecs": {"lz4": {"ratio": 2.0, "ours": {**ours, "mb_s_per_core": 150.0}}}}


def test_targets_pass_only_when_every_round_holds() -> None:
    met = {name: ok for name, ok, _ in F.targets(_results(5.5, [5.2, 4.9, 6.0], 0.1, 450))}
    assert met["W1 ratio >= 5x (median)"] is True
    assert met["W1 ratio >= 5x (every round)"] is False
    assert met["W1 overhead <= 15% of execute"] is True
    assert met["W1 >= 400 MB/s per core in the job, with local file I/O (informational)"]
    assert met["lz4 >= 400 MB/s per core (informational)"] is False
    assert not any("bench_core" in name for name in met)


def test_targets_include_bench_cores_figure_when_it_ran() -> None:
    results = {**_results(5.5, [5.2, 5.6], 0.1, 350), "core": {"W1": {"mb_per_cpu_s": 410.0}}}
    met = {name: ok for name, ok, _ in F.targets(results)}
    assert met["W1 >= 400 MB/s per core in the job, with local file I/O (informational)"] is False
    assert met["W1 decode+merge+encode >= 400 MB/s per core (one task alone, bench_core)"] is True
    rows = F.summary_rows(results, "2026-12-06 18:00", "cmd")
    assert "one W1 task alone: **410** MB/s per CPU-second" in rows[2]


def test_summary_rows_have_the_top_tables_four_columns() -> None:
    rows = F.summary_rows(_results(3.1, [3.0, 3.2], 0.2, 230), "2026-12-06 18:00", "cmd")
    assert len(rows) == 3
    assert all(r.startswith("| ") and r.endswith(" |") and r.count(" | ") == 3 for r in rows)
    assert "**3.10x**" in rows[0]
    assert "**20%**" in rows[1] and "per job: 20.0%, 30.0%" in rows[1]
    assert "W1 **230**" in rows[2] and "lz4 **150**" in rows[2]
