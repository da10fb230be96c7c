"""Delta tables with delta-rs (the ``deltalake`` package): commit files Spark wrote, apply
changes with a merge, and remember which checkpoint each export was.

Every export commit carries an :class:`ExportMark` as the commit's ``userMetadata`` (JSON
``{"slatelib_export": {...}}``): the database, the checkpoint and manifest it exported and
the columns. The incremental export reads the newest mark (:func:`last_export`) to find the
checkpoint to diff from; a newer commit by another writer that changes data (anything but
``OPTIMIZE``, ``VACUUM``, property and constraint changes: :data:`NON_DATA_OPERATIONS`)
makes the diff inexact, so it refuses. The pure parts (:func:`last_export` over a given
history, :func:`check_columns`, :func:`commit_report`) serve the delta-spark path too
(:mod:`slatelib.spark.delta_spark`), whose commits and history are delta-spark's. Commits
are single Delta transactions: files not yet committed are invisible to readers.

Tables on S3 (``s3://``, ``s3a://``) are opened with the storage options of
:func:`table_location` (the S3 settings of slatelib's own stores; commits by conditional
put).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema
from deltalake.transaction import AddAction, CommitProperties, create_table_with_add_actions

from slatelib.errors import InvalidArgumentError, InvalidDbStateError
from slatelib.objstore.registry import s3_access
from slatelib.ops.export.arrow_rows import CHANGE_COLUMN
from slatelib.ops.export.files import DataFile
from slatelib.ops.export.s3_target import as_s3_url, deltars_storage_options, is_s3_target

MARK_KEY = "slatelib_export"
NON_DATA_OPERATIONS = frozenset({
    "OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES",
    "UPGRADE PROTOCOL", "CHECKPOINT", "ADD CONSTRAINT", "DROP CONSTRAINT", "REORG",
    "COMPUTE STATS", "ROW TRACKING BACKFILL", "DOMAIN METADATA CLEANUP"})
"""History operations (delta-rs' and delta-spark 4.4's names) that leave every row as it
was: files rewritten (``OPTIMIZE``, ``REORG ... APPLY (PURGE)``), removed once unreferenced
(``VACUUM``), or table metadata only. Any other operation (``WRITE``, ``MERGE``,
``DELETE``, ``UPDATE``, ``RESTORE``, ``CREATE OR REPLACE TABLE``, ``TRUNCATE``, column
changes, ...) without an export mark changes the table's content."""


@dataclass(frozen=True)
class ExportMark:
    """What one export commit exported."""

    db: str
    checkpoint: str
    manifest_id: int
    columns: tuple[str, ...]
    decode: str = "binary"
    exact: bool = True
    """The table equals the checkpoint's view after this commit (a full overwrite or an
    incremental export, not an append): only then can an incremental export follow."""

    def to_metadata(self) -> str:
        return json.dumps({MARK_KEY: {**asdict(self), "columns": list(self.columns)}},
                          sort_keys=True)

    @staticmethod
    def from_metadata(text: object) -> ExportMark | None:
        """The mark in a commit's ``userMetadata``, or None when it has none."""
        if not isinstance(text, str):
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        mark = data.get(MARK_KEY) if isinstance(data, dict) else None
        if not isinstance(mark, dict):
            return None
        return ExportMark(str(mark["db"]), str(mark["checkpoint"]), int(mark["manifest_id"]),
                          tuple(mark["columns"]), str(mark.get("decode", "binary")),
                          bool(mark.get("exact", False)))


def table_location(uri: str) -> tuple[str, dict[str, str] | None]:
    """``(table URI, storage options)`` for delta-rs: an S3 target as ``s3://`` with the
    storage options of :func:`slatelib.ops.export.s3_target.deltars_storage_options`;
    anything else as given, with delta-rs' defaults.

    Raises:
        InvalidArgumentError: a malformed S3 URL or S3 settings.
    """
    if not is_s3_target(uri):
        return uri, None
    return as_s3_url(uri), deltars_storage_options(s3_access())


def open_table(uri: str) -> DeltaTable:
    """The Delta table at ``uri`` (see :func:`table_location`).

    Raises:
        InvalidArgumentError: a malformed S3 URL or S3 settings.
        TableNotFoundError (deltalake): no table there.
    """
    location, options = table_location(uri)
    return DeltaTable(location, storage_options=options)


def _props(mark: ExportMark) -> CommitProperties:
    return CommitProperties(custom_metadata={"userMetadata": mark.to_metadata()})


def last_export(uri: str, history: Iterable[dict[str, Any]] | None = None,
                ) -> tuple[int, ExportMark]:
    """The newest export commit of the table (version, mark); ``history`` (newest first)
    defaults to the table's.

    Raises:
        InvalidDbStateError: no export commit, or a commit changing data came after it.
    """
    commits = open_table(uri).history() if history is None else history
    for commit in commits:
        mark = ExportMark.from_metadata(commit.get("userMetadata"))
        if mark is not None:
            return int(commit.get("version", -1)), mark
        op = str(commit.get("operation", ""))
        if op not in NON_DATA_OPERATIONS:
            raise InvalidDbStateError(
                f"Delta table {uri}: version {commit.get('version')} ({op}) was written by "
                "something other than a slatelib export, so its content is no longer a "
                "checkpoint's view; run a full export (--mode overwrite)")
    raise InvalidDbStateError(
        f"Delta table {uri} has no slatelib export commit; run a full export first")


def check_schema(uri: str, schema: pa.Schema) -> None:
    """Refuse a table whose columns (read with delta-rs) differ from the export's.

    Raises:
        InvalidArgumentError: different column names or types.
    """
    have = pa.schema(open_table(uri).schema().to_arrow())  # arro3 -> pyarrow (C interface)
    check_columns(uri, [(f.name, str(f.type).replace("large_", "").replace("_view", ""))
                        for f in have], schema)


def check_columns(uri: str, theirs: Sequence[tuple[str, str]], schema: pa.Schema) -> None:
    """Refuse a table whose columns (``(name, Arrow type name)``, in order) differ from the
    export's ``schema``.

    Raises:
        InvalidArgumentError: different column names or types.
    """
    theirs = list(theirs)
    ours = [(f.name, str(f.type)) for f in schema]
    if theirs != ours:
        raise InvalidArgumentError(
            f"Delta table {uri} has columns {theirs}, the export {ours}: export to a new "
            "target or with the same --columns/--decode")


def _metric(metrics: dict[str, Any], name: str) -> int:
    value = metrics.get(name)
    return int(value) if value not in (None, "") else 0


def commit_report(commit: dict[str, Any]) -> dict[str, Any]:
    """The export report's fields of a delta-spark commit (``version``, ``operation``,
    ``operationMetrics`` of its history entry; the metric names Delta 4.4 writes):

    - ``WRITE``: ``rows``/``bytes``/``files`` = ``numOutputRows``/``numOutputBytes``/
      ``numFiles``, what the commit added;
    - ``MERGE``: ``rows`` = the change rows (``numSourceRows``), ``bytes``/``files`` = the
      files the commit added (``numTargetBytesAdded``/``numTargetFilesAdded``: rewritten
      files included), ``changes`` = rows inserted or updated (upserts) and deleted, and
      ``merge`` = every metric as a number.

    An incremental export that changed nothing commits no file, and delta-spark records no
    metrics for it: every count is 0.
    """
    metrics = dict(commit.get("operationMetrics") or {})
    out: dict[str, Any] = {"delta_version": int(commit["version"])}
    if commit.get("operation") == "MERGE" or "numSourceRows" in metrics:
        upserts = (_metric(metrics, "numTargetRowsInserted")
                   + _metric(metrics, "numTargetRowsUpdated"))
        out.update(rows=_metric(metrics, "numSourceRows"),
                   bytes=_metric(metrics, "numTargetBytesAdded"),
                   files=_metric(metrics, "numTargetFilesAdded"),
                   changes={"upserts": upserts,
                            "deletes": _metric(metrics, "numTargetRowsDeleted")},
                   merge={k: _metric(metrics, k) for k in sorted(metrics)})
        return out
    out.update(rows=_metric(metrics, "numOutputRows"), bytes=_metric(metrics, "numOutputBytes"),
               files=_metric(metrics, "numFiles"))
    return out


def add_actions(files: Sequence[DataFile]) -> list[AddAction]:
    return [AddAction(f.path, f.size, {}, f.mtime_ms, True, json.dumps({"numRecords": f.rows}))
            for f in files]


def commit_files(uri: str, files: Sequence[DataFile], schema: pa.Schema, *, mode: str,
                 mark: ExportMark, create: bool) -> int:
    """One commit adding ``files`` (paths relative to the table root): a new table when
    ``create``, else ``mode`` ``append`` or ``overwrite`` (every earlier file removed in
    the same commit). Returns the new version.

    Raises:
        InvalidArgumentError: an unknown mode.
        DeltaError (deltalake): the commit failed (nothing was committed).
    """
    if mode not in ("append", "overwrite"):
        raise InvalidArgumentError(f"unknown export mode {mode!r}")
    actions = add_actions(files)
    if create:
        location, options = table_location(uri)
        create_table_with_add_actions(location, DeltaSchema.from_arrow(schema), actions,
                                      mode="error", storage_options=options,
                                      commit_properties=_props(mark))
    else:
        open_table(uri).create_write_transaction(
            list(actions), mode=mode, schema=DeltaSchema.from_arrow(schema),
            commit_properties=_props(mark))
    return int(open_table(uri).version())


def _first_rows(changes: pa.RecordBatchReader) -> pa.RecordBatchReader | None:
    """``changes`` again, from its first non-empty batch on; None when it has no row.
    Reads batches only up to the first row."""
    for batch in changes:
        if batch.num_rows:
            return pa.RecordBatchReader.from_batches(changes.schema,
                                                     itertools.chain([batch], changes))
    return None


def merge_changes(uri: str, changes: pa.Table | pa.RecordBatchReader, columns: Sequence[str],
                  *, mark: ExportMark, schema: pa.Schema,
                  streamed_exec: bool = False) -> tuple[int, dict[str, Any]]:
    """Apply change rows (``_change`` + the export's columns: a table, or a stream read
    batch by batch) with one merge on ``key``: ``delete`` rows delete, ``upsert`` rows
    update or insert. A commit is made even with no change, so the table records the new
    checkpoint. Returns the version and the merge's metrics.

    Memory: delta-rs 1.6.6 keeps every change row in memory for its hash join (it cannot
    spill: a ``max_spill_size`` turns a large merge into a failure), whatever the source.
    Measured (docs/rfcs/0011-spark-datasource-and-export.md, "Incremental merge memory"):
    ``streamed_exec=True`` (the stream passed on as is) costs about 0.6 GB per million
    125-byte change rows; ``False`` (the default here) about 0.2 GB. With ``False`` a
    stream is read into one Arrow table first, because delta-rs panics (a
    ``PanicException``, not an error) when a stream it collects itself fails.

    Raises:
        DeltaError (deltalake): the merge failed (nothing was committed).
        Exception: what reading ``changes`` raised (nothing was committed).
    """
    dt = open_table(uri)
    reader = changes if isinstance(changes, pa.RecordBatchReader) else changes.to_reader()
    source = _first_rows(reader)
    if source is None:
        dt.create_write_transaction([], mode="append", schema=DeltaSchema.from_arrow(schema),
                                    commit_properties=_props(mark))
        return int(open_table(uri).version()), {"num_source_rows": 0}
    merge_source: pa.Table | pa.RecordBatchReader = (
        source if streamed_exec else source.read_all())
    others = [c for c in columns if c != "key"]
    every = {c: f"s.{c}" for c in columns}
    metrics: dict[str, Any] = (
        dt.merge(source=merge_source, predicate="t.key = s.key", source_alias="s",
                 target_alias="t", streamed_exec=streamed_exec,
                 commit_properties=_props(mark))
        .when_matched_delete(predicate=f"s.{CHANGE_COLUMN} = 'delete'")
        .when_matched_update(updates={c: f"s.{c}" for c in others} or {"key": "s.key"},
                             predicate=f"s.{CHANGE_COLUMN} = 'upsert'")
        .when_not_matched_insert(updates=every, predicate=f"s.{CHANGE_COLUMN} = 'upsert'")
        .execute())
    return int(open_table(uri).version()), metrics


def refuse_unless_delta(uri: str, state: str) -> None:
    """Refuse a target that holds something other than a Delta table.

    Raises:
        InvalidArgumentError: ``state`` is neither absent, empty nor a Delta table.
    """
    if state not in ("absent", "empty", "delta"):
        raise InvalidArgumentError(
            f"--to {uri} is not a Delta table (no _delta_log/) and is not empty: refusing to "
            "write a Delta table over other data")


def require_table(uri: str, state: str) -> None:
    """Refuse when there is no Delta table at ``uri`` (an incremental export needs one).

    Raises:
        InvalidDbStateError: no table.
    """
    if state != "delta":
        raise InvalidDbStateError(
            f"--to {uri}: no Delta table there; an incremental export applies changes to a "
            "table a full export made (run with --mode overwrite first)")
