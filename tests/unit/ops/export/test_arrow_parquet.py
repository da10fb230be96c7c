"""Parquet files written by pyarrow per partition and committed as a set."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slatelib.errors import InvalidArgumentError
from slatelib.ops.export.arrow_parquet import (
    SUCCESS,
    abort,
    commit_parts,
    part_name,
    staging_dir,
    write_part,
)
from slatelib.ops.export.arrow_rows import arrow_schema
from slatelib.ops.export.files import parquet_files

SCHEMA = arrow_schema(("key", "value"))


def batch(*keys: bytes) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(list(keys), pa.binary()), pa.array([k * 2 for k in keys], pa.binary())],
        schema=SCHEMA)


def test_parts_are_invisible_until_committed_then_overwrite_replaces(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/out"
    assert write_part(uri, "j1", 0, SCHEMA, [batch(b"a", b"b"), batch(b"c")]) == 3
    assert write_part(uri, "j1", 1, SCHEMA, []) == 0  # an empty partition keeps the schema
    assert parquet_files(uri) == {}  # staged under a hidden folder
    names = commit_parts(uri, "j1", [0, 1], "overwrite")
    assert names == [part_name("j1", 0), part_name("j1", 1)]
    assert not (tmp_path / "out" / staging_dir("j1")).exists()
    assert (tmp_path / "out" / SUCCESS).exists()
    table = pq.read_table(tmp_path / "out")
    assert table.schema.equals(SCHEMA)
    assert table.column("key").to_pylist() == [b"a", b"b", b"c"]
    # a second export overwrites the first's files, an append keeps them
    write_part(uri, "j2", 0, SCHEMA, [batch(b"x")])
    commit_parts(uri, "j2", [0], "overwrite")
    assert sorted(parquet_files(uri)) == [part_name("j2", 0)]
    write_part(uri, "j3", 0, SCHEMA, [batch(b"y")])
    commit_parts(uri, "j3", [0], "append")
    assert sorted(parquet_files(uri)) == [part_name("j2", 0), part_name("j3", 0)]
    assert sorted(pq.read_table(tmp_path / "out").column("key").to_pylist()) == [b"x", b"y"]


def test_a_retried_task_replaces_its_file(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/out"
    write_part(uri, "j", 0, SCHEMA, [batch(b"a", b"b")])
    write_part(uri, "j", 0, SCHEMA, [batch(b"a", b"b")])
    commit_parts(uri, "j", [0], "overwrite")
    assert pq.read_table(tmp_path / "out").num_rows == 2


def test_a_missing_part_commits_nothing_and_abort_removes_the_staging(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/out"
    write_part(uri, "old", 0, SCHEMA, [batch(b"keep")])
    commit_parts(uri, "old", [0], "overwrite")
    write_part(uri, "j", 0, SCHEMA, [batch(b"a")])
    with pytest.raises(InvalidArgumentError, match="missing"):
        commit_parts(uri, "j", [0, 1], "overwrite")
    assert sorted(parquet_files(uri)) == [part_name("old", 0)]  # the old export is intact
    abort(uri, "j")
    assert not (tmp_path / "out" / staging_dir("j")).exists()
    abort(uri, "never-started")  # best effort: nothing to remove


def test_bad_input_is_refused(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/out"
    other = pa.RecordBatch.from_arrays([pa.array([b"k"], pa.binary())], names=["key"])
    with pytest.raises(InvalidArgumentError, match="partition 3 of export j"):
        write_part(uri, "j", 3, SCHEMA, [other])
    with pytest.raises(InvalidArgumentError, match="mode"):
        commit_parts(uri, "j", [], "merge")
