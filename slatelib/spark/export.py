"""Export a checkpoint of a database to Parquet or Delta on Spark (thin over
:mod:`slatelib.ops.export`; design: docs/rfcs/0011-spark-datasource-and-export.md).

- What Spark's writers (Parquet, Delta) and the incremental merge get is the ``slatedb``
  source's DataFrame, planned on the driver on the export's checkpoint
  (:func:`slatelib.spark.datasource.planned_frame`: no Python planner workers, and
  ``mapInArrow``'s cheaper Arrow ingest).
- Parquet: that DataFrame written by Spark's Parquet writer (the default); or, with
  ``parquet_writer="arrow"``, the data source's partitions written by pyarrow in Spark tasks
  and committed by the driver once all succeeded (:mod:`slatelib.ops.export.arrow_parquet`;
  it skips Spark's row-based ingest and writer).
- Delta (``delta_writer``): delta-spark, Spark's own Delta writer, whenever its classes
  load (``auto``, the default; ``delta-spark`` refuses without them), with every table
  operation through Spark (:mod:`slatelib.spark.delta_spark`, any Hadoop file system path,
  ``s3a://`` included): a full export is one ``df.write.format("delta")`` commit, an
  incremental one a Delta ``MERGE`` executed by Spark, so the change rows stay on the
  executors; the report's counts are the commit's ``operationMetrics``. The fallback
  (``delta-rs``, or ``auto`` without delta-spark): Spark writes Parquet files into a new
  folder inside the table, and delta-rs commits exactly those files in one transaction; an
  incremental export has Spark write the changes as Parquet into a hidden staging folder of
  the table (not collected through Spark), reads them back batch by batch for one delta-rs
  merge, then deletes the folder. delta-rs' merge holds every change row in the driver's
  memory (see :func:`_merge_staged`).
- Incremental (``mode="incremental"``, Delta only): the key-level difference between the
  checkpoint of the table's last export and a new checkpoint. Exact as long as that
  checkpoint is still live; refused when it is gone or expired, when the last export was an
  append, or when another writer changed the table since. ``mode="auto"`` (the nightly
  DAG's) is incremental when the target is a Delta table, else a full overwrite.

Everything that can be refused is checked before anything is written. The export keeps its
checkpoint (named ``slatelib-export``) on the database for the next incremental export and
deletes the previous one once the new commit landed; a Parquet export deletes its own at the
end. A failure deletes the checkpoint this run created and the files it staged.
"""

from __future__ import annotations

import logging
import resource
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.db_manifest import DbManifest
from slatelib.errors import InvalidArgumentError, SlateError
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.checkpoint import delete_checkpoint
from slatelib.ops.export import arrow_parquet
from slatelib.ops.export import delta as deltars
from slatelib.ops.export.arrow_rows import CHANGE_COLUMN, DEFAULT_COLUMNS, arrow_schema
from slatelib.ops.export.files import (
    DELTA,
    DataFile,
    count_values,
    delete_dir,
    new_changes_dir,
    parquet_files,
    read_staged,
    staged_files,
    target_state,
)
from slatelib.ops.export.pin import (
    EXPORT_CHECKPOINT_NAME,
    PinnedCheckpoint,
    create_read_checkpoint,
    pin_checkpoint,
)
from slatelib.ops.progress import start
from slatelib.spark import delta_spark, register
from slatelib.spark.datasource import planned_frame
from slatelib.spark.executors import on_executors
from slatelib.spark.options import split_db
from slatelib.spark.progress import track
from slatelib.spark.s3a import configure_s3a_target

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.datasource import InputPartition

    from slatelib.spark.datasource import SlateDbReader

log = logging.getLogger(__name__)

FORMATS = ("parquet", "delta")
MODES = ("overwrite", "append", "incremental", "auto")
DELTA_WRITERS = ("auto", "delta-spark", "delta-rs")
PARQUET_WRITERS = ("spark", "arrow")
DEFAULT_EXPORT_LIFETIME_S = 7 * 24 * 3600.0


@dataclass(frozen=True)
class ExportArgs:
    """One export: the database, the target and how (see the module docstring)."""

    db: str
    to: str
    format: str
    mode: str = "overwrite"
    checkpoint: str | None = None
    store_root: str | None = None
    merge_operator: str | None = None
    columns: tuple[str, ...] = DEFAULT_COLUMNS
    decode: str = "binary"
    partitions: int | None = None
    min_partition_bytes: int | None = None
    checkpoint_lifetime_s: float = DEFAULT_EXPORT_LIFETIME_S
    delta_writer: str = "auto"
    parquet_writer: str = "spark"
    wal_store: str = ""
    """The URL of the store that keeps the database's WAL ("" : its own store)."""

    def check(self) -> None:
        """Raises:
            InvalidArgumentError: an unknown format, mode or writer, or a mode the format
                does not support."""
        if self.format not in FORMATS:
            raise InvalidArgumentError(f"--format must be one of {FORMATS}, got {self.format!r}")
        if self.mode not in MODES:
            raise InvalidArgumentError(f"--mode must be one of {MODES}, got {self.mode!r}")
        if self.mode in ("incremental", "auto") and self.format != "delta":
            raise InvalidArgumentError(f"--mode {self.mode} needs --format delta (a merge)")
        if self.delta_writer not in DELTA_WRITERS:
            raise InvalidArgumentError(
                f"--delta-writer must be one of {DELTA_WRITERS}, got {self.delta_writer!r}")
        if self.parquet_writer not in PARQUET_WRITERS:
            raise InvalidArgumentError(f"--parquet-writer must be one of {PARQUET_WRITERS}, "
                                       f"got {self.parquet_writer!r}")
        if self.parquet_writer != "spark" and self.format != "parquet":
            raise InvalidArgumentError("--parquet-writer arrow needs --format parquet")
        if self.checkpoint_lifetime_s < 1:
            raise InvalidArgumentError("--checkpoint-lifetime must be at least 1s")


def delta_spark_available(spark: SparkSession) -> bool:
    """Whether delta-spark's classes are on the driver's classpath."""
    return delta_spark.available(spark)


class _Run:
    """One export's state: what it pinned and created, so a failure can undo it."""

    def __init__(self, spark: SparkSession, args: ExportArgs, clock: Clock) -> None:
        self.spark, self.args, self.clock = spark, args, clock
        self.store_url, self.path = split_db(args.db, args.store_root)
        self.db_id = f"{self.store_url.rstrip('/')}/{self.path}"
        self.store: ObjectStore = open_store(self.store_url, wal_store=args.wal_store)
        self.schema = arrow_schema(args.columns, args.decode)
        self.seconds: dict[str, float] = {}
        self.created: PinnedCheckpoint | None = None

    # ------------------------------------------------------------------ the source
    def read_options(self, new: PinnedCheckpoint,
                     since: PinnedCheckpoint | None) -> dict[str, str]:
        """The ``slatedb`` source's options for reading ``new`` (and diffing from
        ``since``)."""
        a = self.args
        options = {"db": a.db, "checkpoint": str(new.checkpoint.id),
                   "columns": ",".join(a.columns), "decode": a.decode,
                   "partitions": str(a.partitions or self.spark.sparkContext.defaultParallelism)}
        if a.store_root:
            options["store_root"] = a.store_root
        if a.wal_store:
            options["wal_store"] = a.wal_store
        if a.merge_operator:
            options["merge_operator"] = a.merge_operator
        if a.min_partition_bytes:
            options["min_partition_bytes"] = str(a.min_partition_bytes)
        if since is not None:
            options["since_checkpoint"] = str(since.checkpoint.id)
        return options

    def frame(self, new: PinnedCheckpoint, since: PinnedCheckpoint | None) -> DataFrame:
        """The ``slatedb`` DataFrame of ``new`` (the changes since ``since``), planned in
        this driver process (:func:`slatelib.spark.datasource.planned_frame`: the same
        partitions and rows as ``spark.read.format("slatedb")``, without its planner
        workers)."""
        return planned_frame(self.spark, self.read_options(new, since))

    def pin_new(self) -> PinnedCheckpoint:
        a = self.args
        if a.checkpoint is not None:
            return pin_checkpoint(self.store, self.path, uuid.UUID(str(a.checkpoint)),
                                  clock=self.clock)
        self.created = create_read_checkpoint(
            self.store, self.path, name=EXPORT_CHECKPOINT_NAME,
            lifetime_s=a.checkpoint_lifetime_s, clock=self.clock)
        return self.created

    def mark(self, new: PinnedCheckpoint, *, exact: bool) -> deltars.ExportMark:
        return deltars.ExportMark(self.db_id, str(new.checkpoint.id), new.manifest_id,
                                  tuple(self.args.columns), self.args.decode, exact)

    def release(self, checkpoint_id: str | uuid.UUID) -> bool:
        """Delete an earlier export's checkpoint, but only one this job made (by name)."""
        cid = uuid.UUID(str(checkpoint_id))
        cp = next((c for c in self.store_manifest().checkpoints if c.id == cid), None)
        if cp is None or cp.name != EXPORT_CHECKPOINT_NAME:
            return False
        return delete_checkpoint(self.path, self.store, cid, clock=self.clock)

    def store_manifest(self) -> Any:
        return DbManifest(self.store, self.path).read_latest().value

    def undo(self) -> None:
        if self.created is not None:
            try:
                delete_checkpoint(self.path, self.store, self.created.checkpoint.id,
                                  clock=self.clock)
            except SlateError as exc:
                log.warning("could not delete the export checkpoint [db=%s, id=%s, error=%s]",
                            self.args.db, self.created.checkpoint.id, exc)


def _files_fields(files: list[DataFile]) -> dict[str, int]:
    return {"rows": sum(f.rows for f in files), "bytes": sum(f.size for f in files),
            "files": len(files)}


def run_export(spark: SparkSession, args: ExportArgs, *,
               clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """Export one database (see the module docstring); returns the report's database
    fields.

    Raises:
        InvalidArgumentError: bad arguments, or a target that is not a Delta table (or is
            one, for Parquet), or whose columns differ.
        NotADatabaseRootError: no database at ``args.db``.
        InvalidDbStateError: an unknown or expired checkpoint, or an incremental export
            that cannot be exact (see the module docstring).
        SlateError: reading the database failed (nothing committed).
    """
    args.check()
    register(spark)
    configure_s3a_target(spark, args.to)  # an S3 target: S3A loadable and configured
    started = time.monotonic()
    rss_at_start = driver_rss_bytes()
    writer = _writer(spark, args)
    on_spark = writer == "delta-spark"
    state = delta_spark.table_state(spark, args.to) if on_spark else target_state(args.to)
    if args.mode == "auto":  # the nightly DAG: incremental once the table exists
        args = replace(args, mode="incremental" if state == DELTA else "overwrite")
    run = _Run(spark, args, clock)
    since: PinnedCheckpoint | None = None
    previous: str | None = None
    if args.format == "parquet":
        if state == DELTA:
            raise InvalidArgumentError(
                f"--to {args.to} is a Delta table: export to it with --format delta")
    else:
        deltars.refuse_unless_delta(args.to, state)
        if state == DELTA:
            if on_spark:
                deltars.check_columns(args.to, delta_spark.columns(spark, args.to),
                                      run.schema)
            else:
                deltars.check_schema(args.to, run.schema)
        if args.mode == "incremental":
            deltars.require_table(args.to, state)
            _, mark = deltars.last_export(args.to, _history(spark, args.to, on_spark))
            _check_mark(args, run, mark)
            since = pin_checkpoint(run.store, run.path, uuid.UUID(mark.checkpoint),
                                   clock=clock)
            previous = mark.checkpoint
        elif state == DELTA:
            previous = _previous_mark(args.to, _history(spark, args.to, on_spark))
    new = run.pin_new()
    run.seconds["plan"] = round(time.monotonic() - started, 3)
    try:
        # Progress: the Spark tasks of the write (and merge) finished so far.
        progress = start(f"export {args.db}", unit="tasks")
        with track(spark.sparkContext, progress):
            fields = _write(run, writer, new, since, state)
        progress.finish()
    except BaseException:
        run.undo()
        raise
    released = False
    if args.format == "parquet":
        run.undo()  # nothing will diff from a Parquet export
    elif previous is not None and previous != str(new.checkpoint.id):
        released = run.release(previous)
    cp = {"id": str(new.checkpoint.id), "manifest_id": new.manifest_id,
          "created": run.created is not None,
          "kept": args.format == "delta" or run.created is None}
    out: dict[str, Any] = {"checkpoint": cp, "target": args.to, "format": args.format,
                           "mode": args.mode, "writer": writer, **fields}
    if since is not None:
        out["since"] = str(since.checkpoint.id)
        out["since_manifest_id"] = since.manifest_id
    if previous is not None:
        out["previous_checkpoint"] = {"id": previous, "released": released}
    out["seconds"] = {**run.seconds, "total": round(time.monotonic() - started, 3)}
    out["driver_rss_at_start_bytes"] = rss_at_start
    out["driver_peak_rss_bytes"] = driver_peak_rss_bytes()
    return out


def driver_peak_rss_bytes() -> int:
    """The peak resident memory of this (the Python driver's) process so far, in bytes:
    ``VmHWM`` of Linux ``/proc/self/status``, else ``getrusage``. Not ``getrusage`` first:
    Linux carries ``ru_maxrss`` over ``fork`` and ``exec``, so a driver started by a large
    process (a test runner, a scheduler's worker) would report its parent's size. The driver
    JVM and the Python workers are other processes."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def driver_rss_bytes() -> int:
    """This process's resident memory now, in bytes (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _writer(spark: SparkSession, args: ExportArgs) -> str:
    """The report's writer: the Parquet writer, or for Delta ``delta-spark`` (forced, or
    ``auto`` when its classes load) or ``delta-rs``.

    Raises:
        InvalidArgumentError: ``--delta-writer delta-spark`` without delta-spark's classes.
    """
    if args.format == "parquet":
        return "arrow-parquet" if args.parquet_writer == "arrow" else "spark-parquet"
    if args.delta_writer == "delta-rs":
        return "delta-rs"
    if delta_spark.available(spark):
        return "delta-spark"
    if args.delta_writer == "delta-spark":
        raise InvalidArgumentError(
            f"--delta-writer delta-spark: {delta_spark.DELTA_TABLE_CLASS} is not on the "
            "driver's classpath (add the delta-spark and delta-storage jars: spark.jars)")
    return "delta-rs"


def _history(spark: SparkSession, uri: str,
             on_spark: bool) -> Iterable[dict[str, Any]] | None:
    """The table's history, newest first, as delta-spark reads it (None: delta-rs', which
    :func:`slatelib.ops.export.delta.last_export` reads itself)."""
    return delta_spark.history(spark, uri) if on_spark else None


def _check_mark(args: ExportArgs, run: _Run, mark: deltars.ExportMark) -> None:
    if mark.db != run.db_id:
        raise InvalidArgumentError(
            f"--to {args.to} holds an export of {mark.db}, not of {run.db_id}")
    if tuple(mark.columns) != tuple(args.columns) or mark.decode != args.decode:
        raise InvalidArgumentError(
            f"--to {args.to} was exported with columns {list(mark.columns)} and decode "
            f"{mark.decode}; use the same for an incremental export")
    if not mark.exact:
        from slatelib.errors import InvalidDbStateError

        raise InvalidDbStateError(
            f"the last export to {args.to} was an append, so the table is not the view of "
            f"checkpoint {mark.checkpoint}; run a full export (--mode overwrite) first")


def _previous_mark(uri: str, history: Iterable[dict[str, Any]] | None) -> str | None:
    try:
        return deltars.last_export(uri, history)[1].checkpoint
    except SlateError:
        return None


def _write(run: _Run, writer: str, new: PinnedCheckpoint, since: PinnedCheckpoint | None,
           state: str) -> dict[str, Any]:
    args = run.args
    t = time.monotonic()
    if args.format == "parquet" and args.parquet_writer == "arrow":
        return _write_arrow_parquet(run, new, t)
    df = run.frame(new, since)
    exact = args.mode != "append"
    if args.format == "parquet":
        before = set(parquet_files(args.to)) if args.mode == "append" else set()
        df.write.mode(args.mode).parquet(args.to)
        files = [f for p, f in parquet_files(args.to).items() if p not in before]
        run.seconds["write"] = round(time.monotonic() - t, 3)
        return _files_fields(files)
    mark = run.mark(new, exact=exact)
    if writer == "delta-spark":
        return _write_delta_spark(run, df, mark, since is not None, t)
    if since is not None:
        return _merge_staged(run, df, mark, t)
    staging = f"slatelib-export-{uuid.uuid4().hex[:16]}"
    try:
        df.write.mode("errorifexists").parquet(f"{args.to.rstrip('/')}/{staging}")
        files = sorted(parquet_files(args.to, under=staging).values(), key=lambda f: f.path)
        run.seconds["write"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        version = deltars.commit_files(args.to, files, run.schema, mode=args.mode, mark=mark,
                                       create=state != DELTA)
    except BaseException:
        delete_dir(args.to, staging)
        raise
    run.seconds["commit"] = round(time.monotonic() - t, 3)
    return {**_files_fields(files), "delta_version": version}


def _write_arrow_parquet(run: _Run, new: PinnedCheckpoint, t: float) -> dict[str, Any]:
    """``--parquet-writer arrow``: the data source's planning on the driver, one Spark task
    per partition writing its batches with pyarrow, the files committed by the driver once
    every task succeeded (:mod:`slatelib.ops.export.arrow_parquet`)."""
    from slatelib.spark.datasource import SlateDbReader
    from slatelib.spark.options import ReadOptions

    args = run.args
    reader = SlateDbReader(ReadOptions.parse(run.read_options(new, None)))
    parts = list(reader.partitions())
    job = uuid.uuid4().hex[:16]
    uri = args.to
    try:
        written = (run.spark.sparkContext.parallelize(list(enumerate(parts)), len(parts))
                   .mapPartitions(on_executors(run.spark.sparkContext, lambda it: _arrow_tasks(
                       reader, uri, job, it), iterator=True)).collect())
        run.seconds["write"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        # every planned partition must have been written: commit_parts checks each file
        names = set(arrow_parquet.commit_parts(uri, job, range(len(parts)), args.mode))
    except BaseException:
        arrow_parquet.abort(uri, job)
        raise
    run.seconds["commit"] = round(time.monotonic() - t, 3)
    files = [f for p, f in parquet_files(uri).items() if p in names]
    fields = _files_fields(files)
    if fields["rows"] != sum(rows for _, rows in written):
        raise SlateError(f"export to {uri}: the committed files hold {fields['rows']} rows, "
                         f"the tasks wrote {sum(rows for _, rows in written)}")
    return fields


def _arrow_tasks(reader: SlateDbReader, uri: str, job: str,
                 items: Iterable[tuple[int, InputPartition]]) -> Iterator[tuple[int, int]]:
    """Executor side of :func:`_write_arrow_parquet`: ``(index, rows)`` per partition."""
    for index, part in items:
        yield index, arrow_parquet.write_part(uri, job, index, reader.schema, reader.read(part))


def _merge_staged(run: _Run, df: DataFrame, mark: deltars.ExportMark,
                  t: float) -> dict[str, Any]:
    """delta-rs incremental: Spark writes the change rows as Parquet into a hidden staging
    folder of the table (``_slatelib-changes-<id>/``), and the driver reads them back
    batch by batch with the export's exact types (Spark may widen them) for one delta-rs
    merge; counts and bytes come from the footers and the ``_change`` column alone. The
    changes never pass through Spark's collect, but delta-rs 1.6.6's merge keeps all of
    them in this process's memory (docs/rfcs/0011-spark-datasource-and-export.md,
    "Incremental merge memory"). The folder is deleted whatever happens; only a killed
    process leaves it (hidden: no reader, export or ``VACUUM`` looks at it, and every run
    uses a fresh name)."""
    args = run.args
    staging = new_changes_dir()
    try:
        df.write.mode("errorifexists").parquet(f"{args.to.rstrip('/')}/{staging}")
        staged = staged_files(args.to, staging)
        run.seconds["write"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        kinds = count_values(args.to, staged, CHANGE_COLUMN)
        rows = sum(f.rows for f in staged)
        if rows != sum(kinds.values()) or set(kinds) - {"upsert", "delete"}:
            raise SlateError(f"export to {args.to}: the staged changes in {staging} hold "
                             f"{rows} rows, their {CHANGE_COLUMN} column {kinds}")
        change_schema = arrow_schema(args.columns, args.decode, change=True)
        version, metrics = deltars.merge_changes(
            args.to, read_staged(args.to, staged, change_schema), args.columns, mark=mark,
            schema=run.schema)
    finally:
        delete_dir(args.to, staging)
    run.seconds["commit"] = round(time.monotonic() - t, 3)
    return {"rows": rows, "bytes": sum(f.size for f in staged), "files": 0,
            "changes": {"upserts": kinds.get("upsert", 0), "deletes": kinds.get("delete", 0)},
            "delta_version": version, "merge": _plain(metrics)}


def _plain(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if isinstance(v, int | float | str)}


def _write_delta_spark(run: _Run, df: DataFrame, mark: deltars.ExportMark, incremental: bool,
                       t: float) -> dict[str, Any]:
    """Spark's own Delta writer (:mod:`slatelib.spark.delta_spark`): a full export is one
    ``df.write.format("delta")`` commit, an incremental one a ``MERGE`` executed by Spark
    (the change rows stay on the executors); the report's counts are that commit's
    ``operationMetrics`` (:func:`slatelib.ops.export.delta.commit_report`)."""
    args = run.args
    if incremental:
        commit = delta_spark.merge(run.spark, df, args.to, args.columns, mark=mark)
    else:
        commit = delta_spark.write(run.spark, df, args.to, mode=args.mode, mark=mark)
    run.seconds["write"] = round(time.monotonic() - t, 3)
    fields = deltars.commit_report(commit)
    changes = fields.get("changes")
    if changes is not None and changes["upserts"] + changes["deletes"] != fields["rows"]:
        log.warning("export merge applied %d of %d changes: the table was not the view of "
                    "checkpoint %s [to=%s]", changes["upserts"] + changes["deletes"],
                    fields["rows"], mark.checkpoint, args.to)
    return fields


__all__ = ["DELTA_WRITERS", "FORMATS", "MODES", "PARQUET_WRITERS", "ExportArgs", "delta_spark_available",
           "run_export"]
