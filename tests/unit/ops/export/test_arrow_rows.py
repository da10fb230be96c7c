"""Visible rows as Arrow batches: columns, types, UTF-8 decoding."""

from __future__ import annotations

import pyarrow as pa
import pytest

from slatelib.errors import DataError, InvalidArgumentError
from slatelib.ops.export.arrow_rows import COLUMNS, arrow_schema, parse_columns, to_batch

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
