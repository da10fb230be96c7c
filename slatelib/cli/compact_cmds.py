"""``slate compact``: run one compaction in this process (threads), print its report.

For small databases and tests; large ones go through ``spark-submit jobs/compact.py``,
which runs the same plan on Spark executors. The JSON report has the shape of the job's
(:mod:`slatelib.ops.job_report`): ``job``, ``status``, ``headline``, ``seconds``,
``dry_run``, ``totals`` and ``databases`` with the one database (its compaction status as
``outcome``), and ``store_requests`` (the object-store requests it made,
docs/request-accounting.md). Ends with the headline on stderr (``compacted 3 L0 (3.9 MB) -> 1 SST
(1.8 MB); 42,772 versions dropped; 1.7 s``).

While it runs, progress (estimated input bytes compacted, rate, ETA) goes to stderr when it
is a terminal, or with ``--progress`` (docs/progress.md).
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from slatelib.cli import output
from slatelib.cli.progress import BytesProgressRunner, add_progress_args, with_progress
from slatelib.exit_codes import EXIT_OK
from slatelib.flags import add_compaction_args, parse_positive, parse_sources
from slatelib.objstore.accounting import JobRequests
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction
from slatelib.ops.job_report import compact_db_fields, compact_report, db_entry

if TYPE_CHECKING:
    from slatelib.cli.app import Context


def cmd_compact(ctx: Context) -> None:
    """``slate compact``: a failure is raised (and reported by ``slate`` with its exit
    code), so a printed report is always a success."""
    args = ctx.args
    parallelism = parse_positive(args.parallelism, "--parallelism")
    started = time.monotonic()
    requests = JobRequests()
    result = run_compaction(
        ctx.db_path, ctx.store, settings=ctx.settings, policy=args.policy,
        sources=parse_sources(args.sources),
        max_sst_size=parse_positive(args.max_sst_size, "--max-sst-size", size=True),
        parallelism=parallelism, dry_run=args.dry_run, takeover=args.takeover,
        runner=BytesProgressRunner(
            ThreadTaskRunner(parallelism or ctx.settings.compaction.parallelism or None),
            label=f"compact {ctx.db_name}"),
    )
    seconds = time.monotonic() - started
    entry = db_entry(ctx.db_name, EXIT_OK, compact_db_fields(result.to_dict()),
                     seconds=seconds)
    report = compact_report(EXIT_OK, [entry], seconds=seconds, dry_run=bool(args.dry_run),
                            store_requests=requests.report())
    ctx.emit(report, table=lambda: output.generic(result.to_dict()))
    ctx.headline(report["headline"])


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compact", help="compact the database in this process (threads)")
    add_compaction_args(p)
    add_progress_args(p)
    p.set_defaults(func=with_progress(cmd_compact))
