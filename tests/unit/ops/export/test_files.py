"""The export target: its state, and the Parquet files in it with their row counts."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slatelib.errors import InvalidArgumentError, StorageError
from slatelib.ops.export.files import (
    ABSENT,
    DELTA,
    EMPTY,
    OTHER,
    count_values,
    delete_dir,
    new_changes_dir,
    parquet_files,
    read_staged,
    staged_files,
    target_state,
)


def test_target_states(tmp_path: Path) -> None:
    assert target_state(f"file://{tmp_path}/none") == ABSENT
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "_SUCCESS").write_text("")
    assert target_state(f"file://{tmp_path}/empty") == EMPTY
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.csv").write_text("x")
    assert target_state(f"file://{tmp_path}/other") == OTHER
    (tmp_path / "t" / "_delta_log").mkdir(parents=True)
    assert target_state(f"file://{tmp_path}/t") == DELTA
    (tmp_path / "file").write_text("x")
    assert target_state(f"file://{tmp_path}/file") == OTHER


def test_parquet_files_counts_rows_and_skips_hidden_entries(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "_temporary").mkdir()
    table = pa.table({"key": [b"a", b"b", b"c"]})
    pq.write_table(table, tmp_path / "sub" / "p0.parquet")
    pq.write_table(table.slice(0, 1), tmp_path / "p1.parquet")
    pq.write_table(table, tmp_path / "_temporary" / "p2.parquet")
    files = parquet_files(f"file://{tmp_path}")
    assert {p: f.rows for p, f in files.items()} == {"sub/p0.parquet": 3, "p1.parquet": 1}
    assert all(f.size > 0 for f in files.values())
    assert set(parquet_files(f"file://{tmp_path}", under="sub")) == {"sub/p0.parquet"}
    delete_dir(f"file://{tmp_path}", "sub")
    assert set(parquet_files(f"file://{tmp_path}")) == {"p1.parquet"}


CHANGES = pa.schema([pa.field("_change", pa.string(), False), pa.field("key", pa.binary(), False),
                     pa.field("value", pa.binary(), False)])


def _stage(tmp_path: Path, name: str, parts: int, rows: int) -> None:
    """Staged change files as Spark writes them: nullable, a wider string type, an extra
    column, and its bookkeeping files beside the data."""
    (tmp_path / name).mkdir(parents=True)
    (tmp_path / name / "_SUCCESS").write_text("")
    for p in range(parts):
        n = range(p * rows, (p + 1) * rows)
        pq.write_table(pa.table({
            "extra": pa.array([1] * rows),
            "value": pa.array([b"v%d" % i for i in n], pa.binary()),
            "key": pa.array([b"k%06d" % i for i in n], pa.binary()),
            "_change": pa.array(["delete" if i % 4 == 0 else "upsert" for i in n],
                                pa.large_string())}), tmp_path / name / f"part-{p}.parquet")
        (tmp_path / name / f".part-{p}.parquet.crc").write_text("")


def test_staged_changes_are_hidden_and_read_back_batch_by_batch(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}"
    name = new_changes_dir()
    assert re.fullmatch(r"_slatelib-changes-[0-9a-f]{16}", name) and name != new_changes_dir()
    _stage(tmp_path, name, parts=3, rows=1000)
    assert target_state(uri) == EMPTY and parquet_files(uri) == {}  # hidden
    staged = staged_files(uri, name)
    assert [f.path for f in staged] == [f"{name}/part-{p}.parquet" for p in range(3)]
    assert [f.rows for f in staged] == [1000] * 3 and all(f.size > 0 for f in staged)
    assert count_values(uri, staged, "_change") == {"delete": 750, "upsert": 2250}
    reader = read_staged(uri, staged, CHANGES, batch_rows=256)
    assert reader.schema.equals(CHANGES)
    keys: list[bytes] = []
    for batch in reader:
        assert batch.schema.equals(CHANGES) and 0 < batch.num_rows <= 256
        keys += batch.column("key").to_pylist()
    assert keys == [b"k%06d" % i for i in range(3000)]
    assert staged_files(uri, "_none") == [] and count_values(uri, [], "_change") == {}
    assert read_staged(uri, [], CHANGES).read_all().num_rows == 0
    with pytest.raises(InvalidArgumentError, match="no staging folder"):
        staged_files(uri, "/")


def test_read_staged_holds_one_batch_not_the_whole_stage(tmp_path: Path) -> None:
    """Arrow memory while draining 400 batches stays bounded by the Parquet pages being
    decoded (about 10 MB here, measured with pyarrow's allocator), not by the staged data
    (two files of one 400k-row row group each, about 35 MB decoded)."""
    uri = f"file://{tmp_path}"
    _stage(tmp_path, "_slatelib-changes-big", parts=2, rows=400_000)
    staged = staged_files(uri, "_slatelib-changes-big")
    assert all(pq.ParquetFile(tmp_path / f.path).metadata.num_row_groups == 1 for f in staged)
    whole = pq.read_table(tmp_path / "_slatelib-changes-big").nbytes
    base = pa.total_allocated_bytes()
    peak, batches = 0, 0
    for batch in read_staged(uri, staged, CHANGES, batch_rows=2_000):
        peak = max(peak, pa.total_allocated_bytes() - base)
        batches += 1
        del batch
    assert batches == 400 and whole > 30 << 20
    assert peak < 16 << 20 and peak < whole / 2, (peak, whole)


def test_a_staged_file_without_a_column_is_a_storage_error(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}"
    (tmp_path / "_s").mkdir()
    pq.write_table(pa.table({"key": [b"a"]}), tmp_path / "_s" / "p.parquet")
    with pytest.raises(StorageError, match="staged change files"):
        read_staged(uri, staged_files(uri, "_s"), CHANGES).read_all()
