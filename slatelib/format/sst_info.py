"""``SsTableInfo``: an SST's footer metadata (format §7.3), standalone and nested.

Standalone, it is the FlatBuffer of an SST's info region (without the CRC that follows it).
Nested, the same table appears in ``CompactedSsTableV2`` (manifests) and ``CompactedSsTable``
(V1 manifests, compactions files); :func:`add_sst_info` and :func:`read_sst_info` serve those.

Canonical order (format §5.7): the ``first_entry`` vector, the ``last_entry`` vector, then the
table with fields added as stats_len(9), stats_offset(8), filter_len(4), filter_offset(3),
index_len(2), index_offset(1), last_entry(7), first_entry(0), filter_format(10),
sst_type(6), compression_format(5); fields equal to their default (0) are omitted.
"""

from __future__ import annotations

import flatbuffers

from slatelib.core.manifest import CompressionCodec, FilterFormat, SsTableInfo, SstType
from slatelib.errors import InvalidArgumentError
from slatelib.format.flatbuf import (
    Buffer,
    Table,
    add_bytes,
    check_uint,
    corrupt_on_error,
    finish,
    new_builder,
)

_COMPRESSION = {int(c): c for c in CompressionCodec}
_SST_TYPE = {int(t): t for t in SstType}
_FILTER_FORMAT = {int(f): f for f in FilterFormat}


def read_sst_info(t: Table) -> SsTableInfo:
    """Decode an ``SsTableInfo`` table.

    Raises:
        CorruptObjectError: malformed table or an unknown enum value.
    """
    compression = _COMPRESSION.get(t.i8(5))
    sst_type = _SST_TYPE.get(t.i8(6))
    filter_format = _FILTER_FORMAT.get(t.i8(10))
    if compression is None:
        t.buf.fail(f"unknown compression_format {t.i8(5)}")
    if sst_type is None:
        t.buf.fail(f"unknown sst_type {t.i8(6)}")
    if filter_format is None:
        t.buf.fail(f"unknown filter_format {t.i8(10)}")
    return SsTableInfo(
        first_entry=t.bytes_(0),
        last_entry=t.bytes_(7),
        index_offset=t.u64(1),
        index_len=t.u64(2),
        filter_offset=t.u64(3),
        filter_len=t.u64(4),
        compression=compression,
        sst_type=sst_type,
        stats_offset=t.u64(8),
        stats_len=t.u64(9),
        filter_format=filter_format,
    )


def add_sst_info(b: flatbuffers.Builder, info: SsTableInfo) -> int:
    """Create an ``SsTableInfo`` table (and its key vectors) in the canonical order.

    Raises:
        InvalidArgumentError: an offset/length does not fit in u64, or an enum is invalid.
    """
    values = (
        (9, info.stats_len, "stats_len"),
        (8, info.stats_offset, "stats_offset"),
        (4, info.filter_len, "filter_len"),
        (3, info.filter_offset, "filter_offset"),
        (2, info.index_len, "index_len"),
        (1, info.index_offset, "index_offset"),
    )
    for _, v, name in values:
        check_uint(v, 64, name)
    enums = (
        (10, info.filter_format, _FILTER_FORMAT, "filter_format"),
        (6, info.sst_type, _SST_TYPE, "sst_type"),
        (5, info.compression, _COMPRESSION, "compression"),
    )
    for _, e, known, name in enums:
        if int(e) not in known:
            raise InvalidArgumentError(f"invalid {name} {e!r}")
    first = None if info.first_entry is None else add_bytes(b, info.first_entry)
    last = None if info.last_entry is None else add_bytes(b, info.last_entry)
    b.StartObject(11)
    for slot, v, _ in values:
        b.PrependUint64Slot(slot, v, 0)
    if last is not None:
        b.PrependUOffsetTRelativeSlot(7, last, 0)
    if first is not None:
        b.PrependUOffsetTRelativeSlot(0, first, 0)
    for slot, e, _, _ in enums:
        b.PrependInt8Slot(slot, int(e), 0)
    return int(b.EndObject())


def encode_sst_info(info: SsTableInfo) -> bytes:
    """The standalone ``SsTableInfo`` FlatBuffer of an SST's info region (CRC not included).

    Raises:
        InvalidArgumentError: a field is out of range (see :func:`add_sst_info`).
    """
    b = new_builder()
    return finish(b, add_sst_info(b, info))


def decode_sst_info(buf: bytes | bytearray | memoryview, *, path: str | None = None) -> SsTableInfo:
    """Decode a standalone ``SsTableInfo`` FlatBuffer (the info region without its CRC).

    Raises:
        CorruptObjectError: the buffer is truncated or malformed.
    """
    with corrupt_on_error("SsTableInfo", path):
        return read_sst_info(Buffer(buf, path=path).root())
