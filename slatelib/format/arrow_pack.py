"""Visible rows packed as Arrow buffers in pure Python: the reference of the native
pipeline's ``Pipe.arrow`` (:func:`slatelib.format.native_pipe.visible_buffers`), with the
same batches (at most ``max_rows`` rows, ending once keys + values reach ``max_bytes``; no
empty batch) and the same buffers (int32 offsets, int64 columns, validity bitmaps with the
least significant bit first). Pure.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Iterator

from slatelib.core.row import Row
from slatelib.format.native_pipe import ARROW_BATCH_BYTES, ARROW_BATCH_ROWS, ArrowBuffers


def _int64(values: list[int]) -> bytes:
    out = array("q", values)
    if sys.byteorder != "little":  # pragma: no cover - Arrow buffers are little-endian
        out.byteswap()
    return out.tobytes()


def _offsets(sizes: Iterable[int]) -> bytes:
    out = array("i", [0])
    total = 0
    for n in sizes:
        total += n
        out.append(total)
    if sys.byteorder != "little":  # pragma: no cover
        out.byteswap()
    return out.tobytes()


def _nullable(values: list[int | None]) -> tuple[bytes, int, bytes]:
    """``(validity bitmap, null count, int64 data)`` of a column (a null stores 0)."""
    bits = bytearray((len(values) + 7) // 8)
    nulls = 0
    for i, v in enumerate(values):
        if v is None:
            nulls += 1
        else:
            bits[i >> 3] |= 1 << (i & 7)
    return bytes(bits), nulls, _int64([0 if v is None else v for v in values])


def pack_batch(rows: list[Row], *, seq: bool = False, expire_ts: bool = False,
               create_ts: bool = False) -> ArrowBuffers:
    """One batch of visible rows (``kind`` VALUE) as Arrow buffers."""
    keys = [r[0] for r in rows]
    values = [r[3] for r in rows]
    e_valid, e_nulls, e_data = _nullable([r[4] for r in rows]) if expire_ts else (None, 0, None)
    c_valid, c_nulls, c_data = _nullable([r[5] for r in rows]) if create_ts else (None, 0, None)
    return ArrowBuffers(
        len(rows), _offsets(map(len, keys)), b"".join(keys), _offsets(map(len, values)),
        b"".join(values), _int64([r[1] for r in rows]) if seq else None,
        e_valid, e_nulls, e_data, c_valid, c_nulls, c_data)


def batched(rows: Iterable[Row], max_rows: int, max_bytes: int) -> Iterator[list[Row]]:
    """``rows`` cut as the native pipeline cuts its Arrow batches."""
    batch: list[Row] = []
    size = 0
    for r in rows:
        batch.append(r)
        size += len(r[0]) + len(r[3])
        if len(batch) >= max_rows or size >= max_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def pack_rows(rows: Iterable[Row], *, seq: bool = False, expire_ts: bool = False,
              create_ts: bool = False, max_rows: int = ARROW_BATCH_ROWS,
              max_bytes: int = ARROW_BATCH_BYTES) -> Iterator[ArrowBuffers]:
    """Visible rows as batches of Arrow buffers (see the module docstring)."""
    for batch in batched(rows, max_rows, max_bytes):
        yield pack_batch(batch, seq=seq, expire_ts=expire_ts, create_ts=create_ts)


def pack_pairs(pairs: Iterable[tuple[bytes, bytes]], *, max_rows: int = ARROW_BATCH_ROWS,
               max_bytes: int = ARROW_BATCH_BYTES) -> Iterator[ArrowBuffers]:
    """``(key, value)`` pairs as batches of ``key`` and ``value`` buffers only."""
    rows = ((k, 0, 0, v, None, None) for k, v in pairs)
    return pack_rows(rows, max_rows=max_rows, max_bytes=max_bytes)


__all__ = ["batched", "pack_batch", "pack_pairs", "pack_rows"]
