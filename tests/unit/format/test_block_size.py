"""Reading back the block size an SST was cut with (format §7.7)."""

from __future__ import annotations

import pytest

from slatelib.core.row import VALUE, Row
from slatelib.format.block import decode_block, new_block_writer
from slatelib.format.block_size import BLOCK_SIZES, block_size_bounds, block_size_candidates


def cut(rows: list[Row], block_size: int) -> tuple[list[list[Row]], list[int]]:
    w = new_block_writer(block_size)
    w.add_rows(rows)
    w.finish_block()
    blocks = w.take_blocks()
    return [decode_block(b[0], 2) for b in blocks], [len(b[0]) for b in blocks]


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("value_len", [0, 10, 300, 5000])
def test_each_0_17_size_is_recovered_from_a_few_blocks(block_size: int, value_len: int) -> None:
    rows = [(b"key%06d" % i, 1, VALUE, b"v" * value_len, None, 1) for i in range(6000)]
    blocks, sizes = cut(rows, block_size)
    assert len(blocks) >= 2
    lo, hi = block_size_bounds(blocks[:8], sizes[:8])
    assert lo <= block_size and (hi is None or block_size < hi)
    if 2 * (value_len + 30) < block_size:  # blocks of several rows: one size fits
        assert block_size_candidates(lo, hi) == (block_size,)
    else:  # one row per block: only bounded
        assert block_size in block_size_candidates(lo, hi)


def test_single_row_blocks_and_single_blocks_leave_it_open() -> None:
    big = [(b"k%d" % i, 1, VALUE, b"x" * 3000, None, None) for i in range(3)]
    blocks, sizes = cut(big, 1024)  # every row larger than a block
    lo, hi = block_size_bounds(blocks, sizes)
    assert lo == 1 and hi is not None and set(block_size_candidates(lo, hi)) >= {1024, 4096}
    blocks, sizes = cut(big[:1], 1024)
    assert block_size_bounds(blocks, sizes) == (1, None)
    assert block_size_candidates(1, None) == BLOCK_SIZES


def test_restart_points_count_in_the_next_rows_length() -> None:
    # 16 rows fill a block exactly up to the restart the 17th would need
    rows = [(b"k%02d" % i, 1, VALUE, b"", None, None) for i in range(40)]
    for size in (64, 100, 200, 300):
        blocks, sizes = cut(rows, size)
        lo, hi = block_size_bounds(blocks, sizes)
        assert lo <= size and (hi is None or size < hi), (size, lo, hi)
