"""The optional C extensions: ``slatelib._speedups`` (hot paths of the SST codec, and the
native pipeline whose ``Pipe`` is also the k-way merge of
:mod:`slatelib.format.native_merge`: see :mod:`slatelib.format.native_pipe`) and
``slatelib._sstwrite`` (SST finishing). Pure.

This module is the one place where the extensions are chosen (:func:`_extension`; it also
loads ``slatelib._manifest`` for :mod:`slatelib.format.manifest_native`). ``speedups`` is
the extension module, or None when it is not built (no compiler at install time) or when
``SLATELIB_NO_NATIVE=1`` is set in the environment **when this module is first imported**
(``make test-pure`` runs the unit suite that way). Code outside ``format/`` calls
:mod:`slatelib.format.seam`, never these modules.
``bloom``, ``block`` and ``sst`` pick their implementation once, at import.

The extension's API is typed here as Protocols, so mypy checks every call site without a
stub file. The reference implementations are ``bloom.siphash13_py``,
``bloom.build_bloom_from_hashes_py``, ``block.decode_block_v2_py``,
``block_v1.decode_block_v1_py`` and ``block.BlockWriterPy``;
``tests/unit/format/test_native.py`` holds the two to the same bytes, rows and errors.
"""

from __future__ import annotations

import importlib
import os
from array import array
from collections.abc import Callable
from types import ModuleType
from typing import Literal, Protocol, cast, overload

from slatelib.core.row import Row
from slatelib.errors import CorruptObjectError

NO_NATIVE_ENV = "SLATELIB_NO_NATIVE"

# One finished block: (raw block bytes, index key, puts, deletes, merges).
FinishedBlock = tuple[bytes, bytes, int, int, int]


class BlockWriter(Protocol):
    """What ``SstWriter`` drives: ``_speedups.BlockWriterV2`` or ``block.BlockWriterPy``.

    Rows are cut into blocks with 0.17.0's fit rule; compacted writers check key-ascending,
    seq-descending order and index blocks by key separator, WAL writers (``compacted=False``)
    by the block's first seq (format §7.8). ``add``/``add_rows`` return whether / how many
    finished blocks wait in :meth:`take_blocks`. A rejected row raises ``ValueError`` (the
    native writer) or ``InvalidArgumentError`` (the Python one) and leaves the writer as it
    was before that row.
    """

    @property
    def num_rows(self) -> int: ...
    @property
    def num_puts(self) -> int: ...
    @property
    def num_deletes(self) -> int: ...
    @property
    def num_merges(self) -> int: ...
    @property
    def raw_key_size(self) -> int: ...
    @property
    def raw_val_size(self) -> int: ...
    @property
    def first_key(self) -> bytes | None: ...
    @property
    def first_seq(self) -> int | None: ...
    @property
    def last_key(self) -> bytes | None: ...
    @property
    def last_seq(self) -> int | None: ...
    @property
    def open_size(self) -> int: ...
    @property
    def open_rows(self) -> int: ...

    def add(self, row: Row, /) -> bool: ...
    def add_rows(self, rows: list[Row] | tuple[Row, ...], start: int = 0,
                 end: int | None = None) -> int: ...
    def finish_block(self) -> bool: ...
    def take_blocks(self) -> list[FinishedBlock]: ...
    def hashes(self) -> bytes: ...
    def prefix_hashes(self, i: int, /) -> bytes: ...
    def bloom(self, bits_per_key: int, /) -> bytes: ...


class BlockWriterFactory(Protocol):
    def __call__(self, block_size: int, *, compacted: bool = True,
                 want_hashes: bool = False, prefix_lens: tuple[int, ...] = ()) -> BlockWriter: ...


class Speedups(Protocol):
    """The functions of ``slatelib/_speedups.c``; each raises ValueError on bad input."""

    BlockWriterV2: BlockWriterFactory
    RESTART_INTERVAL: int

    def siphash13(self, data: bytes | bytearray | memoryview, /) -> int: ...
    def siphash13_many(self, keys: list[bytes] | tuple[bytes, ...], /) -> bytes: ...
    def bloom_build(self, hashes: bytes | bytearray | memoryview | array[int],
                    bits_per_key: int, /) -> bytes: ...
    def bloom_check(self, bits: bytes, num_probes: int, h: int, /) -> bool: ...
    def decode_block_v2(self, data: bytes | bytearray | memoryview, /) -> list[Row]: ...
    def decode_block_v1(self, data: bytes | bytearray | memoryview, /) -> list[Row]: ...
    def index_metas(self, data: bytes, start: int, n: int, /
                    ) -> tuple[tuple[int, ...], tuple[bytes, ...]] | None: ...
    @overload
    def decode_blocks(self, data: bytes | bytearray | memoryview, bounds: list[int],
                      version: int, /) -> list[list[Row]]: ...
    @overload
    def decode_blocks(self, data: bytes | bytearray | memoryview, bounds: list[int],
                      version: int, flat: Literal[True], /) -> list[Row]: ...


class SstBlocks(Protocol):
    """``_sstwrite.SstBlocks``: one SST's data blocks framed (compressed, CRC-32), with
    their index and stats encoded natively (reference: ``sst.SstWriter``'s Python path)."""

    @property
    def offset(self) -> int: ...
    @property
    def count(self) -> int: ...

    def add(self, blocks: list[FinishedBlock],
            compress: Callable[[bytes], bytes] | None = None, /) -> None: ...
    def take(self, tail: list[bytes] = ..., /) -> bytes: ...
    def encode_index(self) -> bytes: ...
    def encode_stats(self, num_puts: int, num_deletes: int, num_merges: int,
                     raw_key_size: int, raw_val_size: int, /) -> bytes: ...
    def block_stats(self) -> tuple[tuple[int, int, int], ...]: ...


class SstWriteModule(Protocol):
    """The optional extension ``slatelib/_sstwrite.c``."""

    SstBlocks: Callable[[], SstBlocks]


def native_disabled() -> bool:
    """True if ``SLATELIB_NO_NATIVE`` asks for the pure-Python implementations."""
    return os.environ.get(NO_NATIVE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _extension(name: str) -> ModuleType | None:
    """The extension module ``slatelib.<name>``: None when it is not built, or when
    ``SLATELIB_NO_NATIVE`` was set when this module was imported. The one place where the
    native implementations are chosen (every other module of ``format/`` takes what this
    module loaded; code outside ``format/`` calls :mod:`slatelib.format.seam`)."""
    if DISABLED_BY_ENV:
        return None
    try:
        return importlib.import_module(f"slatelib.{name}")
    except ImportError:
        return None


DISABLED_BY_ENV: bool = native_disabled()
"""``SLATELIB_NO_NATIVE`` was set when this module was imported."""
speedups: Speedups | None = cast("Speedups | None", _extension("_speedups"))
HAVE_NATIVE: bool = speedups is not None

sstwrite: SstWriteModule | None = cast("SstWriteModule | None", _extension("_sstwrite"))
"""``slatelib._sstwrite`` (None: not built, or ``SLATELIB_NO_NATIVE``)."""

manifest_module: ModuleType | None = _extension("_manifest")
"""``slatelib._manifest``, not yet configured (:mod:`slatelib.format.manifest_native`
configures it and types it)."""


def native_block_decoder(
    fn: Callable[[bytes], list[Row]], version: int
) -> Callable[[bytes], list[Row]]:
    """``fn`` (a native block decoder, which raises ``ValueError``) raising
    :class:`~slatelib.errors.CorruptObjectError` instead, as the reference does."""

    def decode(data: bytes) -> list[Row]:
        try:
            return fn(data)
        except ValueError as exc:
            raise CorruptObjectError(f"malformed v{version} block: {exc}") from exc

    decode.__name__ = decode.__qualname__ = f"decode_block_v{version}"
    decode.__doc__ = f"""Rows of a decompressed v{version} block (native).

    Raises:
        CorruptObjectError: the block is malformed (path and block are added by callers).
    """
    return decode
