"""Visible rows as Arrow record batches: the columns of a checkpoint read. Spark-free.

Columns: ``key`` and ``value`` (binary, or UTF-8 text with ``decode="utf8"``), and the
optional metadata columns ``seq`` (int64), ``expire_ts`` and ``create_ts`` (int64 Unix ms,
null when the row has none). A change stream (incremental export) adds ``_change``
(``"upsert"`` / ``"delete"``).

:func:`scan_task_batches` reads a scan task's batches: from the native pipeline's buffers
(:func:`buffers_to_batch`, wrapped with ``pyarrow.Array.from_buffers`` without a copy;
:func:`slatelib.format.seam.visible_buffers` packs them in Python when the extension is not
built), or with ``use_native=False`` from visible rows (:func:`to_batch`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter

import pyarrow as pa  # type: ignore[import-untyped]

from slatelib.core.visible_rows import VisibleRow
from slatelib.errors import DataError, InvalidArgumentError
from slatelib.format.native_pipe import ArrowBuffers
from slatelib.objstore import ObjectStore
from slatelib.ops.export.scan import ScanTask, scan_task_buffers, scan_task_rows

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
        _name_bad_utf8(column, ((row[0], v) for v, row in zip(values, rows, strict=True)))
        raise


def _name_bad_utf8(column: str, pairs: Iterable[tuple[bytes, bytes]]) -> None:
    """Raise DataError naming the key of the first value in ``(key, value)`` ``pairs`` that
    is not valid UTF-8 (returns if there is none)."""
    for key, value in pairs:
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"the {column} of key {key.hex()} is not valid UTF-8 "
                            f"({exc}); read it with decode=binary") from exc


def _binary(n: int, offsets: bytes, data: bytes, text: bool, column: str,
            keys: pa.Array | None) -> pa.Array:
    arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                 pa.py_buffer(data)])
    if not text:
        return arr
    out = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                 pa.py_buffer(data)])
    try:
        out.validate(full=True)
    except pa.ArrowInvalid:
        names = (keys if keys is not None else arr).to_pylist()
        _name_bad_utf8(column, zip(names, arr.to_pylist(), strict=True))
        raise
    return out


def _int64(n: int, data: bytes | None, valid: bytes | None, nulls: int) -> pa.Array:
    assert data is not None
    bitmap = None if valid is None or nulls == 0 else pa.py_buffer(valid)
    return pa.Array.from_buffers(pa.int64(), n, [bitmap, pa.py_buffer(data)], null_count=nulls)


def buffers_to_batch(b: ArrowBuffers, schema: pa.Schema) -> pa.RecordBatch:
    """One record batch with the columns of ``schema`` (from :func:`arrow_schema`, without
    ``_change``) over the native pipeline's buffers, without copying them.

    Raises:
        DataError: a key or value is not valid UTF-8 under ``decode="utf8"`` (the key is
            named).
    """
    n = b.num_rows
    arrays: list[pa.Array] = []
    keys = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(b.key_offsets),
                                                  pa.py_buffer(b.key_data)])
    for f in schema:
        text = pa.types.is_string(f.type)
        if f.name == "key":
            arrays.append(_binary(n, b.key_offsets, b.key_data, text, "key", keys))
        elif f.name == "value":
            arrays.append(_binary(n, b.value_offsets, b.value_data, text, "value", keys))
        elif f.name == "seq":
            arrays.append(_int64(n, b.seq, None, 0))
        elif f.name == "expire_ts":
            arrays.append(_int64(n, b.expire_ts, b.expire_valid, b.expire_nulls))
        elif f.name == "create_ts":
            arrays.append(_int64(n, b.create_ts, b.create_valid, b.create_nulls))
        else:
            raise InvalidArgumentError(f"column {f.name!r} is not a column of a read")
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def scan_task_batches(task: ScanTask, schema: pa.Schema, *, store: ObjectStore | None = None,
                      use_native: bool = True) -> Iterator[pa.RecordBatch]:
    """The visible rows of a scan task as record batches of ``schema`` (see the module
    docstring); raises what :func:`slatelib.ops.export.scan.scan_task_rows` raises."""
    if use_native:
        names = set(schema.names)
        for b in scan_task_buffers(task, store=store, seq="seq" in names,
                                   expire_ts="expire_ts" in names,
                                   create_ts="create_ts" in names):
            yield buffers_to_batch(b, schema)
        return
    for rows in scan_task_rows(task, store=store):
        yield to_batch(rows, schema)
