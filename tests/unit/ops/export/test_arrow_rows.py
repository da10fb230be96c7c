"""Visible rows as Arrow batches: columns, types, UTF-8 decoding; a scan task's batches from
the native pipeline's buffers equal those from its rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from slatelib.errors import DataError, InvalidArgumentError
from slatelib.format import seam
from slatelib.format.native_pipe import HAVE_NATIVE_PIPE, visible_buffers
from slatelib.objstore import ObjectStore
from slatelib.ops.export.arrow_rows import (
    COLUMNS,
    arrow_schema,
    buffers_to_batch,
    parse_columns,
    scan_task_batches,
    to_batch,
)
from slatelib.ops.export.pin import PinnedCheckpoint, create_read_checkpoint
from slatelib.ops.export.scan import plan_scan
from tests.unit.format._pipe_blocks import checked_groups
from tests.unit.native_only import require_native
from tests.unit.ops.export.support import PATH, build_db

ROWS = [(b"a", 5, 0, b"1", None, 10), (b"b", 6, 0, b"22", 99, None)]


def test_parse_columns_keeps_the_key_and_the_canonical_order() -> None:
    assert parse_columns(None) == ("key", "value")
    assert parse_columns("seq, value") == ("key", "value", "seq")
    assert parse_columns("all") == COLUMNS
    with pytest.raises(InvalidArgumentError, match="unknown column"):
        parse_columns("key,ttl")


def test_batch_of_every_column() -> None:
    batch = to_batch(ROWS, arrow_schema(COLUMNS))
    assert batch.to_pydict() == {"key": [b"a", b"b"], "value": [b"1", b"22"], "seq": [5, 6],
                                 "expire_ts": [None, 99], "create_ts": [10, None]}
    assert batch.schema.field("key").type == pa.binary()
    assert not batch.schema.field("key").nullable and batch.schema.field("expire_ts").nullable


def test_utf8_decoding_and_change_column() -> None:
    schema = arrow_schema(("key", "value"), "utf8", change=True)
    batch = to_batch(ROWS, schema, changes=["upsert", "delete"])
    assert batch.to_pydict() == {"_change": ["upsert", "delete"], "key": ["a", "b"],
                                 "value": ["1", "22"]}


def test_invalid_utf8_names_the_key() -> None:
    with pytest.raises(DataError, match="value of key 6b"):
        to_batch([(b"k", 1, 0, b"\xff\xfe", None, None)], arrow_schema(("key", "value"), "utf8"))


def test_unknown_decoding_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="decode"):
        arrow_schema(("key",), "latin1")


# ----------------------------------------------------------- scan tasks: native vs rows


@pytest.fixture(scope="module")
def pinned_db() -> tuple[ObjectStore, PinnedCheckpoint]:
    store, _ = build_db()
    return store, create_read_checkpoint(store, PATH, name="t", lifetime_s=3600)


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
@pytest.mark.parametrize("columns", [("key", "value"), COLUMNS, ("key", "seq", "create_ts")])
@pytest.mark.parametrize("partitions", [1, 3])
def test_native_batches_equal_the_row_batches(pinned_db: tuple[ObjectStore, PinnedCheckpoint],
                                              columns: tuple[str, ...], partitions: int,
                                              native: bool, monkeypatch: pytest.MonkeyPatch,
                                              ) -> None:
    """The native pipeline's buffers (checked blocks, WAL rows, merge operands folded in
    Python), and the buffers the seam packs in Python without it, give the batches the row
    path gives, column for column, nulls included."""
    if native:
        require_native(HAVE_NATIVE_PIPE, "the native pipeline")
    else:
        monkeypatch.setattr(seam, "_PIPE", None)
    store, pinned = pinned_db
    tasks = plan_scan(store, PATH, pinned.manifest, manifest_id=pinned.manifest_id,
                      checkpoint_id=pinned.checkpoint.id, merge_operator="concat",
                      partitions=partitions, min_partition_bytes=1)
    schema = arrow_schema(columns)
    for task in tasks:
        native_batches = list(scan_task_batches(task, schema, store=store))
        row_batches = list(scan_task_batches(task, schema, store=store, use_native=False))
        assert all(b.schema == schema for b in native_batches)
        got = pa.Table.from_batches(native_batches, schema)
        want = pa.Table.from_batches(row_batches, schema)
        got.validate(full=True)
        assert got.equals(want)
        assert got.num_rows > 20


def test_native_batches_decode_utf8_and_name_a_key_that_is_not() -> None:
    require_native(HAVE_NATIVE_PIPE, "the native pipeline")
    rows = [(b"a\xc3\xa9", 5, 0, b"ok", None, None), (b"b", 6, 0, b"\xff\xfe", 7, None)]
    groups, _ = checked_groups(rows, 2)
    [bufs] = list(visible_buffers([groups], None, expire_ts=True))
    batch = buffers_to_batch(bufs, arrow_schema(("key", "expire_ts"), "utf8"))
    assert batch.to_pydict() == {"key": ["a\u00e9", "b"], "expire_ts": [None, 7]}
    with pytest.raises(DataError, match="value of key 62 is not valid UTF-8"):
        buffers_to_batch(bufs, arrow_schema(("key", "value"), "utf8"))


def test_packed_batches_decode_utf8_and_name_a_key_that_is_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the extension the seam packs the same buffers in Python."""
    monkeypatch.setattr(seam, "_PIPE", None)
    rows = [(b"a\xc3\xa9", 5, 0, b"ok", None, None), (b"b", 6, 0, b"\xff\xfe", 7, None)]
    [bufs] = list(seam.visible_buffers([[rows]], None, seq=True, expire_ts=True))
    batch = buffers_to_batch(bufs, arrow_schema(("key", "seq", "expire_ts"), "utf8"))
    assert batch.to_pydict() == {"key": ["a\u00e9", "b"], "seq": [5, 6], "expire_ts": [None, 7]}
    with pytest.raises(DataError, match="value of key 62 is not valid UTF-8"):
        buffers_to_batch(bufs, arrow_schema(("key", "value"), "utf8"))


def test_row_batches_decode_utf8_and_name_a_key_that_is_not() -> None:
    """The row path (``to_batch``) names the same key as the native path above."""
    rows = [(b"a\xc3\xa9", 5, 0, b"ok", None, None), (b"b", 6, 0, b"\xff\xfe", 7, None)]
    batch = to_batch(rows, arrow_schema(("key", "expire_ts"), "utf8"))
    assert batch.to_pydict() == {"key": ["a\u00e9", "b"], "expire_ts": [None, 7]}
    with pytest.raises(DataError, match="value of key 62 is not valid UTF-8"):
        to_batch(rows, arrow_schema(("key", "value"), "utf8"))
