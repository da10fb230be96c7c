"""The one seam between slatelib and its C extensions: every function here returns the same
result whether the extensions are built or not. Pure.

The implementation is picked once, at import: :mod:`slatelib.format.native` loads the
extensions (none when they are not built or ``SLATELIB_NO_NATIVE`` is set) and this module
binds each function to the native code or to its pure-Python reference. Code outside
``slatelib/format/`` never asks whether the extension is built: it calls these functions
(tests/unit/format/test_seam.py holds each pair together). Within ``format/``,
:mod:`~slatelib.format.bloom`, :mod:`~slatelib.format.block`, :mod:`~slatelib.format.sst`
and the codecs make the same choice for their own hot paths.

- Sources: a read view's sources (:class:`RangeSource`) give either checked blocks
  (native) or decoded rows (reference) for a key range; :func:`scan_pairs`,
  :func:`scan_stats` and :func:`scan_buffers` take the ones their implementation reads.
- Blocks: :func:`decode_plain_blocks` and :func:`check_group` return None where the
  caller decodes block by block (no extension, or a damaged block: the reference names it).
- Planning: :func:`identity_input_views`, :func:`untrack_frozen` and :func:`ulid_names`
  (whose reference is :func:`slatelib.paths.ulid_names`).

Design: docs/rfcs/0020-house-second-step.md ("nativepy").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, Protocol

from slatelib.core.compaction_inputs import InputView
from slatelib.core.manifest import SstHandle, SstView
from slatelib.core.merge import MergeOperator
from slatelib.core.ranges import BytesRange
from slatelib.core.rescale_check import RangeStats
from slatelib.core.row import Row
from slatelib.core.visible_rows import resolve_window
from slatelib.core.window_merge import merge_windows
from slatelib.format import native, native_pipe
from slatelib.format.arrow_pack import pack_pairs, pack_rows
from slatelib.format.manifest_native import ext as _manifest_ext
from slatelib.format.native_merge import resolved_pairs
from slatelib.format.native_pipe import (
    ARROW_BATCH_BYTES,
    ARROW_BATCH_ROWS,
    ArrowBuffers,
    Block,
    CheckedBlocks,
)
from slatelib.ids import Ulid
from slatelib.paths import ulid_names as _py_ulid_names

_PIPE = native_pipe.engine()
_SPEEDUPS = native.speedups


class RangeSource(Protocol):
    """A source of a read view: its entries in ``[start, end)``, as row lists or as
    checked blocks (rows where the native pipeline cannot read the blocks)."""

    def iter_blocks(self, start: bytes | None, end: bytes | None) -> Iterable[list[Row]]: ...
    def iter_checked(self, start: bytes | None, end: bytes | None) -> Iterable[Block]: ...


# ------------------------------------------------------------------ merges of a read view
def scan_pairs(sources: Sequence[RangeSource], start: bytes | None, end: bytes | None,
               merge_operator: MergeOperator | None) -> Iterator[tuple[bytes, bytes]]:
    """The visible ``(key, value)`` pairs of ``sources`` (newest first) in ``[start, end)``.

    Raises:
        MergeOperatorMissingError: a key has merge operands and no operator is set.
        CorruptObjectError: a source is out of order or holds a malformed row.
    """
    if _PIPE is not None:
        return native_pipe.scan_pairs([s.iter_checked(start, end) for s in sources],
                                      merge_operator)
    return resolved_pairs([s.iter_blocks(start, end) for s in sources], merge_operator)


def scan_stats(sources: Sequence[RangeSource], start: bytes | None, end: bytes | None,
               merge_operator: MergeOperator | None) -> RangeStats:
    """The :class:`RangeStats` of what :func:`scan_pairs` returns (natively: no Python
    object per row). Raises what :func:`scan_pairs` raises."""
    if _PIPE is not None:
        return native_pipe.scan_stats([s.iter_checked(start, end) for s in sources],
                                      merge_operator)
    return native_pipe.scan_stats([s.iter_blocks(start, end) for s in sources],
                                  merge_operator, use_native=False)


def scan_buffers(sources: Sequence[RangeSource], start: bytes | None, end: bytes | None,
                 merge_operator: MergeOperator | None, *, max_rows: int = ARROW_BATCH_ROWS,
                 max_bytes: int = ARROW_BATCH_BYTES) -> Iterator[ArrowBuffers]:
    """What :func:`scan_pairs` returns, as batches of ``key`` and ``value`` Arrow buffers
    (see :mod:`slatelib.format.arrow_pack`). Raises what :func:`scan_pairs` raises."""
    if _PIPE is not None:
        return native_pipe.visible_buffers([s.iter_checked(start, end) for s in sources],
                                           merge_operator, max_rows=max_rows,
                                           max_bytes=max_bytes)
    return pack_pairs(scan_pairs(sources, start, end, merge_operator), max_rows=max_rows,
                      max_bytes=max_bytes)


def visible_buffers(sources: Sequence[Iterable[Block]], merge_operator: MergeOperator | None,
                    *, seq: bool = False, expire_ts: bool = False, create_ts: bool = False,
                    max_rows: int = ARROW_BATCH_ROWS, max_bytes: int = ARROW_BATCH_BYTES,
                    ) -> Iterator[ArrowBuffers]:
    """The visible rows of ``sources`` (newest first; blocks from :func:`check_group`, or
    row lists) as batches of Arrow buffers: natively
    (:func:`slatelib.format.native_pipe.visible_buffers`), else the windows of
    :func:`~slatelib.core.window_merge.merge_windows` resolved by
    :func:`~slatelib.core.visible_rows.resolve_window` and packed.

    Raises:
        MergeOperatorMissingError: a key has merge operands and no operator is set.
        CorruptObjectError: a source is out of order or holds a malformed row.
    """
    if _PIPE is not None:
        return native_pipe.visible_buffers(sources, merge_operator, seq=seq,
                                           expire_ts=expire_ts, create_ts=create_ts,
                                           max_rows=max_rows, max_bytes=max_bytes)
    streams = [(b if isinstance(b, list) else b.rows() for b in s) for s in sources]
    rows = chain.from_iterable(resolve_window(w, merge_operator) for w in merge_windows(streams))
    return pack_rows(rows, seq=seq, expire_ts=expire_ts, create_ts=create_ts,
                     max_rows=max_rows, max_bytes=max_bytes)


def range_stats(pairs: Iterable[tuple[bytes, bytes]]) -> RangeStats:
    """:meth:`RangeStats.of` ``pairs`` (natively: ``_speedups.range_stats``)."""
    if _PIPE is not None:
        return RangeStats(*_PIPE.range_stats(pairs))
    return RangeStats.of(pairs)


# ------------------------------------------------------------------ stored blocks
def decode_plain_blocks(data: bytes | memoryview, bounds: list[int], version: int) -> list[Row] | None:
    """The rows of the uncompressed stored blocks ``data[bounds[i]:bounds[i + 1]]`` (CRC-32
    checked), in one list; None when the caller must decode block by block (no extension,
    or a damaged block, which the per-block path names precisely)."""
    if _SPEEDUPS is None:
        return None
    try:
        return _SPEEDUPS.decode_blocks(data, bounds, version, True)
    except ValueError:
        return None


def check_group(data: bytes | memoryview, bounds: list[int], version: int, codec: int,
                rng: BytesRange | None) -> CheckedBlocks | None:
    """The stored blocks of one ranged get checked for the native pipeline and clipped to
    ``rng`` (:func:`slatelib.format.native_pipe.check_stored_blocks`); None when the
    caller must decode them into rows instead (no extension, or a damaged block)."""
    if _PIPE is None:
        return None
    try:
        return native_pipe.check_stored_blocks(data, bounds, version, codec, rng)
    except ValueError:
        return None


# ------------------------------------------------------------------ planning
def identity_input_views(views: list[SstView], paths: list[str], sst_map: dict[Ulid, SstHandle],
                         l0_ids: set[Ulid]) -> list[InputView | None]:
    """Per view, its :class:`InputView` when it is a plain identity view the extension
    builds (untracked by the cyclic GC), else None: the caller builds it. Without the
    extension every entry is None."""
    if _manifest_ext is None:
        return [None] * len(views)
    return _manifest_ext.identity_input_views(views, paths, sst_map, l0_ids)


def untrack_frozen(objects: list[Any], types: tuple[type, ...]) -> None:
    """Take ``objects`` of exactly one of the (core) ``types``, and what they reach of those
    types, out of the cyclic GC (see ``untrack_frozen`` in ``slatelib/_manifest.c``); a no-op
    without the extension (the objects are freed by reference counting either way)."""
    if _manifest_ext is not None:
        _manifest_ext.untrack_frozen(objects, types)


def ulid_names(head: str, tail: str, ids: Sequence[int]) -> list[str]:
    """:func:`slatelib.paths.ulid_names`, formatted natively in one call when the extension
    is built.

    Raises:
        InvalidArgumentError: an id is not a 128-bit ULID.
    """
    if _manifest_ext is not None and ids:
        try:
            return _manifest_ext.ulid_names(head, tail, ids if isinstance(ids, list) else list(ids))
        except (OverflowError, TypeError, ValueError):
            pass  # an id out of range (or a non-ASCII root): the reference says which
    return _py_ulid_names(head, tail, ids)


__all__ = [
    "RangeSource", "check_group", "decode_plain_blocks", "identity_input_views",
    "range_stats", "scan_buffers", "scan_pairs", "scan_stats", "ulid_names", "untrack_frozen",
    "visible_buffers",
]
