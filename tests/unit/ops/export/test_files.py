"""The export target: its state, and the Parquet files in it with their row counts."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from slatelib.ops.export.files import (
    ABSENT,
    DELTA,
    EMPTY,
    OTHER,
    delete_dir,
    parquet_files,
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
