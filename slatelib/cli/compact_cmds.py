"""``slate compact``: run one compaction in this process (threads), print its report.

For small databases and tests; large ones go through ``spark-submit jobs/compact.py``,
which runs the same plan on Spark executors.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from slatelib.flags import add_compaction_args, parse_positive, parse_sources
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction

if TYPE_CHECKING:
    from slatelib.cli.app import Context


def cmd_compact(ctx: Context) -> None:
    args = ctx.args
    parallelism = parse_positive(args.parallelism, "--parallelism")
    report = run_compaction(
        ctx.db_path, ctx.store, settings=ctx.settings, policy=args.policy,
        sources=parse_sources(args.sources),
        max_sst_size=parse_positive(args.max_sst_size, "--max-sst-size", size=True),
        parallelism=parallelism, dry_run=args.dry_run, takeover=args.takeover,
        runner=ThreadTaskRunner(parallelism or ctx.settings.compaction.parallelism or None),
    )
    ctx.emit(report.to_dict())


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compact", help="compact the database in this process (threads)")
    add_compaction_args(p)
    p.set_defaults(func=cmd_compact)
