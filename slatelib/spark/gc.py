"""The Spark side of GC: distributed listing, DataFrame joins, parallel deletes.

:class:`SparkBackend` implements :class:`slatelib.ops.gc.backend.GcBackend`:

- ``manifest/`` and ``compactions/`` are listed by the driver, which needs them anyway for
  the boundary files. For ``wal/`` and ``compacted/`` the driver lists one page (1000
  objects); a directory that fits in it and is no larger than ``local_threshold`` is decided
  on the driver, as ``slate gc`` would. A larger directory is cut into key ranges, ``wal/``
  by id and ``compacted/`` by ULID (creation time) (:mod:`slatelib.core.gc_ranges`), and
  the executors list the ranges in parallel with ``start_after``/``end_before``.
- The listing is a DataFrame and the SSTs referenced by the live manifests another. They
  are joined (broadcast, left): the unmatched rows, i.e. the anti-join, are the
  unreferenced objects; the matched rows carry which manifest keeps them (their reason).
  Executors decide every row with the broadcast :class:`GcRules`.
- Deleting: the candidates are anti-joined with the references from a fresh read on the
  driver, re-decided on the executors with rules from that fresh read, and deleted per
  partition in batches of 1000 paths with at most ``delete_concurrency`` requests in flight
  per task (so per executor: its task slots times that).

The driver never holds a listing of ``wal/`` or ``compacted/``: only counts, the references
(derived from the manifests it reads anyway) and, for a dry run, the decisions streamed one
partition at a time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from slatelib.core.gc_ranges import ListRange, ranges_from_cuts, ulid_cuts, wal_cuts
from slatelib.core.gc_rules import Action, GcDecision, GcRules, ObjectKind
from slatelib.ids import Ulid, ulid_from_str, ulid_time_ms, ulid_to_str
from slatelib.objstore import ObjectStore
from slatelib.ops.gc.backend import LocalBackend, LocalDecisions, LocalListing, Tally
from slatelib.ops.gc.exec import (
    DELETE_BATCH,
    DeleteTally,
    Row,
    decide_rows,
    id_key,
    list_range_keyed,
    revalidate_and_delete,
)
from slatelib.ops.gc.state import list_directory
from slatelib.ops.progress import start
from slatelib.paths import COMPACTED_DIR, WAL_DIR, join, parse_compacted_name, parse_wal_name
from slatelib.spark.executors import on_executors
from slatelib.spark.progress import track

LISTED = StructType([
    StructField("path", StringType(), False),
    StructField("size", LongType(), False),
    StructField("mtime", LongType(), False),
    StructField("id", StringType(), True),
])
RANGES = StructType([StructField("start_after", StringType(), True),
                     StructField("end_before", StringType(), True)])
TALLY = StructType([StructField("tally", StringType(), False)])
REFS = StructType([StructField("id", StringType(), False), StructField("ref", StringType(), False)])
DECIDED = StructType([
    StructField("path", StringType(), False),
    StructField("kind", StringType(), False),
    StructField("action", StringType(), False),
    StructField("reason", StringType(), False),
    StructField("size", LongType(), False),
    StructField("mtime", LongType(), False),
    StructField("id", StringType(), True),
])
ROWS_PER_DELETE_PARTITION = 20_000
ROWS_PER_LIST_PARTITION = 10_000
COLLECT_DECISIONS_MAX = 20_000
PROBE = 1000
"""Objects listed by the driver to size a directory (one S3 LIST page)."""
DISTRIBUTE_DELETES_ABOVE = 2_000


class SparkListing:
    def __init__(self, root: str, directory: str, df: DataFrame) -> None:
        self.root = root
        self.directory = directory
        self.df = df


class SparkDecisions:
    """Decisions as a persisted DataFrame (:data:`DECIDED`)."""

    def __init__(self, df: DataFrame) -> None:
        self.df = df
        self._tally: Tally | None = None

    def tally(self) -> Tally:
        if self._tally is None:
            rows = self.df.groupBy("kind", "action").agg(
                F.count(F.lit(1)).alias("n"), F.sum("size").alias("b")).collect()
            self._tally = {(r["kind"], r["action"]): (int(r["n"]), int(r["b"] or 0))
                           for r in rows}
        return self._tally

    def max_delete_id(self) -> int | None:
        row = self.df.filter(F.col("action") == Action.DELETE.value) \
            .agg(F.max(F.col("id").cast(LongType())).alias("m")).first()
        return None if row is None or row["m"] is None else int(row["m"])

    def __iter__(self) -> Iterator[GcDecision]:
        """Decisions in listing (path) order: collected at once when few, else streamed
        one partition at a time."""
        total = sum(n for n, _ in self.tally().values())
        rows = self.df.collect() if total <= COLLECT_DECISIONS_MAX else self.df.toLocalIterator(True)
        for r in rows:
            yield GcDecision(r["path"], ObjectKind(r["kind"]), Action(r["action"]), r["reason"],
                             int(r["size"]), int(r["mtime"]))


class SparkBackend:
    """GC backend over a SparkSession (see the module docstring)."""

    def __init__(self, spark: SparkSession, *, list_partitions: int = 0,
                 delete_concurrency: int = 16, batch_size: int = DELETE_BATCH,
                 local_threshold: int = PROBE) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        parallelism = max(2, int(self.sc.defaultParallelism))
        self.list_partitions = list_partitions or min(64, 4 * parallelism)
        self.delete_concurrency = delete_concurrency
        self.batch_size = batch_size
        self.local_threshold = local_threshold
        self._cached: list[DataFrame] = []
        self.local = LocalBackend(concurrency=delete_concurrency, batch_size=batch_size)

    # -- listing -----------------------------------------------------------------------------
    def list_dir(self, store: ObjectStore, root: str, directory: str, hi_hint: int) -> Any:
        """``wal/`` and ``compacted/``: a first page (up to :data:`PROBE` objects) is listed
        here; a directory that fits in it is decided here too when it is no larger than
        ``local_threshold``, else it becomes a DataFrame as it is. A larger directory is cut
        into key ranges that the executors list in parallel."""
        if directory not in (WAL_DIR, COMPACTED_DIR):
            return self.local.list_dir(store, root, directory, hi_hint)
        progress = start(f"gc list {join(root, directory)}")
        probe: list[Row] = []
        for meta in list_directory(store, root, directory):
            probe.append((meta.path, meta.size, meta.last_modified_ms))
            progress.update(len(probe))
            if len(probe) > PROBE:
                break
        if len(probe) <= PROBE:
            progress.finish(len(probe))
            if len(probe) <= self.local_threshold:
                return LocalListing(root, probe)
            rows = [(p, s, m, id_key(root, p, s)) for p, s, m in probe]
            return SparkListing(root, directory,
                                self.spark.createDataFrame(rows, LISTED).coalesce(1))
        spec = store.spec
        listed = spec.wal if directory == WAL_DIR and spec.wal is not None else spec
        if listed.url.startswith("file:"):
            # A local directory cannot be listed by key range without reading all of it,
            # so one task lists it once; deciding and deleting are still spread out.
            tasks: list[tuple[str | None, str | None]] = [(None, None)]
        else:
            tasks = [(r.start_after, r.end_before)
                     for r in self.ranges(root, directory, probe, hi_hint)]

        listed_count = self.sc.accumulator(0)  # progress: objects listed by finished tasks

        def list_batches(batches: Iterator[Any]) -> Iterator[Any]:
            for batch in batches:
                for start_after, end_before in zip(batch["start_after"], batch["end_before"],
                                                   strict=True):
                    rows = list_range_keyed(spec, root, directory, start_after, end_before)
                    listed_count.add(len(rows))
                    yield _frame(LISTED, rows)

        # One range per partition (parallelize slices exactly), listed through Arrow.
        ranges = self.spark.createDataFrame(self.sc.parallelize(tasks, len(tasks)), RANGES)
        df = ranges.mapInPandas(on_executors(self.sc, list_batches, iterator=True), LISTED)
        if len(tasks) == 1:
            df = df.repartition(max(2, int(self.sc.defaultParallelism)))
        df = df.persist()
        self._cached.append(df)
        # Listed here, under progress, rather than by the first action that needs it.
        with track(self.sc, progress, counter=listed_count):
            n_listed = df.count()
        progress.finish(n_listed)
        return SparkListing(root, directory, df)

    def ranges(self, root: str, directory: str, probe: list[Row], hi_hint: int) -> list[ListRange]:
        """Key ranges of ``<root>/<directory>/``: the density of the first page estimates
        how many objects lie between its first name and ``hi_hint``, which sets the number
        of ranges (about :data:`ROWS_PER_LIST_PARTITION` objects each, at most
        ``list_partitions``); the cuts are spread evenly by id or ULID time."""
        prefix = join(root, directory)
        first, last = probe[0][0].rsplit("/", 1)[-1], probe[-1][0].rsplit("/", 1)[-1]
        if directory == COMPACTED_DIR:
            a, b = parse_compacted_name(first), parse_compacted_name(last)
            lo = ulid_time_ms(a) if a is not None else hi_hint
            hi_page = ulid_time_ms(b) if b is not None else hi_hint
        else:
            wa, wb = parse_wal_name(first), parse_wal_name(last)
            lo = wa if wa is not None else hi_hint
            hi_page = wb if wb is not None else hi_hint
        span = max(1, hi_page - lo)
        estimate = len(probe) * max(1.0, (hi_hint - lo) / span)
        n = max(2, min(self.list_partitions, math.ceil(estimate / ROWS_PER_LIST_PARTITION)))
        cuts = (ulid_cuts if directory == COMPACTED_DIR else wal_cuts)(prefix, lo, hi_hint, n)
        return ranges_from_cuts(prefix, cuts)

    def unlisted(self, listing: Any, ids: set[Ulid]) -> list[Ulid]:
        if isinstance(listing, LocalListing):
            return self.local.unlisted(listing, ids)
        if not ids:
            return []
        wanted = self.spark.createDataFrame([(ulid_to_str(i),) for i in sorted(ids)],
                                            StructType([REFS.fields[0]]))
        present = listing.df.filter(F.col("id").isNotNull()).select("id")
        rows = wanted.join(present, "id", "left_anti").collect()
        return sorted(ulid_from_str(r["id"]) for r in rows)

    # -- deciding --------------------------------------------------------------------------
    def _refs_df(self, refs: Mapping[Ulid, str]) -> DataFrame:
        return self.spark.createDataFrame([(ulid_to_str(k), v) for k, v in refs.items()], REFS)

    def decide(self, listing: Any, rules: GcRules, refs: Mapping[Ulid, str]) -> Any:
        if isinstance(listing, LocalListing):
            return self.local.decide(listing, rules, refs)
        # A left join with the (broadcast) references: rows without a match are the
        # anti-join, the unreferenced candidates; matched rows carry the manifest that keeps
        # them. The listing's partitions and path order are preserved.
        joined = listing.df.join(F.broadcast(self._refs_df(refs)), "id", "left")
        bc = self.sc.broadcast(rules)

        def decide_batches(batches: Iterator[Any]) -> Iterator[Any]:
            rules = bc.value
            for b in batches:
                rows = zip(b["path"], b["size"].tolist(), b["mtime"].tolist(), b["id"], b["ref"],
                           strict=True)
                yield _frame(DECIDED, decide_rows(rules, rows))

        decided = joined.mapInPandas(on_executors(self.sc, decide_batches, iterator=True),
                                     DECIDED).persist()
        self._cached.append(decided)
        return SparkDecisions(decided)

    def describe(self, listing: Any) -> dict[str, int]:
        if isinstance(listing, LocalListing):
            return self.local.describe(listing)
        sizes = [int(r["n"]) for r in listing.df.groupBy(F.spark_partition_id().alias("p"))
                 .agg(F.count(F.lit(1)).alias("n")).collect()]
        return {"objects": sum(sizes), "ranges": listing.df.rdd.getNumPartitions(),
                "nonempty_ranges": len(sizes), "largest_range": max(sizes, default=0)}

    def release(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached.clear()

    # -- deleting --------------------------------------------------------------------------
    def execute(self, store: ObjectStore, decisions: Any, rules: GcRules,
                refs: Mapping[Ulid, str], skip: frozenset[str] = frozenset()) -> DeleteTally:
        """See :meth:`GcBackend.execute`: a small candidate set is deleted by the driver,
        a large one in partitions of about :data:`ROWS_PER_DELETE_PARTITION` paths.

        Raises:
            InternalError: a candidate lies outside the database (checked per partition,
                before anything of it is deleted).
        """
        if isinstance(decisions, LocalDecisions):
            rows = [(d.path, d.size, d.last_modified_ms) for d in decisions if d.deletes]
            if len(rows) <= DISTRIBUTE_DELETES_ABOVE:
                return self.local.execute(store, decisions, rules, refs, skip)
            to_delete = len(rows)
            cands = self.spark.createDataFrame(
                [(p, s, m, id_key(rules.root, p, s)) for p, s, m in rows], LISTED)
        else:
            to_delete = sum(n for (_, action), (n, _) in decisions.tally().items()
                            if action == Action.DELETE.value)
            if to_delete == 0:
                return DeleteTally()
            cands = decisions.df.filter(F.col("action") == Action.DELETE.value) \
                .select("path", "size", "mtime", "id")
        # Candidates without a match in the fresh references (the anti-join) go on to the
        # fresh rules; matched ones carry the manifest that now keeps them.
        joined = cands.join(F.broadcast(self._refs_df(refs)), "id", "left")
        parts = max(int(self.sc.defaultParallelism),
                    math.ceil(to_delete / ROWS_PER_DELETE_PARTITION))
        spec, bc = store.spec, self.sc.broadcast(rules)
        conc, batch = self.delete_concurrency, self.batch_size

        done_count = self.sc.accumulator(0)  # progress: candidates done by finished tasks

        def delete_batches(batches: Iterator[Any]) -> Iterator[Any]:
            items = [row for b in batches for row in zip(
                b["path"], b["size"].tolist(), b["mtime"].tolist(), b["ref"], strict=True)]
            tally = revalidate_and_delete(spec, bc.value, items, skip, conc, batch)
            done_count.add(len(items))
            yield _frame(TALLY, [(json.dumps(vars(tally)),)])

        out = DeleteTally()
        guarded = on_executors(self.sc, delete_batches, iterator=True)
        kinds = sorted({k for (k, action) in decisions.tally() if action == Action.DELETE.value})
        progress = start(" ".join(["gc delete", rules.root or "/", *kinds]), total=to_delete)
        with track(self.sc, progress, counter=done_count):
            results = joined.repartition(parts).mapInPandas(guarded, TALLY).collect()
        progress.finish()  # the tasks' own count, as the last poll left it
        for row in results:
            out.merge(DeleteTally(**json.loads(row["tally"])))
        return out


def _frame(schema: StructType, rows: Iterable[tuple[Any, ...]]) -> Any:
    """Rows as a pandas frame with the schema's column names and dtypes (also when empty)."""
    import importlib

    pd: Any = importlib.import_module("pandas")  # executors only; no stubs for mypy
    names = schema.fieldNames()
    frame = pd.DataFrame.from_records(list(rows), columns=names)
    for f in schema.fields:
        if isinstance(f.dataType, LongType):
            frame[f.name] = frame[f.name].astype("int64")
        else:
            frame[f.name] = frame[f.name].astype(object)
    return frame
