"""SST writer options from settings: what every SST slatelib writes (L0 flushes, compaction
outputs, bulk loads) is encoded with."""

from __future__ import annotations

from slatelib.config import Settings
from slatelib.format.compression import parse_codec
from slatelib.format.sst import SstWriterOptions


def sst_writer_options(settings: Settings) -> SstWriterOptions:
    """The ``[sst]`` settings as :class:`SstWriterOptions`.

    Raises:
        InvalidArgumentError: an unknown compression codec.
    """
    s = settings.sst
    return SstWriterOptions(
        block_size=s.block_size,
        codec=parse_codec(s.compression_codec),
        min_filter_keys=s.min_filter_keys,
        bits_per_key=s.filter_bits_per_key,
    )
