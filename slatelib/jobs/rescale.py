"""Rescale SlateDB databases on Spark: split one into shards by key range, or merge shards.

    spark-submit jobs/rescale.py split --db URL --into N [--at KEY,...] --to TEMPLATE
        [--checkpoint UUID] [--dry-run] [--fence-source | --allow-live-source] [--live-window DURATION]
        [--parallelism N] [--store-root URL] [--conf FILE ...] [--report FILE] [-v]
    spark-submit jobs/rescale.py merge --source URL --source URL [...] --to URL [same options]

``--to`` of a split is a URL template with ``{i}`` (0 .. N-1), e.g.
``s3://bucket/tenants/db-{i}``; every database must lie in the source's store. Keys are
text, or ``hex:6b6579`` for binary keys. Without ``--at`` the split keys balance the
source's bytes (from the SST block indexes).

The job is thin over :mod:`slatelib.ops.rescale` (:func:`split_database`,
:func:`merge_databases`; the report: :func:`slatelib.ops.rescale.report.rescale_report`): the driver checks everything before the first write, flushes the
WAL tail of each source into an L0 (fencing its writer), checkpoints it, clones the targets,
compacts every target on the executors (the key ranges of all the targets compacted at
once in one Spark job; each target still planned, fenced and committed on its own; each
task also reads its outputs back and its source ranges at the checkpoint and compares
their rows exactly, which the driver completes against the commits), scans on the
executors what those tasks could not vouch for (one Spark job, one task per chunk scanning
both sides; a rerun after a crash, for example), detaches the targets and releases the
sources.
A rerun of the same command resumes a job that was interrupted. The JSON report goes to
stdout (and ``--report FILE``; slatelib/jobs/_common.py describes its top level: ``databases`` has
one entry per source and target, with its role), a one-line summary to stderr.

Exit code (slatelib/exit_codes.py): 0 done, 2 invalid input (bad keys, template, a target
that exists, an unknown checkpoint, overlapping merge sources), 5 data error or invalid state (a likely-live
writer: ``WriterActiveError``; another rescale job on the source; a target that differs
from its sources), 3 fenced, 4 conflict, 6 I/O failure, 1 anything else.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from slatelib.config import Settings, parse_duration
from slatelib.core.rescale_plan import expand_template, parse_split_keys
from slatelib.errors import InvalidArgumentError, SlateError
from slatelib.exit_codes import EXIT_ERROR, EXIT_OK, exit_code_for
from slatelib.flags import parse_args_suggesting, whole_number
from slatelib.jobs._common import (
    add_common_args,
    counts_store_requests,
    run_main,
    split_under_root,
    wal_store_arg,
)
from slatelib.objstore import open_store
from slatelib.ops.compaction import CompactionTask, TaskOutcome
from slatelib.ops.rescale import (
    DEFAULT_LIVE_WINDOW_S,
    BatchRunner,
    Mapper,
    RescaleOptions,
    merge_databases,
    run_checked_compaction_task,
    split_database,
)
from slatelib.ops.rescale.report import rescale_headline, rescale_report

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("slatelib.jobs.rescale")


def _add_options(p: argparse.ArgumentParser) -> None:
    add_common_args(p, selection=False)  # a rescale names its databases itself
    p.add_argument("--dry-run", action="store_true",
                   help="show the split keys, estimated bytes and rows per shard and the "
                        "objects to write; write nothing")
    live = p.add_mutually_exclusive_group()
    live.add_argument("--fence-source", action="store_true",
                      help="fence a source's writer first (its next write fails), even when "
                           "it looks live")
    live.add_argument("--allow-live-source", action="store_true",
                      help="go on although a source's writer may be live: its writes after "
                           "the checkpoint are NOT in the new databases")
    p.add_argument("--live-window", metavar="DURATION", default=f"{DEFAULT_LIVE_WINDOW_S:g}s",
                   help="manifest or WAL writes this recent mean a live writer (default 300s)")
    p.add_argument("--parallelism", type=whole_number(minimum=1),
                   help="key ranges per target compaction (default: [compaction] "
                        "parallelism when set, else twice the Spark parallelism shared by "
                        "the targets compacted at once)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jobs/rescale.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    split = sub.add_parser("split", help="split one database into N by key range")
    split.add_argument("--db", required=True, metavar="URL", help="the database to split")
    split.add_argument("--into", required=True, type=whole_number(minimum=0), metavar="N",
                       help="number of shards (at least 2)")
    split.add_argument("--at", metavar="KEY,...",
                       help="the N-1 split keys, ascending (text, or hex:<digits>)")
    split.add_argument("--to", required=True, metavar="TEMPLATE",
                       help="shard URL template with {i}, e.g. s3://bucket/tenants/db-{i}")
    split.add_argument("--checkpoint", metavar="UUID",
                       help="clone from this existing checkpoint of the source (no WAL "
                            "data to replay) instead of flushing and checkpointing it")
    _add_options(split)
    merge = sub.add_parser("merge", help="merge databases with disjoint key ranges into one")
    merge.add_argument("--source", action="append", required=True, metavar="URL",
                       help="a database to merge (repeat for each)")
    merge.add_argument("--to", required=True, metavar="URL", help="the new database")
    _add_options(merge)
    return p


def _locate(urls: Sequence[str], store_root: str | None) -> tuple[str, list[str]]:
    """The one store of every URL and the database paths in it.

    Raises:
        InvalidArgumentError: a malformed URL, or one in another store (clones name their
            sources by path inside one store).
    """
    located = [split_under_root(u, store_root) for u in urls]
    stores = {s for s, _ in located}
    if len(stores) != 1:
        where = ", ".join(f"{u} -> store {s}" for u, (s, _) in zip(urls, located, strict=True))
        raise InvalidArgumentError(
            f"every database of a rescale must be in the source's store ({where}): a target "
            "resolves outside it")
    return located[0][0], [p for _, p in located]


@counts_store_requests(rescale_headline)
def run(spark: SparkSession | None, settings: Settings, args: argparse.Namespace,
        task_fn: Callable[[CompactionTask], TaskOutcome] = run_checked_compaction_task,
        ) -> tuple[dict[str, Any], int]:
    """Run the rescale the arguments describe. Returns the report and the exit code.

    ``spark`` may be None (a dry run, or threads of this process for tests).

    Raises:
        InvalidArgumentError: a bad ``--live-window`` (every other refusal is in the report,
            with its exit code).
    """
    started = time.monotonic()
    options = RescaleOptions(
        fence_source=args.fence_source, allow_live_source=args.allow_live_source,
        live_window_s=parse_duration(args.live_window, what="--live-window"),
        parallelism=args.parallelism, dry_run=args.dry_run,
        slots=None if spark is None else spark.sparkContext.defaultParallelism)
    batch: BatchRunner | None = None
    mapper: Mapper | None = None
    if spark is not None:
        from slatelib.spark.compaction import SparkTaskRunner
        from slatelib.spark.executors import spark_mapper

        # one Spark job for the key ranges of every target compacted at once; its outcomes
        # come back in task order (collect of a parallelized list), as a BatchRunner's must
        batch = SparkTaskRunner(spark, label="rescale compaction", task_fn=task_fn)
        mapper = spark_mapper(spark, label="rescale tasks")
    wal_store = wal_store_arg(args, settings.object_store.wal_store)
    try:
        if args.command == "split":
            at = None if args.at is None else parse_split_keys(args.at)
            store_url, paths = _locate([args.db, *expand_template(args.to, args.into)],
                                       args.store_root)
            done = split_database(paths[0], open_store(store_url), paths[1:], at=at,
                                  checkpoint=args.checkpoint, settings=settings,
                                  options=options, batch_runner=batch, mapper=mapper,
                                  wal_store=wal_store)
        else:
            store_url, paths = _locate([*args.source, args.to], args.store_root)
            done = merge_databases(paths[:-1], paths[-1], open_store(store_url),
                                   settings=settings, options=options,
                                   batch_runner=batch, mapper=mapper, wal_store=wal_store)
        result = done.to_dict()
        code = EXIT_OK
        result["outcome"] = result.pop("status")
    except SlateError as exc:
        code = exit_code_for(exc)
        log.error("rescale failed [error=%s]", exc)
        result = {"error": {"type": type(exc).__name__, "message": str(exc)}}
    except Exception as exc:  # a bug or an unexpected library error: report it too
        code = EXIT_ERROR
        log.exception("rescale crashed")
        result = {"error": {"type": type(exc).__name__, "message": str(exc)}}
    report = rescale_report(args.command, code, result, seconds=time.monotonic() - started,
                            dry_run=bool(args.dry_run))
    return report, code


headline = rescale_headline  # the report's headline (slatelib/ops/rescale/report.py)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args_suggesting(build_parser(), argv)
    return run_main(args, "slatelib-rescale", run, needs_spark=not args.dry_run,
                    headline=headline)


if __name__ == "__main__":
    raise SystemExit(main())
