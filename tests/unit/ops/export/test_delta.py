"""delta-rs: committing files Spark wrote, merging changes, and the export marks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from slatelib.errors import InvalidArgumentError, InvalidDbStateError
from slatelib.ops.export.arrow_rows import arrow_schema
from slatelib.ops.export.delta import (
    NON_DATA_OPERATIONS,
    ExportMark,
    check_columns,
    check_schema,
    commit_files,
    commit_report,
    last_export,
    merge_changes,
    refuse_unless_delta,
    require_table,
)
from slatelib.ops.export.files import parquet_files

SCHEMA = arrow_schema(("key", "value"))
MARK = ExportMark("file:///db", "c1", 3, ("key", "value"))


def _write(root: Path, name: str, rows: dict[bytes, bytes]) -> None:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"key": list(rows), "value": list(rows.values())}, schema=SCHEMA),
                   root / name)


def _content(uri: str) -> dict[bytes, bytes]:
    return {r["key"]: r["value"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist()}


def test_mark_round_trip() -> None:
    assert ExportMark.from_metadata(MARK.to_metadata()) == MARK
    assert ExportMark.from_metadata("not json") is None
    assert ExportMark.from_metadata(None) is None


def test_commit_then_merge(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _write(tmp_path / "t", "s1/p0.parquet", {b"a": b"1", b"b": b"2"})
    files = list(parquet_files(uri, under="s1").values())
    assert commit_files(uri, files, SCHEMA, mode="overwrite", mark=MARK, create=True) == 0
    assert _content(uri) == {b"a": b"1", b"b": b"2"}
    assert last_export(uri) == (0, MARK)
    check_schema(uri, SCHEMA)
    with pytest.raises(InvalidArgumentError, match="columns"):
        check_schema(uri, arrow_schema(("key", "value", "seq")))
    changes = pa.table({"_change": ["delete", "upsert", "upsert"], "key": [b"a", b"b", b"c"],
                        "value": [b"1", b"20", b"3"]},
                       schema=arrow_schema(("key", "value"), change=True))
    mark2 = ExportMark("file:///db", "c2", 5, ("key", "value"))
    version, metrics = merge_changes(uri, changes, ("key", "value"), mark=mark2, schema=SCHEMA)
    assert version == 1 and metrics["num_target_rows_deleted"] == 1
    assert _content(uri) == {b"b": b"20", b"c": b"3"}
    assert last_export(uri) == (1, mark2)
    # no change still records the new checkpoint
    mark3 = ExportMark("file:///db", "c3", 6, ("key", "value"))
    assert merge_changes(uri, changes.slice(0, 0), ("key", "value"), mark=mark3,
                         schema=SCHEMA)[0] == 2
    assert last_export(uri) == (2, mark3) and _content(uri) == {b"b": b"20", b"c": b"3"}
    # an overwrite replaces every earlier file in one commit
    _write(tmp_path / "t", "s2/p0.parquet", {b"z": b"9"})
    files = list(parquet_files(uri, under="s2").values())
    assert commit_files(uri, files, SCHEMA, mode="overwrite", mark=MARK, create=False) == 3
    assert _content(uri) == {b"z": b"9"}


def test_last_export_refuses_foreign_writes_after_the_mark() -> None:
    history = [{"version": 5, "operation": "OPTIMIZE"},
               {"version": 4, "operation": "WRITE", "userMetadata": MARK.to_metadata()}]
    assert last_export("unused", history) == (4, MARK)
    foreign = [{"version": 6, "operation": "DELETE"}, *history]
    with pytest.raises(InvalidDbStateError, match="version 6 \\(DELETE\\)"):
        last_export("unused", foreign)
    with pytest.raises(InvalidDbStateError, match="no slatelib export commit"):
        last_export("unused", [{"version": 0, "operation": "OPTIMIZE"}])


@pytest.mark.parametrize("op", ["OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES",
                                "UNSET TBLPROPERTIES", "UPGRADE PROTOCOL", "ADD CONSTRAINT",
                                "DROP CONSTRAINT", "REORG", "COMPUTE STATS"])
def test_delta_spark_operations_that_keep_the_rows_pass(op: str) -> None:
    history = [{"version": 2, "operation": op},
               {"version": 1, "operation": "MERGE", "userMetadata": MARK.to_metadata()}]
    assert last_export("unused", history) == (1, MARK)


@pytest.mark.parametrize("op", ["WRITE", "MERGE", "DELETE", "UPDATE", "RESTORE", "TRUNCATE",
                                "CREATE OR REPLACE TABLE", "CREATE TABLE", "REPLACE TABLE",
                                "STREAMING UPDATE", "CLONE", "ADD COLUMNS", "CHANGE COLUMN",
                                "REPLACE COLUMNS", "DROP COLUMNS", "RENAME COLUMN", "FSCK"])
def test_delta_spark_and_delta_rs_operations_that_change_rows_refuse(op: str) -> None:
    assert op not in NON_DATA_OPERATIONS
    history = [{"version": 2, "operation": op, "userMetadata": None},
               {"version": 1, "operation": "WRITE", "userMetadata": MARK.to_metadata()}]
    with pytest.raises(InvalidDbStateError, match=f"version 2 \\({op}\\)"):
        last_export("unused", history)
    # another writer's userMetadata that is not a mark counts as a foreign commit too
    history[0]["userMetadata"] = '{"slatelib_export": "no"}'
    with pytest.raises(InvalidDbStateError):
        last_export("unused", history)


def test_commit_report_of_delta_spark_write_and_merge_metrics() -> None:
    write = {"version": 3, "operation": "WRITE", "operationMetrics": {
        "numOutputRows": "100", "numOutputBytes": "2181", "numFiles": "2",
        "numRemovedFiles": "4", "numRemovedBytes": "4362"}}
    assert commit_report(write) == {"delta_version": 3, "rows": 100, "bytes": 2181, "files": 2}
    merge = {"version": 4, "operation": "MERGE", "operationMetrics": {
        "numSourceRows": "7", "numTargetRowsInserted": "2", "numTargetRowsUpdated": "3",
        "numTargetRowsDeleted": "2", "numTargetFilesAdded": "1", "numTargetBytesAdded": "1069",
        "numOutputRows": "50", "numTargetRowsCopied": "45", "executionTimeMs": "20265"}}
    got = commit_report(merge)
    assert {k: got[k] for k in ("delta_version", "rows", "bytes", "files", "changes")} == {
        "delta_version": 4, "rows": 7, "bytes": 1069, "files": 1,
        "changes": {"upserts": 5, "deletes": 2}}
    assert got["merge"]["numTargetRowsCopied"] == 45 and got["merge"]["numSourceRows"] == 7
    empty = {"version": 5, "operation": "MERGE", "operationMetrics": {}}
    assert commit_report(empty) == {"delta_version": 5, "rows": 0, "bytes": 0, "files": 0,
                                    "changes": {"upserts": 0, "deletes": 0}, "merge": {}}


def test_check_columns_compares_names_types_and_order() -> None:
    check_columns("t", [("key", "binary"), ("value", "binary")], SCHEMA)
    for bad in ([("key", "binary")], [("value", "binary"), ("key", "binary")],
                [("key", "string"), ("value", "string")]):
        with pytest.raises(InvalidArgumentError, match="has columns"):
            check_columns("t", bad, SCHEMA)


def test_target_checks() -> None:
    for ok in ("absent", "empty", "delta"):
        refuse_unless_delta("t", ok)
    with pytest.raises(InvalidArgumentError, match="not a Delta table"):
        refuse_unless_delta("t", "other")
    require_table("t", "delta")
    with pytest.raises(InvalidDbStateError, match="no Delta table"):
        require_table("t", "absent")


def _changes(kinds_keys: list[tuple[str, bytes, bytes]]) -> pa.RecordBatch:
    return pa.record_batch({"_change": [k for k, _, _ in kinds_keys],
                            "key": [k for _, k, _ in kinds_keys],
                            "value": [v for _, _, v in kinds_keys]},
                           schema=arrow_schema(("key", "value"), change=True))


def test_merge_changes_streams_a_reader_of_many_batches(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _write(tmp_path / "t", "s1/p0.parquet", {b"k%03d" % i: b"old" for i in range(100)})
    commit_files(uri, list(parquet_files(uri, under="s1").values()), SCHEMA, mode="overwrite",
                 mark=MARK, create=True)
    change_schema = arrow_schema(("key", "value"), change=True)
    pulled: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        yield _changes([])  # an empty batch first: still a merge, not an empty commit
        for b in range(20):
            pulled.append(b)
            yield _changes([("delete" if i % 2 else "upsert", b"k%03d" % (b * 10 + i),
                             b"new") for i in range(10)])

    version, metrics = merge_changes(uri, pa.RecordBatchReader.from_batches(change_schema,
                                                                            batches()),
                                     ("key", "value"), mark=MARK, schema=SCHEMA)
    assert version == 1 and pulled == list(range(20))
    assert metrics["num_source_rows"] == 200 and metrics["num_target_rows_deleted"] == 50
    # odd keys are deletes (of 50 rows, and of 50 keys the table never had)
    assert _content(uri) == {b"k%03d" % i: b"new" for i in range(0, 200, 2)}
    # a stream without a row commits an empty transaction with the new mark
    empty = pa.RecordBatchReader.from_batches(change_schema, iter([_changes([])]))
    mark2 = ExportMark("file:///db", "c2", 5, ("key", "value"))
    assert merge_changes(uri, empty, ("key", "value"), mark=mark2, schema=SCHEMA)[0] == 2
    assert last_export(uri) == (2, mark2)


@pytest.mark.parametrize("streamed_exec", [False, True])
def test_a_stream_failing_in_the_merge_commits_nothing(tmp_path: Path,
                                                       streamed_exec: bool) -> None:
    uri = str(tmp_path / "t")
    _write(tmp_path / "t", "s1/p0.parquet", {b"a": b"1", b"b": b"2"})
    commit_files(uri, list(parquet_files(uri, under="s1").values()), SCHEMA, mode="overwrite",
                 mark=MARK, create=True)
    change_schema = arrow_schema(("key", "value"), change=True)

    def batches() -> Iterator[pa.RecordBatch]:
        yield _changes([("upsert", b"a", b"10")])
        yield _changes([("delete", b"b", b"")])
        raise OSError("disk gone while streaming")

    with pytest.raises(Exception, match="disk gone while streaming"):
        merge_changes(uri, pa.RecordBatchReader.from_batches(change_schema, batches()),
                      ("key", "value"), mark=ExportMark("file:///db", "c2", 5, ("key", "value")),
                      schema=SCHEMA, streamed_exec=streamed_exec)
    assert DeltaTable(uri).version() == 0 and last_export(uri) == (0, MARK)
    assert _content(uri) == {b"a": b"1", b"b": b"2"}
