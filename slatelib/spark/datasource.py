"""``spark.read.format("slatedb")``: a checkpoint of a database as a DataFrame.

Thin over :mod:`slatelib.ops.export`: planning (:meth:`SlateDbReader.partitions`, run once
per query on the driver side) resolves or creates the checkpoint and splits its views into
byte-balanced key ranges (:func:`slatelib.ops.export.scan.plan_scan`); each partition reads
its range on an executor (:func:`slatelib.ops.export.arrow_rows.scan_task_batches`: the
native pipeline's Arrow buffers, or :func:`slatelib.ops.export.scan.scan_task_rows`) and
yields Arrow record batches. Key conditions (``=``, ``<``, ``<=``, ``>``, ``>=``, ``startswith`` on
``key``) are pushed down (:meth:`SlateDbReader.pushFilters`): they narrow the key range, so
only overlapping blocks are read, and Spark does not evaluate them again. Options:
:mod:`slatelib.spark.options`.

:func:`planned_frame` is a second route to the same DataFrame for callers that already pinned
a checkpoint (the export): the same :class:`SlateDbReader` plans in the calling (driver)
process, and ``mapInArrow`` over one row per planned partition runs the same ``read``, so no
Python planner worker is needed (design: docs/rfcs/0011-spark-datasource-and-export.md,
"Export throughput").
"""

from __future__ import annotations

import logging
import pickle
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    InputPartition,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from slatelib.core.key_bounds import conditions_range
from slatelib.errors import (
    InvalidArgumentError,
    InvalidDbStateError,
    ObjectMissingError,
    SlateError,
)
from slatelib.ids import parse_uuid
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.export.arrow_rows import arrow_schema, scan_task_batches, to_batch
from slatelib.ops.export.diff import DiffTask, diff_task_rows, plan_diff
from slatelib.ops.export.pin import (
    READ_CHECKPOINT_NAME,
    create_read_checkpoint,
    finish_partition,
    pin_checkpoint,
)
from slatelib.ops.export.scan import ScanTask, plan_scan
from slatelib.spark.executors import on_executors
from slatelib.spark.options import ReadOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMAT_NAME = "slatedb"
log = logging.getLogger(__name__)

_OPS: dict[type, str] = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=",
                         LessThan: "<", LessThanOrEqual: "<=", StringStartsWith: "prefix"}


def key_condition(f: Filter) -> tuple[str, bytes] | None:
    """``(op, key)`` of a filter on the ``key`` column this source can apply exactly, or
    None (Spark evaluates it)."""
    op = _OPS.get(type(f))
    attribute = getattr(f, "attribute", None)
    if op is None or attribute != ("key",):
        return None
    value = getattr(f, "value", None)
    if isinstance(value, str):
        return op, value.encode("utf-8")
    if isinstance(value, bytes | bytearray):
        return op, bytes(value)
    return None


@dataclass(frozen=True)
class ScanPartition(InputPartition):
    """One partition: a scan task, and when the read owns a temporary checkpoint, how many
    partitions there are (the last one to finish deletes it)."""

    task: ScanTask
    total: int
    temporary: bool
    diff: DiffTask | None = None


class SlateDbReader(DataSourceReader):
    """Plans and reads one query over a checkpoint (see the module docstring)."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.conditions: list[tuple[str, bytes]] = []
        self.schema = arrow_schema(options.columns, options.decode,
                                   change=options.since_checkpoint is not None)

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        for f in filters:
            cond = key_condition(f)
            if cond is None:
                yield f
            else:
                self.conditions.append(cond)

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        store = open_store(o.store_url, wal_store=o.wal_store)
        rng = conditions_range(self.conditions, o.key_range)
        temporary = o.checkpoint is None
        if temporary:
            pinned = create_read_checkpoint(store, o.path, name=READ_CHECKPOINT_NAME,
                                            lifetime_s=o.checkpoint_lifetime_s)
        else:
            assert o.checkpoint is not None
            pinned = pin_checkpoint(store, o.path, parse_uuid(o.checkpoint))
        try:
            if o.since_checkpoint is not None:
                old = pin_checkpoint(store, o.path, parse_uuid(o.since_checkpoint))
                diffs = plan_diff(store, o.path, old, pinned, columns=o.columns,
                                  key_range=rng, partitions=o.partitions,
                                  min_partition_bytes=o.min_partition_bytes,
                                  merge_operator=o.merge_operator)
                return [ScanPartition(d.new, len(diffs), temporary, d) for d in diffs] or [
                    self._empty(store, pinned.checkpoint.id, temporary)]
            tasks = plan_scan(store, o.path, pinned.manifest, manifest_id=pinned.manifest_id,
                              checkpoint_id=pinned.checkpoint.id, key_range=rng,
                              partitions=o.partitions,
                              min_partition_bytes=o.min_partition_bytes,
                              merge_operator=o.merge_operator)
        except BaseException:
            if temporary:
                finish_partition(store, o.path, pinned.checkpoint.id, 0, 1)
            raise
        if not tasks:
            return [self._empty(store, pinned.checkpoint.id, temporary)]
        return [ScanPartition(t, len(tasks), temporary) for t in tasks]

    def _empty(self, store: ObjectStore, checkpoint_id: uuid.UUID,
               temporary: bool) -> InputPartition:
        """The one partition of an empty key range (its temporary checkpoint released)."""
        if temporary:
            finish_partition(store, self.options.path, checkpoint_id, 0, 1)
        return InputPartition(None)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ScanPartition):
            return  # an empty key range: no rows
        task = partition.task
        store = task.store.open()
        try:
            if partition.diff is not None:
                for changes, rows in diff_task_rows(partition.diff, store=store):
                    yield to_batch(rows, self.schema, changes=changes)
            else:
                yield from scan_task_batches(task, self.schema, store=store)
        except ObjectMissingError as exc:
            raise InvalidDbStateError(
                f"reading checkpoint {task.checkpoint_id} (manifest {task.manifest_id}) of "
                f"{task.db_path!r}: {exc}; was the checkpoint deleted or did it expire? "
                "Re-run the query (a new temporary checkpoint) or pass a live checkpoint"
            ) from exc
        if partition.temporary:
            try:
                finish_partition(store, task.db_path, task.checkpoint_id, task.index,
                                 partition.total)
            except SlateError as exc:  # every row was read: the checkpoint just expires
                log.warning("could not release the temporary read checkpoint [db=%s, id=%s, "
                            "error=%s]", task.db_path, task.checkpoint_id, exc)


class SlateDbDataSource(DataSource):
    """The ``slatedb`` format (register it with :func:`slatelib.spark.register`)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        o = ReadOptions.parse(self.options)
        result: StructType = from_arrow_schema(
            arrow_schema(o.columns, o.decode, change=o.since_checkpoint is not None))
        return result

    def reader(self, schema: StructType) -> SlateDbReader:
        return SlateDbReader(ReadOptions.parse(self.options))


class PlannedRead:
    """The ``mapInArrow`` function of :func:`planned_frame`: its input rows are indexes into
    the pickled planned partitions, and it yields each one's batches from
    :meth:`SlateDbReader.read` (a module-level class, so executors import it rather than
    unpickle a closure)."""

    def __init__(self, reader: SlateDbReader, partitions: Sequence[InputPartition]) -> None:
        self.reader = reader
        # each task unpickles only its own partition (the list itself travels in the
        # function, which PySpark broadcasts when it is large)
        self.partitions = [pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL)
                           for p in partitions]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                if not 0 <= index < len(self.partitions):
                    raise InvalidArgumentError(
                        f"planned read: partition index {index} outside "
                        f"[0, {len(self.partitions)})")
                yield from self.reader.read(pickle.loads(self.partitions[index]))


def planned_frame(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """The DataFrame ``spark.read.format("slatedb").options(**options).load()`` returns (the
    same schema, partitions and rows), planned now in this process: one Spark partition per
    planned key range, each read by :meth:`SlateDbReader.read` in ``mapInArrow``. It skips
    the data source's Python planner workers (separate processes for the schema and for the
    partitions, importing slatelib and pyarrow on first use) and its row-based JVM reader.

    The plan is fixed at this call, so ``options`` must name a ``checkpoint`` (live for as
    long as the DataFrame is used); a temporary checkpoint, deleted once every partition
    has been read, would not survive a second action.

    Raises:
        InvalidArgumentError: bad options, or no ``checkpoint``.
        InvalidDbStateError: an unknown or expired checkpoint (``since_checkpoint`` too).
        NotADatabaseRootError: no database at ``db``.
    """
    parsed = ReadOptions.parse(options)
    if parsed.checkpoint is None:
        raise InvalidArgumentError("a planned slatedb read needs option checkpoint (the plan "
                                   "is made once; use spark.read.format('slatedb') otherwise)")
    reader = SlateDbReader(parsed)
    partitions = list(reader.partitions())
    schema: StructType = from_arrow_schema(reader.schema)
    n = len(partitions)
    read = on_executors(spark.sparkContext, PlannedRead(reader, partitions), iterator=True)
    return spark.range(0, n, 1, n).mapInArrow(read, schema)


__all__ = ["FORMAT_NAME", "PlannedRead", "ScanPartition", "SlateDbDataSource", "SlateDbReader",
           "key_condition", "planned_frame"]
