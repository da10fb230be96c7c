"""Export a checkpoint of a SlateDB database to Parquet or Delta on Spark.

    spark-submit jobs/export.py --db URL --to URL --format parquet|delta
        [--mode overwrite|append|incremental|auto] [--checkpoint ID] [--checkpoint-lifetime DUR]
        [--columns key,value,...] [--decode binary|utf8] [--merge-operator NAME]
        [--partitions N] [--delta-writer auto|delta-spark|delta-rs]
        [--parquet-writer spark|arrow] [--store-root URL]
        [--conf FILE ...] [--env-file FILE ...] [--report FILE] [-v]

Thin over :func:`slatelib.spark.export.run_export` (which registers the ``slatedb`` data
source itself): the checkpoint (``--checkpoint``, else a new one named ``slatelib-export``)
is read in byte-balanced key ranges on the executors and written by Spark's Parquet writer
(``--parquet-writer arrow``: by pyarrow in the tasks, committed by the driver);
for Delta, Spark's Delta writer when delta-spark's classes load (an incremental export is
then a Delta MERGE run by Spark on the executors), else the Parquet files are committed with
delta-rs. ``--mode incremental`` (Delta) applies only the changes since
the checkpoint of the table's last export with a merge, and refuses when that checkpoint is
gone or expired. The report (stdout, and ``--report FILE``; slatelib/jobs/_common.py describes its
top level) names the checkpoint exported (id and manifest id), rows, bytes, files and time.

Exit code: 0 on success; 2 invalid input (bad options, a target that is not a Delta table);
5 a missing database, an unknown or expired checkpoint, or an incremental export that cannot
be exact; 6 storage unavailable; 1 anything else (slatelib/exit_codes.py).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from slatelib.config import Settings, parse_duration
from slatelib.errors import InvalidArgumentError
from slatelib.flags import parse_args_suggesting
from slatelib.jobs._common import (
    DbTarget,
    add_common_args,
    counts_store_requests,
    run_main,
    wal_store_arg,
)
from slatelib.objstore.registry import s3_access
from slatelib.ops.export.arrow_rows import DECODINGS, parse_columns
from slatelib.ops.export.report import export_headline, export_report
from slatelib.ops.export.s3_target import is_s3_target
from slatelib.spark.isolation import run_isolated

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from slatelib.spark.export import ExportArgs

FORMATS = ("parquet", "delta")
MODES = ("overwrite", "append", "incremental", "auto")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jobs/export.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--db", required=True, metavar="URL", help="the database URL")
    p.add_argument("--to", required=True, metavar="URL",
                   help="target directory URL (file:///..., s3://bucket/...)")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--mode", default="overwrite", choices=MODES,
                   help="overwrite (default), append, incremental (Delta: the changes "
                        "since the last export's checkpoint, applied with a merge), or auto "
                        "(Delta: incremental when the table exists, else overwrite)")
    p.add_argument("--checkpoint", metavar="ID",
                   help="export this checkpoint (default: create one named slatelib-export)")
    p.add_argument("--checkpoint-lifetime", default="7days", metavar="DURATION",
                   help="lifetime of the checkpoint the export creates and keeps for the next "
                        "incremental export (default 7days; the next export must run before)")
    p.add_argument("--columns", default="key,value",
                   help="key,value (default), any of seq, expire_ts, create_ts, or all")
    p.add_argument("--decode", default="binary", choices=DECODINGS,
                   help="utf8: keys and values as text (refused if one is not UTF-8)")
    p.add_argument("--merge-operator", metavar="NAME",
                   help="concat or package.module:attr (needed when the database has merges)")
    p.add_argument("--partitions", type=int, metavar="N",
                   help="key ranges to read in parallel (default: Spark's default parallelism)")
    p.add_argument("--delta-writer", default="auto", choices=("auto", "delta-spark", "delta-rs"),
                   help="auto (default): delta-spark when on the classpath, else delta-rs")
    p.add_argument("--parquet-writer", default="spark", choices=("spark", "arrow"),
                   help="spark (default): Spark's Parquet writer; arrow: each task writes its "
                        "key range with pyarrow, committed once every task succeeded (faster)")
    add_common_args(p, selection=False)
    return p


def export_args(args: argparse.Namespace, wal_store: str = "") -> ExportArgs:
    """The library's arguments from the command line (``wal_store``: the settings' WAL
    store, which ``--wal-store`` overrides).

    Raises:
        InvalidArgumentError: a bad duration, column list or partition count.
    """
    from slatelib.spark.export import ExportArgs

    wal_store = wal_store_arg(args, wal_store)
    if args.partitions is not None and args.partitions < 1:
        raise InvalidArgumentError(f"--partitions must be at least 1, got {args.partitions}")
    out = ExportArgs(
        db=args.db, to=args.to, format=args.format, mode=args.mode, checkpoint=args.checkpoint,
        store_root=args.store_root, merge_operator=args.merge_operator,
        columns=parse_columns(args.columns), decode=args.decode, partitions=args.partitions,
        checkpoint_lifetime_s=parse_duration(args.checkpoint_lifetime,
                                             what="--checkpoint-lifetime"),
        delta_writer=args.delta_writer, parquet_writer=args.parquet_writer,
        wal_store=wal_store)
    out.check()
    return out


@counts_store_requests(export_headline)
def run(spark: SparkSession, settings: Settings, args: argparse.Namespace,
        ) -> tuple[dict[str, Any], int]:
    """Export the database; returns the report and the exit code.

    Raises:
        InvalidArgumentError: bad options (before anything is read).
    """
    from slatelib.spark.export import run_export

    started = time.monotonic()
    ea = export_args(args, settings.object_store.wal_store)
    target = DbTarget(args.db, "", args.db)
    results, code = run_isolated([target], lambda _t: run_export(spark, ea))
    return export_report(code, results, seconds=time.monotonic() - started), code


headline = export_headline  # the report's headline (slatelib/ops/export/report.py)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, export, print the report; returns the exit code (2 for bad arguments, before
    Spark starts)."""
    args = parse_args_suggesting(build_parser(), argv)
    def precheck(settings: Settings) -> None:
        export_args(args, settings.object_store.wal_store)
        if is_s3_target(args.to):  # malformed S3 settings: refused before Spark starts
            s3_access()

    return run_main(args, "slatelib-export", run, needs_spark=True, headline=headline,
                    precheck=precheck, jars=export_jars(args.to))


def export_jars(to: str) -> tuple[str, ...]:
    """The jar features an export to ``to`` needs: Delta's, and S3A's for an S3 target
    (only then: every executor fetches the 690 MB AWS bundle)."""
    try:
        return ("delta", "s3a") if is_s3_target(to) else ("delta",)
    except InvalidArgumentError:
        return ("delta",)  # a malformed URL: refused before Spark starts


if __name__ == "__main__":
    raise SystemExit(main())
