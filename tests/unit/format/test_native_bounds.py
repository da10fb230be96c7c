"""The native block codec at the very edges of its buffers.

Every input is handed to the extension in a buffer of exactly its size (a ctypes array: one
heap block of that many bytes, where a ``bytes`` object's block ends in a spare NUL), cut at
every length and framed with every bound at and past the end. On the normal build each
outcome must equal the reference's; in ``make test-sanitize`` (ASan + UBSan builds,
``PYTHONMALLOC=malloc``) a read even one byte past a bounds check is a sanitizer report,
which fails the run (docs/rfcs/0020-house-second-step.md).
"""

from __future__ import annotations

import ctypes
import zlib
from typing import Any

import pytest

from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.errors import CorruptObjectError
from slatelib.format import native
from tests.unit.format._pipe_blocks import decode_py, encode_block, frame
from tests.unit.native_only import require_native

sp: Any = native.speedups

ROWS: list[Row] = [
    (b"", 1, VALUE, b"v", None, None),
    (b"a", 9, TOMBSTONE, b"", 5, None),
    (b"ab" * 40, 3, MERGE, b"m" * 130, None, 7),
    (b"abc", 2**40, VALUE, b"x" * 3, -1, 2**62),
]


@pytest.fixture(autouse=True)
def speedups_built() -> None:
    """Optional for users, not for these tests: a missing build is a failure (skipped under
    the pure run: these tests check the C code itself)."""
    require_native(sp is not None, "slatelib._speedups")


def exact(data: bytes) -> Any:
    """``data`` in a buffer of exactly ``len(data)`` bytes (ctypes keeps up to 16 bytes in
    the object itself, so only longer inputs get a heap block of their own)."""
    return (ctypes.c_char * len(data)).from_buffer_copy(data) if data else b""


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except (ValueError, CorruptObjectError):
        return "rejected", None


@pytest.mark.parametrize("version", [1, 2])
def test_every_cut_of_a_block_decodes_as_the_reference_decides(version: int) -> None:
    block = encode_block(ROWS, version)
    decode = sp.decode_block_v2 if version == 2 else sp.decode_block_v1
    for n in range(len(block) + 1):
        want = outcome(decode_py, block[:n], version)
        got = outcome(decode, exact(block[:n]))
        assert got[0] == want[0], n
        if want[0] == "ok":
            assert [tuple(r) for r in got[1]] == [tuple(r) for r in want[1]], n


def test_stored_blocks_of_every_length_and_bound() -> None:
    payload = encode_block(ROWS, 2)
    for n in range(len(payload) + 1):
        stored, bounds = frame([payload[:n]])
        data = exact(stored)
        for end in (len(stored) - 1, len(stored), len(stored) + 1, len(stored) + 4):
            for start in (0, max(end - 4, 0), max(end - 3, 0), end):
                b = [start, end]
                ok_bounds = end <= len(stored) and end - start >= 4
                got = outcome(sp.decode_blocks, data, b, 2)
                checked = outcome(sp.check_blocks, data, b, 2, True)
                if not ok_bounds:
                    assert got[0] == checked[0] == "rejected", (n, b)
        # unchecked payloads (no CRC): every bound at and past the end
        assert outcome(sp.check_blocks, exact(payload[:n]), [0, n + 1], 2, False)[0] == "rejected"
        outcome(sp.check_blocks, exact(payload[:n]), [0, n], 2, False)


def test_crc_of_every_length_reads_only_its_bytes() -> None:
    data = bytes(range(256)) * 3
    for n in range(0, 40):
        for table in (False, True):
            assert sp.pipe_crc32(exact(data[:n]), table)[0] == zlib.crc32(data[:n])
