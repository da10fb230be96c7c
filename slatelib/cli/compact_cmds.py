"""``slate compact``: run one compaction in this process (threads), print its report.

For small databases and tests; large ones go through ``spark-submit jobs/compact.py``,
which runs the same plan on Spark executors. Ends with a headline on stderr
(``compacted 3 L0 (3.9 MB) → 1 SST(s) (1.8 MB); 42,772 versions dropped; 1.7 s``).
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from slatelib.cli import output
from slatelib.flags import add_compaction_args, parse_positive, parse_sources
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction

if TYPE_CHECKING:
    from slatelib.cli.app import Context


def cmd_compact(ctx: Context) -> None:
    args = ctx.args
    parallelism = parse_positive(args.parallelism, "--parallelism")
    started = time.monotonic()
    report = run_compaction(
        ctx.db_path, ctx.store, settings=ctx.settings, policy=args.policy,
        sources=parse_sources(args.sources),
        max_sst_size=parse_positive(args.max_sst_size, "--max-sst-size", size=True),
        parallelism=parallelism, dry_run=args.dry_run, takeover=args.takeover,
        runner=ThreadTaskRunner(parallelism or ctx.settings.compaction.parallelism or None),
    )
    ctx.emit(report.to_dict())
    ctx.headline(headline(report.to_dict(), time.monotonic() - started))


def headline(r: dict[str, Any], seconds: float) -> str:
    """``compacted 5 L0 + 1 SR (3.9 MB) → 3 SSTs (1.8 MB); 42,772 versions dropped; 1.7 s``."""
    inputs = r.get("inputs") or {}
    parts = []
    if inputs.get("l0_views"):
        parts.append(f"{inputs['l0_views']} L0")
    if inputs.get("sorted_runs"):
        parts.append(f"{inputs['sorted_runs']} sorted run(s)")
    what = " + ".join(parts) or "nothing"
    total = (r.get("phases_s") or {}).get("total", seconds)
    status = r.get("status")
    if status == "nothing_to_do":
        return f"nothing to compact ({r.get('policy')} policy); {output.fmt_seconds(total)}"
    if status != "committed":
        return (f"{status}: would compact {what} ({inputs.get('ssts', 0)} SSTs) in "
                f"{r.get('tasks', 0)} task(s); nothing written; {output.fmt_seconds(total)}")
    outs = (r.get("outputs") or {}).get("count", 0)
    return (f"compacted {what} ({output.fmt_bytes(r.get('bytes_in'))}) → {outs} SST(s) "
            f"({output.fmt_bytes(r.get('bytes_out'))}); "
            f"{output.fmt_count(r.get('versions_dropped', 0))} versions dropped; "
            f"{output.fmt_seconds(total)}")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compact", help="compact the database in this process (threads)")
    add_compaction_args(p)
    p.set_defaults(func=cmd_compact)
