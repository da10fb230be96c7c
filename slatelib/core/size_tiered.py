"""0.17.0's size-tiered compaction scheduler, for the top-level tree. Pure.

Sources are the tree's L0 views (newest first) and sorted runs (descending id), each with
an estimated size (:func:`estimate_view_size`). The scheduler picks, in this order:

1. at least ``min_compaction_sources`` L0 views (the newest ones beyond
   ``max_compaction_sources`` are left for later) into a fresh run, unless a source is busy
   or backpressure says the result would immediately need compacting with too many runs;
2. a consecutive series of sorted runs whose sizes stay within ``include_size_threshold``
   of the smallest one, merged into the last (lowest id) of them;
3. when ``sorted_run_consolidation_threshold`` is at least 2 and more runs than that
   exist, any two or more consecutive runs (0.17 ignores 1, as 0).

Sizes are compared with 0.17's single-precision arithmetic (``(x as f32 * t) as u64``) so
borderline decisions match the official scheduler.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from slatelib.core.compaction_source import SourceId
from slatelib.errors import InvalidArgumentError

_F32 = struct.Struct("<f")
U64_MAX = (1 << 64) - 1


def f32(x: float) -> float:
    """``x`` rounded to IEEE single precision (Rust ``as f32``)."""
    return float(_F32.unpack(_F32.pack(x))[0])


def scaled_u64(size: int, factor: float) -> int:
    """Rust ``((size as f32) * factor) as u64``: an f32 product, truncated and saturated."""
    product = f32(f32(float(size)) * f32(factor))
    if product != product or product <= 0:  # NaN or negative saturate to 0
        return 0
    return U64_MAX if product >= 2.0**64 else int(product)


@dataclass(frozen=True, slots=True)
class SizeTieredOptions:
    """``SizeTieredCompactionSchedulerOptions`` with 0.17.0's defaults and names."""

    min_compaction_sources: int = 4
    max_compaction_sources: int = 8
    include_size_threshold: float = 4.0
    sorted_run_consolidation_threshold: int = 0

    def __post_init__(self) -> None:
        if self.min_compaction_sources < 1:
            raise InvalidArgumentError(
                f"min_compaction_sources must be at least 1, got {self.min_compaction_sources}")
        if self.max_compaction_sources < 1:
            raise InvalidArgumentError(
                f"max_compaction_sources must be at least 1, got {self.max_compaction_sources}")
        if not self.include_size_threshold > 0:
            raise InvalidArgumentError(
                f"include_size_threshold must be positive, got {self.include_size_threshold}")
        if self.sorted_run_consolidation_threshold < 0:
            raise InvalidArgumentError("sorted_run_consolidation_threshold must be >= 0")


@dataclass(frozen=True, slots=True)
class SizedSource:
    source: SourceId
    size: int


@dataclass
class _Tree:
    l0: list[SizedSource]
    runs: list[SizedSource]
    busy: set[SourceId]
    longest_by_run: dict[int, int] = field(default_factory=dict)


def _compactable_run(
    threshold: float | None,
    sources: Sequence[SizedSource],
    start: int,
    tree: _Tree | None,
    opts: SizeTieredOptions,
    max_sources: int | None = None,
) -> list[SizedSource]:
    """Consecutive sources from ``start``, stopping at the first rejected one (0.17's
    ``build_compactable_run``)."""
    out: list[SizedSource] = []
    min_size: int | None = None
    estimated = 0
    for i in range(start, len(sources)):
        if max_sources is not None and len(out) >= max_sources:
            break
        src = sources[i]
        if threshold is not None:
            if min_size is not None:
                if src.size > scaled_u64(min_size, threshold):
                    break
                min_size = min(min_size, src.size)
            else:
                min_size = src.size
        if tree is not None:
            if src.source in tree.busy:
                break
            estimated += src.size
            nxt = sources[i + 1] if i + 1 < len(sources) else None
            if not _backpressure_ok(tree, opts, estimated, nxt):
                break
        out.append(src)
    return out


def _backpressure_ok(
    tree: _Tree, opts: SizeTieredOptions, estimated: int, next_run: SizedSource | None
) -> bool:
    """Reject a compaction whose output could be merged with the next run while that run
    already heads a maximal compactable series (0.17's ``BackpressureChecker``)."""
    if next_run is None:
        return True
    if next_run.size <= scaled_u64(estimated, opts.include_size_threshold):
        run_id = next_run.source.run_id
        assert run_id is not None
        if tree.longest_by_run.get(run_id, 0) >= opts.max_compaction_sources:
            return False
    return True


def _clamp_max(sources: list[SizedSource], opts: SizeTieredOptions) -> list[SizedSource]:
    """Drop the newest sources beyond ``max_compaction_sources`` (``pop_front``)."""
    excess = len(sources) - opts.max_compaction_sources
    return sources[excess:] if excess > 0 else sources


def pick_size_tiered(
    l0: Sequence[SizedSource],
    runs: Sequence[SizedSource],
    *,
    busy: set[SourceId],
    fresh_run_id: int,
    options: SizeTieredOptions,
) -> tuple[tuple[SourceId, ...], int] | None:
    """The next compaction of one tree as ``(sources, destination)``, or None.

    ``busy`` holds sources and destination runs of compactions already in flight.
    """
    opts = options
    tree = _Tree(list(l0), list(runs), busy)
    for i, sr in enumerate(tree.runs):
        assert sr.source.run_id is not None
        chain = _compactable_run(opts.include_size_threshold, tree.runs, i, None, opts)
        tree.longest_by_run[sr.source.run_id] = len(chain)

    if len(tree.l0) >= opts.min_compaction_sources:
        chosen = _clamp_max(list(tree.l0), opts)
        dst = SourceId.run(fresh_run_id)
        next_run = tree.runs[0] if tree.runs else None
        estimated = sum(s.size for s in chosen)
        if (all(s.source not in busy for s in chosen) and dst not in busy
                and _backpressure_ok(tree, opts, estimated, next_run)):
            return tuple(s.source for s in chosen), fresh_run_id

    for i in range(len(tree.runs)):
        chain = _compactable_run(opts.include_size_threshold, tree.runs, i, tree, opts)
        if len(chain) >= opts.min_compaction_sources:
            chain = _clamp_max(chain, opts)
            return _run_compaction(chain)

    threshold = opts.sorted_run_consolidation_threshold
    projected = len(tree.runs)
    # 0.17 disables the fallback for a threshold of 1 ("must be 0 or at least 2")
    if threshold >= 2 and projected > threshold and opts.max_compaction_sources >= 2:
        limit = min(opts.max_compaction_sources, projected - threshold + 1)
        for i in range(len(tree.runs)):
            chain = _compactable_run(None, tree.runs, i, tree, opts, max_sources=limit)
            if len(chain) >= 2:
                return _run_compaction(chain)
    return None


def _run_compaction(chain: list[SizedSource]) -> tuple[tuple[SourceId, ...], int]:
    dst = chain[-1].source.run_id
    assert dst is not None
    return tuple(s.source for s in chain), dst
