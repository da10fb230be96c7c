"""Visible rows as Arrow record batches: the columns of a checkpoint read. Spark-free.

Columns: ``key`` and ``value`` (binary, or UTF-8 text with ``decode="utf8"``), and the
optional metadata columns ``seq`` (int64), ``expire_ts`` and ``create_ts`` (int64 Unix ms,
null when the row has none). A change stream (incremental export) adds ``_change``
(``"upsert"`` / ``"delete"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

import pyarrow as pa  # type: ignore[import-untyped]

from slatelib.core.visible_rows import VisibleRow
from slatelib.errors import DataError, InvalidArgumentError

COLUMNS = ("key", "value", "seq", "expire_ts", "create_ts")
"""Every column a read can return, in the order they appear."""
DEFAULT_COLUMNS = ("key", "value")
DECODINGS = ("binary", "utf8")
CHANGE_COLUMN = "_change"
_INDEX = {"key": 0, "seq": 1, "value": 3, "expire_ts": 4, "create_ts": 5}
"""Where each column sits in a visible row (the row layout of :mod:`slatelib.core.row`)."""


def parse_columns(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """The requested columns in :data:`COLUMNS` order (``"all"``: every one); ``key`` is
    always there.

    Raises:
        InvalidArgumentError: an unknown column name.
    """
    if text is None:
        return DEFAULT_COLUMNS
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text)]
    names = [n for n in names if n]
    if names == ["all"]:
        return COLUMNS
    bad = [n for n in names if n not in COLUMNS]
    if bad:
        raise InvalidArgumentError(f"unknown column(s) {bad}; expected some of {COLUMNS} or 'all'")
    wanted = {"key", *names}
    return tuple(c for c in COLUMNS if c in wanted)


def arrow_schema(columns: Sequence[str], decode: str = "binary", *,
                 change: bool = False) -> pa.Schema:
    """The Arrow schema of a read (``change``: with the ``_change`` column first).

    Raises:
        InvalidArgumentError: an unknown decoding.
    """
    if decode not in DECODINGS:
        raise InvalidArgumentError(f"unknown decode {decode!r}; expected one of {DECODINGS}")
    text = pa.string() if decode == "utf8" else pa.binary()
    fields = [pa.field(CHANGE_COLUMN, pa.string(), nullable=False)] if change else []
    for c in columns:
        if c in ("key", "value"):
            fields.append(pa.field(c, text, nullable=False))
        else:
            fields.append(pa.field(c, pa.int64(), nullable=c != "seq"))
    return pa.schema(fields)


def to_batch(rows: Sequence[VisibleRow], schema: pa.Schema, *,
             changes: Sequence[str] | None = None) -> pa.RecordBatch:
    """One record batch of ``rows`` with the columns of ``schema`` (from
    :func:`arrow_schema`); ``changes`` fills ``_change``.

    Raises:
        DataError: a key or value is not valid UTF-8 under ``decode="utf8"`` (the key is
            named).
    """
    arrays: list[pa.Array] = []
    for f in schema:
        if f.name == CHANGE_COLUMN:
            arrays.append(pa.array(changes or [], pa.string()))
            continue
        values = list(map(itemgetter(_INDEX[f.name]), rows))
        if pa.types.is_string(f.type):
            arrays.append(_utf8(values, f.name, rows))
        else:
            arrays.append(pa.array(values, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _utf8(values: list[bytes], column: str, rows: Sequence[VisibleRow]) -> pa.Array:
    try:
        return pa.array(values, pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:
        for value, row in zip(values, rows, strict=True):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"the {column} of key {row[0].hex()} is not valid UTF-8 "
                                f"({exc}); read it with decode=binary") from exc
        raise
