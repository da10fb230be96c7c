"""The figures ``bench_compaction.py`` derives from its runs: pure functions over the
compaction job's per-database report and the measured seconds, no I/O.

- :func:`execute_breakdown`: the tasks' time against ``execute`` (the report's own
  ``execute_breakdown`` when it has one, else computed from ``task_metrics``);
- :func:`job_figures`: one job's total, wall, breakdown and MB/s per core;
- :func:`median_figures`: medians over a set of jobs;
- :func:`summary_rows` / :func:`targets`: the RESULTS.md top-table rows and the issue's
  targets (informational PASS/MISS).

MB/s per core is input (stored, compressed where the database is) bytes per task
CPU-second; for compressed variants the uncompressed keys' and values' bytes per CPU-second
are given too.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

MB = 1_000_000
GB = 1_000_000_000
TARGET_RATIO = 5.0
TARGET_OVERHEAD_SHARE = 0.15
TARGET_MB_S_PER_CORE = 400.0


def execute_breakdown(db: Mapping[str, Any]) -> dict[str, Any]:
    """``execute_s``, ``tasks_s``, ``task_share``, ``overhead_s``, ``overhead_share`` (and
    ``parts_s`` when reported) of one job. Taken from the report's ``execute_breakdown``
    when present (``computed``: False); otherwise ``tasks_s`` is the slowest task's
    ``total_s`` and ``computed`` is True."""
    reported = db.get("execute_breakdown")
    if isinstance(reported, Mapping) and "execute_s" in reported and "tasks_s" in reported:
        out = dict(reported)
        out["computed"] = False
        execute_s, tasks_s = float(out["execute_s"]), float(out["tasks_s"])
        out.setdefault("task_share", tasks_s / execute_s if execute_s else 0.0)
        out.setdefault("overhead_s", execute_s - tasks_s)
        out.setdefault("overhead_share",
                       float(out["overhead_s"]) / execute_s if execute_s else 0.0)
        return out
    execute_s = float(db.get("phases_s", {}).get("execute", 0.0))
    tasks_s = max((float(m.get("total_s", 0.0)) for m in db.get("task_metrics", ())),
                  default=0.0)
    overhead_s = max(0.0, execute_s - tasks_s)
    return {"execute_s": execute_s, "tasks_s": tasks_s,
            "task_share": tasks_s / execute_s if execute_s else 0.0,
            "overhead_s": overhead_s,
            "overhead_share": overhead_s / execute_s if execute_s else 0.0,
            "computed": True}


def job_figures(db: Mapping[str, Any], wall_s: float, logical_bytes: int = 0
                ) -> dict[str, Any]:
    """One job's figures: ``total_s`` (the report's ``phases_s["total"]``), ``wall_s`` (of
    ``run()``), the :func:`execute_breakdown`, the tasks' CPU and busy seconds summed, and
    MB/s per core = input bytes / the tasks' summed ``cpu_s`` (``mb_s_per_core``) and /
    their summed ``total_s`` (``mb_s_per_task_s``); with ``logical_bytes`` (the keys' and
    values' bytes, uncompressed), those over the CPU seconds too
    (``logical_mb_s_per_core``)."""
    metrics = list(db.get("task_metrics", ()))
    cpu_s = sum(float(m.get("cpu_s", 0.0)) for m in metrics)
    busy_s = sum(float(m.get("total_s", 0.0)) for m in metrics)
    bytes_in = int(db.get("bytes_in", 0))
    phases = dict(db.get("phases_s", {}))
    return {
        "total_s": float(phases.get("total", wall_s)), "wall_s": wall_s,
        "phases_s": phases, "bytes_in": bytes_in, "tasks": int(db.get("tasks", len(metrics))),
        "rows_in": db.get("rows_in"), "rows_out": db.get("rows_out"),
        "breakdown": execute_breakdown(db),
        "task_cpu_s": cpu_s, "task_busy_s": busy_s,
        "mb_s_per_core": bytes_in / MB / cpu_s if cpu_s else 0.0,
        "mb_s_per_task_s": bytes_in / MB / busy_s if busy_s else 0.0,
        "logical_mb_s_per_core": logical_bytes / MB / cpu_s if cpu_s else 0.0,
        "task_phases": [{k: m.get(k) for k in ("read_s", "merge_s", "write_s", "total_s",
                                               "cpu_s", "bytes_in")} for m in metrics],
    }


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def median_figures(jobs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Medians over ``jobs`` (each a :func:`job_figures`)."""
    def med(f: Any) -> float:
        return round(_median([f(j) for j in jobs]), 4)

    return {
        "total_s": med(lambda j: j["total_s"]), "wall_s": med(lambda j: j["wall_s"]),
        "execute_s": med(lambda j: j["breakdown"]["execute_s"]),
        "tasks_s": med(lambda j: j["breakdown"]["tasks_s"]),
        "task_share": med(lambda j: j["breakdown"]["task_share"]),
        "overhead_share": med(lambda j: j["breakdown"]["overhead_share"]),
        "mb_s_per_core": med(lambda j: j["mb_s_per_core"]),
        "mb_s_per_task_s": med(lambda j: j["mb_s_per_task_s"]),
        "logical_mb_s_per_core": med(lambda j: j.get("logical_mb_s_per_core", 0.0)),
        "breakdown_computed": any(j["breakdown"]["computed"] for j in jobs),
        "overhead_shares": [round(j["breakdown"]["overhead_share"], 4) for j in jobs],
    }


def pair_ratios(official_s: Sequence[float], ours_s: Sequence[float]) -> list[float]:
    """Official seconds over ours, round by round (alternating rounds)."""
    return [round(o / u, 2) if u else 0.0 for o, u in zip(official_s, ours_s, strict=False)]


def targets(results: Mapping[str, Any]) -> list[tuple[str, bool, str]]:
    """The issue's targets: (name, met, figure) for W1's ratio (>= 5x, the median and the
    worst round), W1's overhead (<= 15% of execute) and MB/s per core (>= 400 for W1)."""
    w1 = results["w1"]
    ours = w1["ours"]
    out = [
        (f"W1 ratio >= {TARGET_RATIO:g}x (median)", w1["ratio"] >= TARGET_RATIO,
         f"{w1['ratio']:.2f}x"),
        (f"W1 ratio >= {TARGET_RATIO:g}x (every round)", min(w1["round_ratios"]) >= TARGET_RATIO,
         f"worst round {min(w1['round_ratios']):.2f}x"),
        (f"W1 overhead <= {TARGET_OVERHEAD_SHARE:.0%} of execute",
         ours["overhead_share"] <= TARGET_OVERHEAD_SHARE, f"{ours['overhead_share']:.1%}"),
    ]
    core = (results.get("core") or {}).get("W1") or {}
    if "mb_per_cpu_s" in core:  # the figure: decode, merge and encode, no storage
        out.append((f"W1 decode+merge+encode >= {TARGET_MB_S_PER_CORE:g} MB/s per core "
                    "(one task alone, bench_core)",
                    core["mb_per_cpu_s"] >= TARGET_MB_S_PER_CORE,
                    f"{core['mb_per_cpu_s']:.0f} MB/s"))
    out.append((f"W1 >= {TARGET_MB_S_PER_CORE:g} MB/s per core in the job, with local file "
                "I/O (informational)",
                ours["mb_s_per_core"] >= TARGET_MB_S_PER_CORE, f"{ours['mb_s_per_core']:.0f} MB/s"))
    for codec, c in results.get("codecs", {}).items():
        out.append((f"{codec} >= {TARGET_MB_S_PER_CORE:g} MB/s per core (informational)",
                    c["ours"]["mb_s_per_core"] >= TARGET_MB_S_PER_CORE,
                    f"{c['ours']['mb_s_per_core']:.0f} MB/s"))
    return out


def summary_rows(results: Mapping[str, Any], date: str, command: str) -> list[str]:
    """The RESULTS.md top-table rows (``| benchmark | latest ratio against official | date |
    command |``) for this run."""
    w1 = results["w1"]
    ours = w1["ours"]
    rounds = ", ".join(f"{r:.2f}x" for r in w1["round_ratios"])
    src = " (computed from task_metrics)" if ours["breakdown_computed"] else ""
    rows = [
        ("Compaction W1 (job total)",
         f"**{w1['ratio']:.2f}x** the official compactor (median of {len(w1['round_ratios'])} "
         f"alternating rounds: {rounds}); ours {ours['total_s']:.2f} s, official "
         f"{w1['official_s']:.2f} s (target 5x)"
         + (f"; free cores before/after {results['free_cores'][0]}/{results['free_cores'][1]}"
            if results.get("free_cores") else "")),
        ("Compaction W1 tasks' share of execute",
         f"overhead **{ours['overhead_share']:.0%}** of `execute`, tasks "
         f"{ours['task_share']:.0%} (medians; the reports' `overhead_share` per job: "
         f"{', '.join(f'{x:.1%}' for x in ours.get('overhead_shares', []))}; execute "
         f"{ours['execute_s']:.2f} s, tasks {ours['tasks_s']:.2f} s){src} (target <= 15%)"),
    ]
    per_core = [f"W1 **{ours['mb_s_per_core']:.0f}**"]
    for codec, c in results.get("codecs", {}).items():
        per_core.append(f"{codec} **{c['ours']['mb_s_per_core']:.0f}** (uncompressed "
                        f"{c['ours'].get('logical_mb_s_per_core', 0):.0f}; job "
                        f"{c['ratio']:.2f}x official)")
    core = results.get("core") or {}
    w1_core = core.get("W1") or {}
    lead = (f"decode, merge and encode of one W1 task alone: **{w1_core['mb_per_cpu_s']:.0f}** "
            "MB/s per CPU-second (target 400); " if "mb_per_cpu_s" in w1_core else "")
    extra = f"; one task alone (bench_core): {core['summary']}" if core.get("summary") else ""
    rows.append(("Compaction MB/s per core (W1 / lz4 / zstd)",
                 lead + "in the job, with local file reads and writes: "
                 + " / ".join(per_core) + " MB/s per task CPU-second" + extra))
    s3 = results.get("s3")
    if s3:
        rows.append(("Compaction on S3 (MB/s, requests per GB)",
                     f"moto S3, {s3['input_mb']:.0f} MB: ours {s3['ours_mb_s']:.1f} MB/s, "
                     f"official {s3['official_mb_s']:.1f} MB/s: **{s3['ratio']:.2f}x**; "
                     f"requests per GB ours {s3['ours_requests_per_gb']:.0f}, official "
                     f"{s3['official_requests_per_gb']:.0f}"))
    return [f"| {name} | {text} | {date} | `{command}` |" for name, text in rows]
