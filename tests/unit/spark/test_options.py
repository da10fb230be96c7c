"""The data source's options, parsed without Spark."""

from __future__ import annotations

import pytest

from slatelib.core.ranges import BytesRange
from slatelib.errors import InvalidArgumentError
from slatelib.spark.options import ReadOptions, parse_key, split_db


def test_defaults() -> None:
    o = ReadOptions.parse({"db": "file:///data/db"})
    assert (o.store_url, o.path) == ("file:///", "data/db")
    assert o.checkpoint is None and o.since_checkpoint is None
    assert o.columns == ("key", "value") and o.decode == "binary"
    assert o.key_range == BytesRange.all() and o.checkpoint_lifetime_s == 3600


def test_every_option() -> None:
    o = ReadOptions.parse({
        "DB": "file:///data/fx/clone", "store_root": "file:///data/fx",
        "checkpoint": "0f6b9a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "start": "hex:6b00", "end": "m",
        "merge_operator": "concat", "columns": "all", "decode": "UTF8", "partitions": "3",
        "min_partition_bytes": "1", "checkpoint_lifetime": "10min"})
    assert (o.store_url, o.path) == ("file:///data/fx", "clone")
    assert o.key_range == BytesRange.half_open(b"k\x00", b"m")
    assert o.decode == "utf8" and o.partitions == 3 and o.checkpoint_lifetime_s == 600
    assert len(o.columns) == 5


@pytest.mark.parametrize("opts, message", [
    ({}, "needs option db"),
    ({"db": "file:///d", "colour": "x"}, "unknown slatedb option"),
    ({"db": "file:///d", "checkpoint": "nope"}, "nope"),
    ({"db": "file:///d", "partitions": "0"}, "partitions must be at least 1"),
    ({"db": "file:///d", "partitions": "two"}, "partitions must be an integer"),
    ({"db": "file:///d", "decode": "latin1"}, "decode"),
    ({"db": "file:///d", "start": "hex:zz"}, "malformed hex"),
    ({"db": "file:///d", "checkpoint_lifetime": "0s"}, "at least 1s"),
    ({"db": "file:///a/db", "store_root": "file:///b"}, "not under store_root"),
])
def test_bad_options_are_refused_naming_the_option(opts: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        ReadOptions.parse(opts)


def test_keys_and_split() -> None:
    assert parse_key("abc", "start") == b"abc" and parse_key("hex:00ff", "end") == b"\x00\xff"
    assert split_db("s3://b/x/db", None) == ("s3://b", "x/db")
