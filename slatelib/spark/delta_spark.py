"""Delta tables through delta-spark, the Delta writer of the driver JVM's classpath
(``io.delta:delta-spark``): the export's table I/O on its delta-spark path
(:mod:`slatelib.spark.export`; design: docs/rfcs/0011-spark-datasource-and-export.md).

Everything goes through Spark, so a target is any path Spark's Hadoop file systems reach
(``file:``, ``s3a://``, ...): the target's state (Hadoop ``FileSystem``), the table's history
and columns (``DeltaTable.forPath(...).history()``, the table's DataFrame schema), the full
write (``df.write.format("delta")``) and the incremental ``MERGE``, which runs on the
executors like any Spark join: the change rows never gather in the Python driver.

The commit bookkeeping is :mod:`slatelib.ops.export.delta`'s (shared with delta-rs): each
export commit carries the :class:`~slatelib.ops.export.delta.ExportMark` as its
``userMetadata``, and the report's counts come from that commit's ``operationMetrics``
(:func:`~slatelib.ops.export.delta.commit_report`). delta-spark takes ``userMetadata`` for a
``MERGE`` only from the session-wide SQL conf :data:`USER_METADATA_CONF`, and skips
recording a commit that changes nothing (an incremental export with no change, an overwrite
of an empty table by an empty checkpoint) unless :data:`SKIP_EMPTY_COMMITS_CONF` is false;
:func:`commit_settings` sets both for the one commit, under a process-wide lock, and puts
back what was there before (nothing, normally) whatever happens. Delta commands run
meanwhile on other threads of the same session would see them: slatelib's own exports
take the lock.

The ``MERGE``'s shuffle has the session's ``spark.sql.shuffle.partitions`` partitions (the
jobs' default is 8, :data:`slatelib.spark.session.DEFAULTS`; adaptive execution coalesces
small ones). Raise it (``--spark-conf spark.sql.shuffle.partitions=N``) for change sets of
many gigabytes, so that each task's share stays small.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from slatelib.errors import CommitStateUnknownError, InvalidArgumentError, StorageError
from slatelib.ops.export.arrow_rows import CHANGE_COLUMN
from slatelib.ops.export.delta import ExportMark
from slatelib.ops.export.files import ABSENT, DELTA, DELTA_LOG, OTHER, directory_state

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
SKIP_EMPTY_COMMITS_CONF = "spark.databricks.delta.skipRecordingEmptyCommits"
DELTA_TABLE_CLASS = "io.delta.tables.DeltaTable"
SPARK_TO_ARROW_TYPES = {"binary": "binary", "string": "string", "bigint": "int64"}
"""Spark's simple type names of the export's columns -> the Arrow names the export's schema
(:func:`slatelib.ops.export.arrow_rows.arrow_schema`) uses."""
HISTORY_PAGES = (16, 1024, None)
"""How many of the newest commits :func:`history` reads at a time (None: all)."""

MERGE_CONF = {"spark.sql.autoBroadcastJoinThreshold": "-1",
              "spark.sql.adaptive.autoBroadcastJoinThreshold": "-1"}
"""Set for the export's ``MERGE`` only: no broadcast joins, so neither side of the merge's
join is collected into the driver to be broadcast (with 3 M change rows and
``spark.driver.memory=512m`` a broadcast build ran the driver JVM out of memory:
benchmarks/RESULTS.md, "Export (Delta)"); the join shuffles and spills instead."""

_COMMIT_LOCK = threading.Lock()


def available(spark: SparkSession) -> bool:
    """Whether delta-spark's classes (its Python API's ``DeltaTable``) load in the driver JVM
    through Spark's class loader (:func:`slatelib.spark.jars.class_loadable`)."""
    from slatelib.spark.jars import class_loadable

    return class_loadable(spark.sparkContext._jvm, DELTA_TABLE_CLASS)


UNKNOWN_STORE = "org.apache.hadoop.fs.s3a.UnknownStoreException"
"""What S3A raises for a bucket that does not exist."""


def _java_class(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)
    try:
        return str(java.getClass().getName()) if java is not None else ""
    except Exception:  # noqa: BLE001 - py4j may fail to answer for a dead object
        return ""


def _java_error(uri: str, exc: Exception) -> StorageError:
    detail = getattr(exc, "java_exception", None) or exc
    return StorageError(f"export target {uri!r}: {detail}")


def table_state(spark: SparkSession, uri: str) -> str:
    """The target as Spark's Hadoop file system sees it (the same classification as
    :func:`slatelib.ops.export.files.target_state`): ``absent``, ``empty`` (a directory with
    no visible entry), ``delta`` (it has ``_delta_log/``) or ``other``.

    Raises:
        InvalidArgumentError: an S3 target whose bucket does not exist.
        StorageError: the file system cannot be reached or listed.
    """
    from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        conf = spark._jsparkSession.sessionState().newHadoopConf()
        path = jvm.org.apache.hadoop.fs.Path(uri)
        fs = path.getFileSystem(conf)
        if not fs.exists(path):
            return ABSENT
        if not fs.getFileStatus(path).isDirectory():
            return OTHER
        log_dir = jvm.org.apache.hadoop.fs.Path(path, DELTA_LOG)
        if fs.exists(log_dir) and fs.getFileStatus(log_dir).isDirectory():
            return DELTA
        names = [s.getPath().getName() for s in fs.listStatus(path)]
    except Py4JJavaError as exc:
        if _java_class(exc) == UNKNOWN_STORE:
            raise InvalidArgumentError(
                f"export target {uri!r}: bucket {urlsplit(uri).netloc!r} does not exist at "
                "the S3 endpoint "
                "(SLATELIB_S3_ENDPOINT / AWS_ENDPOINT_URL / [object_store] endpoint): create "
                "it first, or check --to") from exc
        raise _java_error(uri, exc) from exc
    return directory_state(names)


def _table(spark: SparkSession, uri: str) -> Any:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, uri)


def history(spark: SparkSession, uri: str) -> Iterator[dict[str, Any]]:
    """The table's commits, newest first, as ``{"version", "operation", "userMetadata"}``
    (what :func:`slatelib.ops.export.delta.last_export` reads), read a page of
    :data:`HISTORY_PAGES` at a time: a caller that stops at the newest export commit reads
    only the newest few commits' ``commitInfo``."""
    seen = 0
    for limit in HISTORY_PAGES:
        table = _table(spark, uri)
        frame = table.history(limit) if limit is not None else table.history()
        rows = frame.select("version", "operation", "userMetadata").collect()
        for row in rows[seen:]:
            yield row.asDict()
        if limit is None or len(rows) < limit:
            return
        seen = len(rows)


def latest_version(spark: SparkSession, uri: str) -> int:
    """The table's newest version (-1: no table)."""
    if table_state(spark, uri) != DELTA:
        return -1
    rows = _table(spark, uri).history(1).select("version").collect()
    return int(rows[0]["version"]) if rows else -1


def columns(spark: SparkSession, uri: str) -> list[tuple[str, str]]:
    """The table's columns as ``(name, Arrow type name)`` (Spark's own name for a type the
    export never writes)."""
    fields = _table(spark, uri).toDF().schema.fields
    return [(f.name, SPARK_TO_ARROW_TYPES.get(f.dataType.simpleString(),
                                              f.dataType.simpleString())) for f in fields]


@contextmanager
def commit_settings(spark: SparkSession, mark: ExportMark,
                    extra: dict[str, str] | None = None) -> Iterator[None]:
    """For the one Delta commit made inside: ``userMetadata`` = ``mark``, empty commits
    recorded (module docstring) and ``extra``; the earlier values (normally none) are back
    afterwards, also when the commit fails. Holds a process-wide lock meanwhile."""
    wanted = {USER_METADATA_CONF: mark.to_metadata(), SKIP_EMPTY_COMMITS_CONF: "false",
              **(extra or {})}
    with _COMMIT_LOCK:
        before: dict[str, str | None] = {k: spark.conf.get(k, None) for k in wanted}
        try:
            for k, v in wanted.items():
                spark.conf.set(k, v)
            yield
        finally:
            for k, old in before.items():
                if old is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, old)


def landed_commit(spark: SparkSession, uri: str, mark: ExportMark,
                  after: int) -> dict[str, Any]:
    """The newest commit after version ``after`` that carries ``mark``: ``{"version",
    "operation", "operationMetrics"}``.

    Raises:
        CommitStateUnknownError: no such commit in the table's history.
    """
    text = mark.to_metadata()
    seen = 0
    for limit in HISTORY_PAGES:
        table = _table(spark, uri)
        frame = table.history(limit) if limit is not None else table.history()
        rows = frame.select("version", "operation", "operationMetrics", "userMetadata") \
            .collect()
        for row in rows[seen:]:
            if int(row["version"]) <= after:
                break
            if row["userMetadata"] == text:
                return {"version": int(row["version"]), "operation": row["operation"],
                        "operationMetrics": dict(row["operationMetrics"] or {})}
        else:
            if limit is not None and len(rows) == limit:
                seen = len(rows)
                continue
        break
    raise CommitStateUnknownError(
        f"Delta table {uri}: no commit after version {after} carries this export's mark "
        f"(checkpoint {mark.checkpoint})")


def write(spark: SparkSession, df: DataFrame, uri: str, *, mode: str,
          mark: ExportMark) -> dict[str, Any]:
    """Write ``df`` as one Delta commit (``mode`` ``overwrite`` or ``append``; a new table
    when there is none) carrying ``mark``; returns that commit (:func:`landed_commit`).

    Raises:
        CommitStateUnknownError: the commit is not in the table's history afterwards.
        Exception: what Spark or Delta raised (nothing was committed).
    """
    before = latest_version(spark, uri)
    with commit_settings(spark, mark):
        df.write.format("delta").mode(mode).save(uri)
    return landed_commit(spark, uri, mark, before)


def merge(spark: SparkSession, changes: DataFrame, uri: str, columns: Sequence[str], *,
          mark: ExportMark) -> dict[str, Any]:
    """Apply ``changes`` (``_change`` + the export's columns) with one Delta ``MERGE`` on
    ``key``, executed by Spark: ``delete`` rows delete, ``upsert`` rows update or insert. A
    commit carrying ``mark`` is made even with no change. Broadcast joins are off meanwhile
    (:data:`MERGE_CONF`). Returns that commit
    (:func:`landed_commit`).

    Raises:
        CommitStateUnknownError: the commit is not in the table's history afterwards.
        Exception: what Spark or Delta raised, e.g. two change rows for one key (nothing was
            committed).
    """
    before = latest_version(spark, uri)
    others = [c for c in columns if c != "key"]
    every = {c: f"s.{c}" for c in columns}
    with commit_settings(spark, mark, MERGE_CONF):
        (_table(spark, uri).alias("t")
         .merge(changes.alias("s"), "t.key = s.key")
         .whenMatchedDelete(f"s.{CHANGE_COLUMN} = 'delete'")
         .whenMatchedUpdate(f"s.{CHANGE_COLUMN} = 'upsert'",
                            set={c: f"s.{c}" for c in others} or {"key": "s.key"})
         .whenNotMatchedInsert(f"s.{CHANGE_COLUMN} = 'upsert'", values=every)
         .execute())
    return landed_commit(spark, uri, mark, before)


__all__ = ["MERGE_CONF", "SKIP_EMPTY_COMMITS_CONF", "USER_METADATA_CONF", "available", "columns",
           "commit_settings", "history", "landed_commit", "latest_version", "merge",
           "table_state", "write"]
