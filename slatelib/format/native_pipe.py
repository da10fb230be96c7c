"""The native decode -> merge -> sink pipeline (``slatelib/csrc/pipe.h`` in
``slatelib._speedups``), with the pure-Python path as fallback and reference. Pure.

Input: :func:`check_blocks` turns the uncompressed blocks of one ranged get into a
``CheckedBlocks`` object (every block CRC-checked and fully validated, the entries inside a
key range recorded as positions into the payload: no Python object per row);
:func:`check_stored_blocks` takes blocks of any codec (compressed ones are checked and
decompressed in Python first, one call per block). A source is an
iterable yielding such objects or plain lists of rows (WAL, memtables, damaged groups),
newest source first, as in :mod:`slatelib.format.native_merge` (whose native engine is this
same ``Pipe``, over lists of rows). One native merge feeds one sink per use:

- :class:`RetainPipe` (compaction): 0.17's retention into a ``_speedups.BlockWriterV2``,
  one call per step of an output SST (reference:
  :func:`slatelib.format.native_merge.retained_batches`);
- :func:`scan_pairs` (``DbReader.scan``): the visible ``(key, value)`` pairs, built once
  per visible row (reference: :func:`slatelib.format.native_merge.resolved_pairs`);
- :func:`scan_stats` (rescale validation): the
  :class:`~slatelib.core.rescale_check.RangeStats` of the visible pairs (reference:
  ``RangeStats.of(resolve_rows(...))``);
- :func:`visible_buffers` (export, the Spark data source): the visible rows as Arrow
  buffers (reference: :func:`slatelib.core.visible_rows.resolve_window`).

Keys whose merge operands need the (Python) merge operator are handed to the reference code
for that key only, as ``native_merge`` does. An unbuilt extension or ``SLATELIB_NO_NATIVE=1``
selects the reference (``HAVE_NATIVE_PIPE`` is False; callers then read rows, not
``CheckedBlocks``). Errors: a source out of order or a malformed row raises
:class:`~slatelib.errors.CorruptObjectError`, as the native merge does; a row the block
writer rejects raises :class:`~slatelib.errors.InvalidArgumentError`, as ``SstWriter`` does.

Design: docs/rfcs/0015-native-pipeline.md.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Protocol, cast

from slatelib.core.manifest import CompressionCodec
from slatelib.core.merge import MergeOperator, merge_sources, resolve_rows, resolve_versions
from slatelib.core.ranges import BoundKind, BytesRange
from slatelib.core.rescale_check import RangeStats
from slatelib.core.retention import RetentionPolicy, RetentionStats, retain_versions
from slatelib.core.row import Row
from slatelib.errors import CorruptObjectError, InvalidArgumentError
from slatelib.format import native
from slatelib.format.compression import block_decompressor


class CheckedBlocks(Protocol):
    """``_speedups.CheckedBlocks``: the checked entries of one ranged get."""

    def __len__(self) -> int: ...
    @property
    def ended(self) -> bool: ...
    @property
    def nbytes(self) -> int: ...
    def rows(self) -> list[Row]: ...


class Pipe(Protocol):
    """``_speedups.Pipe`` (see ``slatelib/csrc/pipe.h``)."""

    @property
    def stats(self) -> tuple[int, int, int, int, int, int]: ...
    @property
    def finished(self) -> bool: ...
    def fill(self, writer: native.BlockWriter, budget: int, /) -> bool: ...
    def rows(self, limit: int, /) -> list[Any]: ...
    def range_stats(self) -> tuple[int, int, int]: ...
    def arrow(self, max_rows: int, max_bytes: int, seq: bool, expire_ts: bool,
              create_ts: bool, /) -> tuple[Any, ...] | None: ...


_Checked = CheckedBlocks


class PipeModule(Protocol):
    """The pipeline's part of ``slatelib._speedups``."""

    Pipe: Callable[..., Pipe]
    PipeInputError: type[ValueError]
    PipeWriterError: type[ValueError]
    CheckedBlocks: type
    BlockWriterV2: type
    PIPE_ROWS: int
    PIPE_RESOLVE: int
    PIPE_RETAIN: int

    def check_blocks(self, data: bytes | memoryview, bounds: list[int], version: int,
                     verify_crc: bool, lo: bytes | None = None, hi: bytes | None = None,
                     lo_excl: bool = False, hi_incl: bool = False, /) -> _Checked: ...
    def range_stats(self, rows: Iterable[tuple[bytes, bytes]], /) -> tuple[int, int, int]: ...


def _load() -> PipeModule | None:
    ext = native.speedups
    if ext is None or not hasattr(ext, "Pipe") or not hasattr(ext, "PIPE_ROWS"):
        return None  # not built, disabled, or an older build
    return cast(PipeModule, ext)


_EXT: PipeModule | None = _load()
HAVE_NATIVE_PIPE: bool = _EXT is not None
"""The native pipeline is built and enabled."""

Block = Any
"""What a source yields: a ``CheckedBlocks`` or a list of rows."""


def engine(use_native: bool = True) -> PipeModule | None:
    """The native pipeline's module when it is available and ``use_native``, else None (the
    caller then takes its pure-Python reference)."""
    return _EXT if use_native else None


def _need_ext() -> PipeModule:
    if _EXT is None:
        raise RuntimeError("the native pipeline is not built or is disabled")
    return _EXT


def range_bounds(rng: BytesRange | None) -> tuple[bytes | None, bytes | None, bool, bool]:
    """``(lo, hi, lo_excl, hi_incl)`` of a key range for :func:`check_blocks`."""
    if rng is None:
        return None, None, False, False
    lo = None if rng.start.kind == BoundKind.UNBOUNDED else rng.start.key
    hi = None if rng.end.kind == BoundKind.UNBOUNDED else rng.end.key
    return lo, hi, rng.start.kind == BoundKind.EXCLUDED, rng.end.kind == BoundKind.INCLUDED


def check_stored_blocks(data: bytes | memoryview, bounds: list[int], version: int, codec: int,
                        rng: BytesRange | None = None) -> CheckedBlocks:
    """:func:`check_blocks` for stored blocks of any codec: uncompressed blocks are checked
    natively in one call; compressed ones are CRC-checked and decompressed here, block by
    block, then checked natively as bare payloads. No Python object per row either way.

    Raises:
        ValueError: a damaged block (its position in ``bounds`` is named; run the per-block
            path for the precise error), or bounds out of range.
        RuntimeError: the native pipeline is not available.
    """
    if codec == CompressionCodec.NONE:
        return check_blocks(data, bounds, version, rng)
    view = memoryview(data)
    unpack = block_decompressor(codec)
    assert unpack is not None
    payloads: list[Any] = []
    plain = [0]
    crc = zlib.crc32
    for i in range(len(bounds) - 1):
        s, e = bounds[i], bounds[i + 1]
        if s < 0 or e > len(data) or e - s < 4:
            raise ValueError(f"block {i}: bounds [{s}, {e}) out of range")
        stored = view[s:e - 4]
        if crc(stored) != int.from_bytes(view[e - 4:e], "big"):
            raise ValueError(f"block {i}: checksum mismatch")
        try:
            payload = unpack(stored)  # the library reads the view in place
        except Exception as exc:  # codec libraries raise assorted types
            raise ValueError(f"block {i}: cannot decompress ({exc})") from exc
        payloads.append(payload)
        plain.append(plain[-1] + len(payload))
    return check_blocks(b"".join(payloads), plain, version, rng, verify_crc=False)


def check_blocks(data: bytes | memoryview, bounds: list[int], version: int,
                 rng: BytesRange | None = None, *, verify_crc: bool = True) -> CheckedBlocks:
    """The blocks ``data[bounds[i]:bounds[i + 1]]`` checked (CRC-32 when ``verify_crc``,
    full structure always) with the entries inside ``rng`` recorded.

    Raises:
        ValueError: a damaged block (its position in ``bounds`` is named; run the per-block
            path for the precise error), or bounds out of range.
        RuntimeError: the native pipeline is not available (see ``HAVE_NATIVE_PIPE``).
    """
    ext = _need_ext()
    lo, hi, lo_excl, hi_incl = range_bounds(rng)
    return ext.check_blocks(data, bounds, version, verify_crc, lo, hi, lo_excl, hi_incl)


class _Guard:
    """Maps the native pipeline's errors to the library's, as the reference raises them."""

    def __init__(self, ext: PipeModule) -> None:
        self._input_error = ext.PipeInputError
        self._writer_error = ext.PipeWriterError

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if exc is None:
            return
        if isinstance(exc, self._input_error):
            raise CorruptObjectError(f"merging sorted sources: {exc}") from exc
        if isinstance(exc, self._writer_error):  # the block writer refused a row, as SstWriter
            raise InvalidArgumentError(str(exc)) from exc


def drain(pipe: Pipe, ext: PipeModule, limit: int) -> Iterator[list[Any]]:
    """The non-empty lists ``pipe.rows(limit)`` returns until the input is exhausted, its
    errors mapped as :class:`_Guard` does."""
    guard = _Guard(ext)
    while True:
        with guard:
            got = pipe.rows(limit)
        if not got:
            return
        yield got


class StatsCounter:
    """Adds a ``Pipe``'s counters' growth to a :class:`RetentionStats` (a pipe counts from
    zero; the stats may already hold other work)."""

    def __init__(self, stats: RetentionStats) -> None:
        self._stats = stats
        self._counted = (0, 0, 0, 0, 0, 0)

    def update(self, now: tuple[int, int, int, int, int, int]) -> None:
        d = [a - b for a, b in zip(now, self._counted, strict=True)]
        self._counted = now
        s = self._stats
        s.rows_in += d[0]
        s.rows_out += d[1]
        s.versions_dropped += d[2]
        s.tombstones_dropped += d[3]
        s.expired_to_tombstone += d[4]
        s.expired_merges_dropped += d[5]


class RetainPipe:
    """A compaction's merge with 0.17's retention feeding ``_speedups.BlockWriterV2``s.

    ``fill(writer, budget)`` adds whole keys' kept rows to ``writer`` until it took about
    ``budget`` encoded bytes or the input ended (True then); ``stats`` is updated after
    every call. Reference: :func:`slatelib.format.native_merge.retained_batches`.
    """

    def __init__(self, sources: Sequence[Iterable[Block]], policy: RetentionPolicy,
                 stats: RetentionStats) -> None:
        ext = _need_ext()
        fold: Callable[[list[Row]], list[Row]] | None = None
        if policy.merge_operator is not None:
            def fold(versions: list[Row]) -> list[Row]:
                return retain_versions(versions, policy, stats)

        self._pipe = ext.Pipe(sources, ext.PIPE_RETAIN, fold=fold, min_seq=policy.min_seq,
                              bottom=policy.bottom, clock_tick=policy.clock_tick)
        self._guard = _Guard(ext)
        self._counter = StatsCounter(stats)
        self.calls = 0

    @property
    def finished(self) -> bool:
        return self._pipe.finished

    def fill(self, writer: native.BlockWriter, budget: int) -> bool:
        """See the class docstring.

        Raises:
            CorruptObjectError: a source is out of order or holds a malformed row.
            InvalidArgumentError: the writer refused a row (an empty key, for instance).
            Exception: whatever the merge operator raises.
        """
        self.calls += 1
        try:
            with self._guard:
                return self._pipe.fill(writer, budget)
        finally:
            self._count()

    def rows(self, limit: int = 4096) -> list[Row]:
        """The next kept rows as Python rows (at least ``limit`` or the rest, at a key
        boundary; empty at the end): the reference's shape, for tests and diagnostics."""
        try:
            with self._guard:
                return self._pipe.rows(limit)
        finally:
            self._count()

    def _count(self) -> None:
        self._counter.update(self._pipe.stats)


def accepts_fill(writer: object) -> bool:
    """``writer`` is a native block writer that :meth:`RetainPipe.fill` can feed."""
    return _EXT is not None and isinstance(writer, _EXT.BlockWriterV2)


def _resolve_pipe(ext: PipeModule, sources: Sequence[Iterable[Block]],
                  merge_operator: MergeOperator | None) -> Pipe:
    """A ``PIPE_RESOLVE`` pipe whose operand keys are resolved by the reference
    (:func:`slatelib.core.merge.resolve_versions`)."""
    def fold(key: bytes, versions: list[Row]) -> bytes | None:
        return resolve_versions(key, versions, merge_operator)
    return ext.Pipe(sources, ext.PIPE_RESOLVE, fold=fold)


def _py_rows(sources: Sequence[Iterable[Block]]) -> list[Iterator[Row]]:
    """The sources as row iterators (the reference path; ``CheckedBlocks`` are decoded)."""
    return [chained_rows(s) for s in sources]


def scan_stats(sources: Sequence[Iterable[Block]], merge_operator: MergeOperator | None, *,
               use_native: bool = True) -> RangeStats:
    """The :class:`RangeStats` of the visible ``(key, value)`` pairs of ``sources`` (newest
    first), with no Python object per row on the native path.

    Raises:
        MergeOperatorMissingError: a key has merge operands and no operator is set.
        CorruptObjectError: a source is out of order or holds a malformed row.
    """
    ext = engine(use_native)
    if ext is None:
        return RangeStats.of(resolve_rows(merge_sources(_py_rows(sources)), merge_operator))
    pipe = _resolve_pipe(ext, sources, merge_operator)
    with _Guard(ext):
        return RangeStats(*pipe.range_stats())


SCAN_BATCH = 1024
"""Pairs per native step of :func:`scan_pairs` (what a scan holds beyond its blocks)."""


def scan_pairs(sources: Sequence[Iterable[Block]], merge_operator: MergeOperator | None, *,
               batch: int = SCAN_BATCH) -> Iterator[tuple[bytes, bytes]]:
    """The visible ``(key, value)`` pairs of ``sources`` (newest first) in key order, with
    no Python object per row but the pair itself. Native only (callers use
    :func:`slatelib.format.native_merge.resolved_pairs`, which falls back to the reference).

    Raises:
        MergeOperatorMissingError: a key has merge operands and no operator is set.
        CorruptObjectError: a source is out of order or holds a malformed row.
        RuntimeError: the native pipeline is not available.
    """
    ext = _need_ext()
    return chain.from_iterable(drain(_resolve_pipe(ext, sources, merge_operator), ext, batch))


@dataclass(frozen=True)
class ArrowBuffers:
    """One batch of visible rows as Arrow buffers (see ``_speedups.Pipe.arrow``): int32
    offsets and data of ``key`` and ``value``; int64 ``seq``; int64 ``expire_ts`` /
    ``create_ts`` with validity bitmaps (None: not asked for; a bitmap of a column without
    nulls may still be given)."""

    num_rows: int
    key_offsets: bytes
    key_data: bytes
    value_offsets: bytes
    value_data: bytes
    seq: bytes | None
    expire_valid: bytes | None
    expire_nulls: int
    expire_ts: bytes | None
    create_valid: bytes | None
    create_nulls: int
    create_ts: bytes | None


ARROW_BATCH_ROWS = 65536
ARROW_BATCH_BYTES = 32 * 1024 * 1024


def visible_buffers(sources: Sequence[Iterable[Block]], merge_operator: MergeOperator | None,
                    *, seq: bool = False, expire_ts: bool = False, create_ts: bool = False,
                    max_rows: int = ARROW_BATCH_ROWS, max_bytes: int = ARROW_BATCH_BYTES,
                    ) -> Iterator[ArrowBuffers]:
    """The visible rows of ``sources`` (the newest version per key; a folded merge takes
    its newest operand's seq and timestamps) as Arrow buffers, in batches of at most
    ``max_rows`` rows that stop once keys + values reach ``max_bytes``. Native only
    (callers use :func:`slatelib.core.visible_rows.resolve_window` otherwise).

    Raises:
        MergeOperatorMissingError: a key has merge operands and no operator is set.
        CorruptObjectError: a source is out of order or holds a malformed row.
        RuntimeError: the native pipeline is not available.
    """
    ext = _need_ext()
    pipe = _resolve_pipe(ext, sources, merge_operator)
    guard = _Guard(ext)
    while True:
        with guard:
            got = pipe.arrow(max_rows, max_bytes, seq, expire_ts, create_ts)
        if got is None:
            return
        yield ArrowBuffers(*got)


def chained_rows(blocks: Iterable[Block]) -> Iterator[Row]:
    """Rows of one source's blocks (``CheckedBlocks`` decoded), for reference paths."""
    return chain.from_iterable(b if isinstance(b, list) else b.rows() for b in blocks)


__all__ = [
    "ARROW_BATCH_BYTES", "ARROW_BATCH_ROWS", "HAVE_NATIVE_PIPE", "ArrowBuffers", "CheckedBlocks",
    "RetainPipe", "SCAN_BATCH", "StatsCounter", "accepts_fill", "check_blocks",
    "check_stored_blocks", "chained_rows", "drain", "engine", "range_bounds", "scan_pairs",
    "scan_stats", "visible_buffers",
]
