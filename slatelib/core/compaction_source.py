"""Compaction sources: an L0 view or a sorted run (0.17's ``SourceId``), and their sizes. Pure.

The logical order of a tree's sources is: L0 views newest first, then sorted runs by
descending id. A compaction's sources are a consecutive window of that order.

Sizes are 0.17's estimates: an SST's size is ``index_offset + index_len``; a view with a
``visible_range`` counts the fraction of the SST's key span it covers (keys read as base-256
fractions after their common prefix), so projected clones are not over-weighted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slatelib.core.manifest import Manifest, SortedRun, SsTableInfo, SstView
from slatelib.core.ranges import UNBOUNDED, BoundKind, BytesRange, keyed_bound, span
from slatelib.errors import InvalidArgumentError
from slatelib.ids import Ulid, try_parse_ulid, ulid_to_str

_MIN_FRACTION = 1e-6


@dataclass(frozen=True, slots=True, order=True)
class SourceId:
    """One compaction source: ``SourceId.l0(view_id)`` or ``SourceId.run(run_id)``.

    Text form (CLI, reports): ``l0:<view ULID>`` and ``sr:<run id>``.
    """

    run_id: int | None = None
    view_id: Ulid | None = None

    def __post_init__(self) -> None:
        if (self.run_id is None) == (self.view_id is None):
            raise InvalidArgumentError("a compaction source is either an L0 view or a run")

    @staticmethod
    def l0(view_id: int) -> SourceId:
        return SourceId(view_id=Ulid(view_id))

    @staticmethod
    def run(run_id: int) -> SourceId:
        if not 0 <= run_id <= 0xFFFFFFFF:
            raise InvalidArgumentError(f"sorted run id {run_id} is not a u32")
        return SourceId(run_id=run_id)

    @property
    def is_l0(self) -> bool:
        return self.view_id is not None

    @staticmethod
    def parse(text: str) -> SourceId:
        """Parse ``l0:<ULID>`` or ``sr:<id>`` (``sr`` may be written ``run``).

        Raises:
            InvalidArgumentError: anything else.
        """
        kind, sep, value = text.strip().partition(":")
        kind = kind.lower()
        if sep and kind == "l0":
            view = try_parse_ulid(value)
            if view is not None:
                return SourceId.l0(view)
        elif sep and kind in ("sr", "run") and value.isdigit():
            return SourceId.run(int(value))
        raise InvalidArgumentError(
            f"bad compaction source {text!r}: expected l0:<view ULID> or sr:<run id>"
        )

    def __str__(self) -> str:
        if self.view_id is not None:
            return f"l0:{ulid_to_str(self.view_id)}"
        return f"sr:{self.run_id}"


def logical_sources(manifest: Manifest) -> list[SourceId]:
    """Every source of the top-level tree in logical order."""
    return tree_sources(manifest.l0, manifest.compacted)


def tree_sources(l0: Sequence[SstView], compacted: Sequence[SortedRun]) -> list[SourceId]:
    """Every source of one tree (the top-level tree or a segment) in logical order."""
    out = [SourceId.l0(v.id) for v in l0]
    out.extend(SourceId.run(r.id) for r in compacted)
    return out


def sst_size(info: SsTableInfo) -> int:
    """0.17's size estimate of an SST: where its index ends."""
    return info.index_offset + info.index_len


def _key_fraction(key: bytes, skip: int) -> float:
    frac, scale = 0.0, 1.0 / 256.0
    for byte in key[skip:skip + 8]:
        frac += byte * scale
        scale /= 256.0
    return frac


def _span(rng: BytesRange, skip: int) -> tuple[float, float]:
    start = 0.0 if rng.start.kind == BoundKind.UNBOUNDED else _key_fraction(
        rng.start.key or b"", skip)
    end = 1.0 if rng.end.kind == BoundKind.UNBOUNDED else _key_fraction(rng.end.key or b"", skip)
    return start, end


def physical_range(info: SsTableInfo) -> BytesRange:
    """``[first_entry, last_entry]`` of an SST (unbounded end when ``last_entry`` is absent)."""
    last = info.last_entry
    return span(keyed_bound(_INCLUDED, info.first_entry or b""),
                UNBOUNDED if last is None else keyed_bound(_INCLUDED, last))


_INCLUDED = BoundKind.INCLUDED


def effective_range(view: SstView, info: SsTableInfo) -> BytesRange:
    """The keys a view can return: its SST's physical range clipped to ``visible_range``."""
    phys = physical_range(info)
    return phys if view.visible_range is None else phys.intersect(view.visible_range)


def estimate_view_size(view: SstView, info: SsTableInfo) -> int:
    """0.17's ``estimate_visible_size`` of one view."""
    raw = sst_size(info)
    if view.visible_range is None or info.last_entry is None:
        return raw
    phys = physical_range(info)
    eff = phys.intersect(view.visible_range)
    if eff == phys:
        return raw
    a = phys.start.key or b""
    b = phys.end.key or b""
    skip = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        skip += 1
    p0, p1 = _span(phys, skip)
    v0, v1 = _span(eff, skip)
    phys_len = max(p1 - p0, 2.220446049250313e-16)
    vis_len = v1 - v0
    fraction = 1.0 if vis_len == 0.0 else min(1.0, max(_MIN_FRACTION, vis_len / phys_len))
    return max(1, round(raw * fraction))


def view_range_and_size(view: SstView, info: SsTableInfo) -> tuple[BytesRange, int]:
    """``(effective_range(view, info), estimate_view_size(view, info))`` in one step; an
    identity view (the usual case, one per SST of a large run) takes no range arithmetic."""
    if view.visible_range is None:
        return physical_range(info), info.index_offset + info.index_len
    return effective_range(view, info), estimate_view_size(view, info)


def estimate_run_size(run: SortedRun, manifest: Manifest) -> int:
    """0.17's ``SortedRun::estimate_visible_size``: the sum over its views.

    Raises:
        CorruptObjectError: a view of the run has no SST in the manifest.
    """
    return sum(estimate_view_size(v, manifest.sst(v.sst_id).info) for v in run.views)
