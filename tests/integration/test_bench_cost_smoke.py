"""Smoke test of ``benchmarks/bench_cost.py`` (``make bench-cost``): its GC comparison at
``--quick`` size, run as the Makefile runs it (a subprocess with its own S3 server and
SparkSession), and the request arithmetic it reports."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_cost import Count  # noqa: E402


def test_count_minus_subtracts_a_baseline_kind_by_kind_never_below_zero() -> None:
    run = Count({"get": 10, "list": 3, "put": 2}, bytes_in=100, bytes_out=50)
    base = Count({"get": 4, "list": 5, "head": 1}, bytes_in=30, bytes_out=80)
    diff = run.minus(base)
    assert {k: v for k, v in diff.requests.items() if v} == {"get": 6, "put": 2}
    assert (diff.total, diff.bytes_in, diff.bytes_out) == (8, 70, 0)
    assert run.scaled(0.5) == {"get": 5.0, "list": 1.5, "put": 1.0}


@pytest.mark.integration
@pytest.mark.spark
def test_bench_cost_quick_gc_counts_batched_deletes(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_cost.py", "--quick", "--only", "gc",
         "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gc: requests per 100k objects collected" in done.stdout
    (gc,) = json.loads(out.read_text())["comparisons"]
    assert gc["comparison"] == "gc" and gc["same_deletion_set"] is True
    deleted = gc["deleted"]
    assert deleted >= 2_000  # the garbage, plus what the base database itself left
    for ours in ("jobs/gc.py", "slate gc"):
        requests = gc[ours]["requests"]
        # batched: DeleteObjects of <= 1000 keys, no single-object DELETEs
        assert requests.get("delete", 0) == 0
        assert math.ceil(deleted / 1000) <= requests["multi_delete"] <= deleted // 100
        assert gc[ours]["total"] == sum(requests.values())
        assert gc[ours]["ratio_to_official"] < 1.0
    # the official GC sends one delete request per object
    official = gc["official"]["requests"]
    assert official.get("delete", 0) + official.get("multi_delete", 0) >= deleted
