"""Which block size an SST was written with, read back from its data blocks. Pure.

The block size is not stored (format §7.7), but the fit rule leaves a trace: a row joins a
non-empty block only when the block stays within the block size, and a block is closed
when its next row would not fit. So, for v2 blocks (what 0.17 writes), a block of more than
one row is at most the block size, and a block followed by another is shorter than the
block size minus the length the next block's first row would have taken in it. A few
consecutive blocks usually leave exactly one of 0.17's sizes (1 to 64 KiB).
"""

from __future__ import annotations

from collections.abc import Sequence

from slatelib.core.row import Row
from slatelib.format.block import RESTART_INTERVAL, encode_row_v2
from slatelib.format.block_layout import common_prefix_len

BLOCK_SIZES = (1024, 2048, 4096, 8192, 16384, 32768, 65536)
"""The block sizes 0.17 can be configured with (``with_sst_block_size``)."""


def block_size_bounds(blocks: Sequence[Sequence[Row]], sizes: Sequence[int],
                      ) -> tuple[int, int | None]:
    """``(lo, hi)``: the v2 block size S that cut these consecutive blocks (their rows
    and raw, uncompressed lengths) satisfies ``lo <= S < hi`` (``hi`` None: no upper
    bound). ``(1, None)`` when the blocks tell nothing."""
    lo, hi = 1, None
    for i, (rows, size) in enumerate(zip(blocks, sizes, strict=True)):
        if len(rows) > 1:
            lo = max(lo, size)
        if i + 1 < len(blocks) and rows and blocks[i + 1]:
            nxt = blocks[i + 1][0]
            restart = len(rows) % RESTART_INTERVAL == 0
            shared = 0 if restart else common_prefix_len(rows[-1][0], nxt[0])
            closing = size + len(encode_row_v2(nxt, shared)) + (2 if restart else 0)
            hi = closing if hi is None else min(hi, closing)
    return lo, hi


def block_size_candidates(lo: int, hi: int | None) -> tuple[int, ...]:
    """0.17's block sizes within ``[lo, hi)``."""
    return tuple(s for s in BLOCK_SIZES if s >= lo and (hi is None or s < hi))
