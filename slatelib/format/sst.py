"""SST container (format §7.1-7.11): data blocks, filter, index, stats, info, footer. Pure.

Layout::

    data blocks | filter? | index | stats? | info flatbuffer + crc | u64 meta_offset | u16 ver

Every region but the info is ``compress(payload) || crc32_be(compressed)``.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice

from slatelib.core.filter_policy import (
    FilterPolicySpec,
    PrefixExtractorSpec,
    PrefixFn,
    load_prefix_extractor,
)
from slatelib.core.manifest import CompressionCodec, FilterFormat, SsTableInfo, SstType
from slatelib.core.row import Row
from slatelib.errors import (
    ChecksumMismatchError,
    CorruptObjectError,
    InvalidArgumentError,
    UnsupportedFormatVersionError,
)
from slatelib.format import bloom, native
from slatelib.format.block import (
    MAX_PREFIX_EXTRACTORS,
    WAL_BLOCK_SIZE,
    decode_block,
    new_block_writer,
)
from slatelib.format.block import index_separator as index_separator  # re-export (moved)
from slatelib.format.block_layout import DEFAULT_BLOCK_SIZE
from slatelib.format.checksum import crc32, crc32_bytes
from slatelib.format.compression import block_compressor, compress, decompress
from slatelib.format.sst_index import SstIndex, decode_sst_index, encode_sst_index
from slatelib.format.sst_info import decode_sst_info, encode_sst_info
from slatelib.format.sst_stats import SstStats, decode_sst_stats, encode_sst_stats

SST_FORMAT_VERSION = 2
SUPPORTED_SST_VERSIONS = (1, 2)
FOOTER_LEN = 10
DEFAULT_MIN_FILTER_KEYS = 1000
# Rows per native add_rows call: small enough that each finished block is checksummed while
# it is still in cache (one call over 200k rows is 25% slower), large enough to amortize
# the call.
_BATCH = 1024


@dataclass(frozen=True, slots=True)
class SstWriterOptions:
    """How an SST is encoded. ``filter_policies`` lists the bloom filters of the filter
    block in order (format §7.9); None means one whole-key ``_bf`` filter of
    ``bits_per_key`` (none when it is 0). A filter block is written only for SSTs of at
    least ``min_filter_keys`` rows, and never for WAL SSTs."""

    block_size: int = DEFAULT_BLOCK_SIZE
    codec: CompressionCodec = CompressionCodec.NONE
    min_filter_keys: int = DEFAULT_MIN_FILTER_KEYS
    bits_per_key: int = bloom.DEFAULT_BITS_PER_KEY  # 0 disables the bloom filter
    format_version: int = SST_FORMAT_VERSION
    sst_type: SstType = SstType.COMPACTED
    filter_format: FilterFormat = FilterFormat.COMPOSITE
    filter_policies: tuple[FilterPolicySpec, ...] | None = None

    def __post_init__(self) -> None:
        if self.format_version not in SUPPORTED_SST_VERSIONS:
            raise InvalidArgumentError(f"unsupported SST format version {self.format_version}")
        if self.block_size < 1:
            raise InvalidArgumentError(f"block size must be positive, got {self.block_size}")
        policies = self.policies
        names = [p.name for p in policies]
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"filter policies named twice: {names}")
        if self.filter_format == FilterFormat.LEGACY and names not in ([], [bloom.BLOOM_POLICY_NAME]):
            raise InvalidArgumentError(
                f"a legacy filter block holds one _bf filter, not {names}")
        fixed = {p.prefix.fixed for p in policies if p.prefix is not None and p.prefix.fixed}
        if len(fixed) > MAX_PREFIX_EXTRACTORS:
            raise InvalidArgumentError(
                f"at most {MAX_PREFIX_EXTRACTORS} fixed prefix lengths, got {sorted(fixed)}")

    @property
    def policies(self) -> tuple[FilterPolicySpec, ...]:
        """The bloom filter policies in effect (see the class docstring)."""
        if self.filter_policies is not None:
            return self.filter_policies
        return (FilterPolicySpec(self.bits_per_key),) if self.bits_per_key > 0 else ()

    @staticmethod
    def wal(codec: CompressionCodec = CompressionCodec.NONE) -> SstWriterOptions:
        return SstWriterOptions(block_size=WAL_BLOCK_SIZE, codec=codec, sst_type=SstType.WAL)


@dataclass(frozen=True)
class EncodedSst:
    """A finished SST: its bytes (as chunks, to stream) and its info for the manifest."""

    chunks: list[bytes]
    info: SsTableInfo
    format_version: int
    num_rows: int
    num_blocks: int
    first_key: bytes | None
    last_key: bytes | None
    stats: SstStats | None
    size: int = field(default=0)

    def to_bytes(self) -> bytes:
        return b"".join(self.chunks)


class SstWriter:
    """Builds one SST from rows added in storage order.

    Compacted SSTs need key-ascending, seq-descending rows; WAL SSTs take rows in
    sequence order. Rows go through a block writer (native when ``slatelib._speedups`` is
    built, else :class:`~slatelib.format.block.BlockWriterPy`); finished blocks are
    compressed and checksummed into :attr:`chunks` (call :meth:`drain` to stream them out
    early); :meth:`finish` appends filter, index, stats, info, footer. Prefer
    :meth:`add_rows` for lists of rows: it crosses into native code once per list.

    With ``slatelib._sstwrite`` built (``native_finish``, the default when it is), the
    per-block framing (compression call, CRC-32, offsets) and the index and stats encoding
    run in C (``SstBlocks``), byte-identical to the Python path (``native_finish=False``),
    which ``tests/unit/format/test_sst_native.py`` checks for every codec.
    """

    def __init__(self, options: SstWriterOptions = SstWriterOptions(), *,
                 native_finish: bool = True, size_hint: int = 0) -> None:
        self.options = options
        self._wal = options.sst_type == SstType.WAL
        self._policies = () if self._wal else options.policies
        self._want_filter = bool(self._policies)
        prefixes = [p.prefix for p in self._policies if p.prefix is not None]
        self._fixed = list(dict.fromkeys(x.fixed for x in prefixes if x.fixed is not None))
        self._py_prefixes = _PyPrefixes([x for x in dict.fromkeys(prefixes) if x.fixed is None],
                                        options.format_version)
        self._w = new_block_writer(
            options.block_size, version=options.format_version, compacted=not self._wal,
            want_hashes=any(p.whole_key for p in self._policies),
            prefix_lens=tuple(self._fixed),
        )
        self._chunks: list[bytes] = []
        self._offset = 0
        self._index: list[tuple[int, bytes]] = []
        self._block_stats: list[tuple[int, int, int]] = []
        ext = native.sstwrite if native_finish else None
        self._blocks = ext.SstBlocks() if ext is not None else None
        if self._blocks is not None and size_hint > 0 and hasattr(self._blocks, "reserve"):
            # the SST's buffer at its expected size at once: no copying growth (its pages
            # are touched only as blocks are written)
            self._blocks.reserve(size_hint)
        # the native framing takes the codec's one-call block function (bytes-like result,
        # no copy into bytes); the Python path the reference compress()
        self._compress = (block_compressor(options.codec) if self._blocks is not None
                          else None if options.codec == CompressionCodec.NONE
                          else partial(compress, options.codec))
        if (self._blocks is not None and self._compress is None and not self._py_prefixes
                and hasattr(self._w, "set_sink") and hasattr(self._blocks, "sink_capsule")):
            # uncompressed: the block writer frames each finished block (CRC-32 and all)
            # straight into the SST's buffer, no bytes object per block and no second copy
            # (the Python prefix hashes, when any, need each block's bytes)
            self._w.set_sink(self._blocks)

    @property
    def num_rows(self) -> int:
        return self._w.num_rows

    @property
    def estimated_size(self) -> int:
        """Bytes of finished blocks plus the open block (before compression)."""
        return self._offset + self._w.open_size

    @property
    def bytes_written(self) -> int:
        return self._offset

    def add(self, row: Row) -> None:
        """Append one row.

        Raises:
            InvalidArgumentError: the row is out of order, has an empty key, an unknown kind
                or a seq / timestamp out of range; the writer is left as before the row.
        """
        try:
            if self._w.add(row):
                self._collect()
        except ValueError as exc:
            raise _invalid_row(exc) from exc

    def add_rows(self, rows: list[Row] | tuple[Row, ...]) -> None:
        """Append rows in order (the fast path: one native call per 1024 rows).

        Raises:
            InvalidArgumentError: as :meth:`add`; the rows before the rejected one are added.
        """
        add_rows, n = self._w.add_rows, len(rows)
        try:
            for start in range(0, n, _BATCH):
                if add_rows(rows, start, start + _BATCH):
                    self._collect()
        except ValueError as exc:
            raise _invalid_row(exc) from exc
        finally:
            self._collect()

    def add_all(self, rows: Iterable[Row]) -> None:
        """Append rows from any iterable (batched into :meth:`add_rows`)."""
        if isinstance(rows, list | tuple):
            self.add_rows(rows)
            return
        it = iter(rows)
        while batch := list(islice(it, 16 * _BATCH)):
            self.add_rows(batch)

    @property
    def block_writer(self) -> native.BlockWriter:
        """The block writer rows go through: what a native pipeline step fills
        (:meth:`fill`; ``slatelib.format.native_pipe.accepts_fill`` says whether it can)."""
        return self._w

    def fill(self, step: Callable[[native.BlockWriter, int], bool], budget: int) -> bool:
        """Let ``step`` add rows to :attr:`block_writer` directly, about ``budget`` encoded
        bytes of them (``RetainPipe.fill``: the native compaction pipeline, one call per step
        instead of one per row list), then frame the blocks it finished; returns ``step``'s
        result (True: its input is exhausted).

        Raises:
            Exception: whatever ``step`` raises; the blocks finished before are kept.
        """
        try:
            return step(self._w, budget)
        finally:
            self._collect()

    def _collect(self) -> None:
        """Compress and checksum the blocks the block writer finished."""
        nb = self._blocks
        taken = self._w.take_blocks()
        if taken and self._py_prefixes:
            self._py_prefixes.add_blocks(taken)
        if nb is not None:
            if taken:
                nb.add(taken, self._compress)
                self._offset = nb.offset
            return
        codec = self.options.codec
        plain = codec == CompressionCodec.NONE
        offset = self._offset
        index, chunks, block_stats = self._index, self._chunks, self._block_stats
        for raw, index_key, puts, deletes, merges in taken:
            stored = raw if plain else compress(codec, raw)
            chunk = stored + crc32_bytes(stored)
            index.append((offset, index_key))
            chunks.append(chunk)
            offset += len(chunk)
            block_stats.append((puts, deletes, merges))
        self._offset = offset

    def drain(self) -> list[bytes]:
        """Take the finished blocks written so far (for streaming uploads)."""
        out, self._chunks = self._chunks, []
        if self._blocks is not None:
            data = self._blocks.take()
            return [data] if data else []
        return out

    def _region(self, payload: bytes) -> bytes:
        stored = compress(self.options.codec, payload)
        return stored + crc32(stored).to_bytes(4, "big")

    def finish(self) -> EncodedSst:
        """Close the last block and write filter, index, stats, info and footer.

        Raises:
            InvalidArgumentError: no rows were added.
        """
        self._w.finish_block()
        self._collect()
        w = self._w
        if w.num_rows == 0:
            raise InvalidArgumentError("an SST needs at least one row")
        opts = self.options
        chunks = self._chunks
        self._chunks = []
        blocks_len = self._offset
        filter_len = 0
        if self._want_filter and w.num_rows >= opts.min_filter_keys:
            filters = self._filters()
            payload = (
                bloom.encode_composite(filters)
                if opts.filter_format == FilterFormat.COMPOSITE
                else filters[0][1]
            )
            region = self._region(payload)
            chunks.append(region)
            filter_len = len(region)
        index_offset = blocks_len + filter_len
        nb = self._blocks
        index_region = self._region(
            encode_sst_index(self._index) if nb is None else nb.encode_index())
        chunks.append(index_region)
        stats_offset = stats_len = 0
        stats: SstStats | None = None
        if not self._wal:
            stats = SstStats(
                num_puts=w.num_puts, num_deletes=w.num_deletes, num_merges=w.num_merges,
                raw_key_size=w.raw_key_size, raw_val_size=w.raw_val_size,
                block_stats=tuple(self._block_stats) if nb is None else nb.block_stats(),
            )
            stats_region = self._region(
                encode_sst_stats(stats) if nb is None else nb.encode_stats(
                    w.num_puts, w.num_deletes, w.num_merges, w.raw_key_size, w.raw_val_size))
            stats_offset = index_offset + len(index_region)
            stats_len = len(stats_region)
            chunks.append(stats_region)
        if self._wal:
            assert w.first_seq is not None
            first_entry: bytes | None = w.first_seq.to_bytes(8, "big")
            last_entry = None
        else:
            first_entry, last_entry = w.first_key, w.last_key
        info = SsTableInfo(
            first_entry=first_entry, last_entry=last_entry,
            index_offset=index_offset, index_len=len(index_region),
            filter_offset=blocks_len, filter_len=filter_len,
            compression=opts.codec, sst_type=opts.sst_type,
            stats_offset=stats_offset, stats_len=stats_len,
            filter_format=opts.filter_format,
        )
        meta_offset = index_offset + len(index_region) + stats_len
        info_bytes = encode_sst_info(info)
        chunks.append(info_bytes + crc32(info_bytes).to_bytes(4, "big"))
        chunks.append(meta_offset.to_bytes(8, "big") + opts.format_version.to_bytes(2, "big"))
        size = meta_offset + len(info_bytes) + 4 + FOOTER_LEN
        if nb is not None:
            chunks = [nb.take(chunks)]  # the blocks' buffer grows in place: no join
        return EncodedSst(
            chunks=chunks, info=info, format_version=opts.format_version, num_rows=w.num_rows,
            num_blocks=len(self._index) if nb is None else nb.count,
            first_key=w.first_key, last_key=w.last_key,
            stats=stats, size=size,
        )


    def _filters(self) -> list[tuple[str, bytes]]:
        """``(name, bloom data)`` of every policy (format §7.9)."""
        w = self._w
        out: list[tuple[str, bytes]] = []
        whole: bytes | None = None
        for policy in self._policies:
            if policy.prefix is None:  # whole keys only: the writer's own hashes
                out.append((policy.name, w.bloom(policy.bits_per_key)))
                continue
            spec = policy.prefix
            parts = [w.prefix_hashes(self._fixed.index(spec.fixed)) if spec.fixed is not None
                     else self._py_prefixes.hashes(spec)]
            if policy.whole_key:
                whole = w.hashes() if whole is None else whole
                parts.append(whole)
            out.append((policy.name, bloom.build_bloom_from_hash_bytes(b"".join(parts),
                                                                       policy.bits_per_key)))
        return out


class _PyPrefixes:
    """Prefix hashes of extractors that run as Python code (``pkg.mod:attr``), taken from
    the keys of each finished block (so they work under the native pipeline too, which
    adds rows without Python objects)."""

    def __init__(self, specs: list[PrefixExtractorSpec], format_version: int) -> None:
        self._version = format_version
        self._fns: list[tuple[PrefixExtractorSpec, PrefixFn]] = [
            (s, load_prefix_extractor(s)) for s in specs]
        self._hashes = [array("Q") for _ in specs]
        self._last: list[bytes | None] = [None for _ in specs]

    def __bool__(self) -> bool:
        return bool(self._fns)

    def add_blocks(self, blocks: Sequence[native.FinishedBlock]) -> None:
        for raw, *_ in blocks:
            keys = [r[0] for r in decode_block(raw, self._version)]
            for i, (_spec, fn) in enumerate(self._fns):
                last = self._last[i]
                fresh: list[bytes] = []
                for key in keys:
                    n = fn(key)
                    if n is None:
                        continue
                    prefix = key[:n]
                    if prefix != last:
                        fresh.append(prefix)
                        last = prefix
                self._last[i] = last
                self._hashes[i].extend(bloom.siphash13_many(fresh))

    def hashes(self, spec: PrefixExtractorSpec) -> bytes:
        for i, (s, _fn) in enumerate(self._fns):
            if s == spec:
                return self._hashes[i].tobytes()
        raise InvalidArgumentError(f"no prefix extractor {spec.name!r}")  # pragma: no cover


def _invalid_row(exc: ValueError) -> InvalidArgumentError:
    return exc if isinstance(exc, InvalidArgumentError) else InvalidArgumentError(str(exc))


def encode_sst(rows: Iterable[Row], options: SstWriterOptions = SstWriterOptions()) -> EncodedSst:
    """Encode ``rows`` (storage order) as one SST.

    Raises:
        InvalidArgumentError: no rows, or a row :meth:`SstWriter.add` rejects.
    """
    w = SstWriter(options)
    w.add_all(rows)
    return w.finish()


# ---------------------------------------------------------------------------- reading


def decode_footer(tail: bytes, *, path: str | None = None) -> tuple[int, int]:
    """``(meta_offset, format_version)`` from the last 10 bytes of an SST.

    Raises:
        CorruptObjectError: fewer than 10 bytes.
        UnsupportedFormatVersionError: a version 0.17 does not read either.
    """
    if len(tail) < FOOTER_LEN:
        raise CorruptObjectError("SST is too short to have a footer", path=path)
    tail = tail[-FOOTER_LEN:]
    meta_offset = int.from_bytes(tail[:8], "big")
    version = int.from_bytes(tail[8:], "big")
    if version not in SUPPORTED_SST_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"{path or 'SST'}: unsupported SST format version {version} in the footer "
            "(or the object is truncated or corrupt)"
        )
    return meta_offset, version


def verify_region(
    region: bytes, *, path: str | None, what: str, block: int | None = None
) -> bytes:
    """Check a region's trailing CRC-32 and return the stored (still compressed) payload.

    Raises:
        ChecksumMismatchError: naming the object and the block.
        CorruptObjectError: the region is shorter than its checksum.
    """
    if len(region) < 4:
        raise CorruptObjectError(f"{what} region shorter than its checksum", path=path)
    payload = region[:-4]
    stored = int.from_bytes(region[-4:], "big")
    actual = crc32(payload)
    if stored != actual:
        where = f"{what} {block}" if block is not None else what
        raise ChecksumMismatchError(
            f"checksum mismatch in {where} (stored {stored:08x}, computed {actual:08x})",
            path=path, region=what, block=block,
        )
    return payload


def decode_region(
    region: bytes, codec: int, *, path: str | None, what: str, block: int | None = None
) -> bytes:
    """Verify and decompress one region."""
    label = f"{what} {block}" if block is not None else what
    payload = verify_region(region, path=path, what=what, block=block)
    try:
        return decompress(codec, payload, what=label)
    except CorruptObjectError as exc:
        raise CorruptObjectError(str(exc), path=path) from exc


def decode_data_block(
    region: bytes, codec: int, format_version: int, *, path: str | None, block: int
) -> list[Row]:
    """Rows of one stored data block region (checksum verified)."""
    raw = decode_region(region, codec, path=path, what="block", block=block)
    try:
        return decode_block(raw, format_version)
    except CorruptObjectError as exc:
        raise CorruptObjectError(f"block {block}: {exc}", path=path) from exc


def block_range(index: SstIndex, info: SsTableInfo, i: int) -> tuple[int, int]:
    """Byte range ``[start, end)`` of data block ``i`` (format §7.8)."""
    offsets = index.offsets
    start = offsets[i]
    if i + 1 < len(offsets):
        return start, offsets[i + 1]
    return start, (info.filter_offset if info.filter_len > 0 else info.index_offset)


def decode_info_region(region: bytes, *, path: str | None = None) -> SsTableInfo:
    payload = verify_region(region, path=path, what="info")
    return decode_sst_info(payload, path=path)


@dataclass(frozen=True)
class ParsedSst:
    """A whole SST decoded from its bytes (WAL SSTs, the CLI, tests)."""

    path: str | None
    data: bytes
    info: SsTableInfo
    format_version: int
    index: SstIndex
    stats: SstStats | None

    def block_region(self, i: int) -> bytes:
        s, e = block_range(self.index, self.info, i)
        return self.data[s:e]

    def block_rows(self, i: int) -> list[Row]:
        return decode_data_block(
            self.block_region(i), self.info.compression, self.format_version,
            path=self.path, block=i,
        )

    def rows(self) -> list[Row]:
        out: list[Row] = []
        for i in range(len(self.index.offsets)):
            out.extend(self.block_rows(i))
        return out

    def bloom_filter(self) -> bloom.BloomFilter | None:
        info = self.info
        if info.filter_len == 0:
            return None
        region = self.data[info.filter_offset : info.filter_offset + info.filter_len]
        payload = decode_region(region, info.compression, path=self.path, what="filter")
        return bloom.decode_filter_block(payload, info.filter_format, path=self.path)


def read_index(
    region: bytes, codec: int, *, path: str | None = None
) -> SstIndex:
    return decode_sst_index(decode_region(region, codec, path=path, what="index"), path=path)


def read_stats(region: bytes, codec: int, *, path: str | None = None) -> SstStats:
    return decode_sst_stats(decode_region(region, codec, path=path, what="stats"), path=path)


def parse_sst(
    data: bytes, *, path: str | None = None, info: SsTableInfo | None = None,
    format_version: int | None = None,
) -> ParsedSst:
    """Decode the metadata of a whole SST held in memory.

    ``info``/``format_version`` from the manifest take precedence (format §5.5.2-5.5.3).

    Raises:
        CorruptObjectError: truncated object or bad metadata (with the path).
        ChecksumMismatchError: a region's CRC does not match.
    """
    size = len(data)
    if size <= FOOTER_LEN:
        raise CorruptObjectError(f"SST of {size} bytes is too short (empty SST)", path=path)
    meta_offset, footer_version = decode_footer(data[-FOOTER_LEN:], path=path)
    if meta_offset >= size - FOOTER_LEN:
        raise CorruptObjectError(f"meta offset {meta_offset} beyond object end", path=path)
    if info is None:
        info = decode_info_region(data[meta_offset : size - FOOTER_LEN], path=path)
    version = footer_version if format_version is None else format_version
    _check_info_bounds(info, meta_offset, path)
    index = read_index(
        data[info.index_offset : info.index_offset + info.index_len], info.compression, path=path
    )
    stats = None
    if info.stats_len:
        stats = read_stats(
            data[info.stats_offset : info.stats_offset + info.stats_len], info.compression,
            path=path,
        )
    return ParsedSst(path, data, info, version, index, stats)


def _check_info_bounds(info: SsTableInfo, meta_offset: int, path: str | None) -> None:
    regions: Sequence[tuple[str, int, int]] = (
        ("index", info.index_offset, info.index_len),
        ("filter", info.filter_offset, info.filter_len),
        ("stats", info.stats_offset, info.stats_len),
    )
    for what, off, ln in regions:
        if ln and off + ln > meta_offset:
            raise CorruptObjectError(
                f"{what} region [{off}, {off + ln}) overlaps the info at {meta_offset}", path=path
            )
