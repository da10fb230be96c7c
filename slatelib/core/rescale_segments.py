"""Rescaling segmented databases (SlateDB RFC-0024): where a split may cut, and when a
merge's sources are disjoint. Pure.

- **Split keys respect the segments.** A split of a segmented source cuts only at segment
  boundaries, so that every segment lands whole in one shard: balanced keys are chosen
  among the segments' starts (their prefixes) by the bytes each segment holds
  (:func:`segment_anchors`), and explicit keys that fall inside a segment are refused
  (:func:`check_keys_respect_segments`). 0.17 would project a segment across two shards
  (docs/rfcs/0018-segments.md); keeping segments whole keeps each segment's compaction and
  retention in one database.
- **A merge follows 0.17's union rules**: the sources must have the same segment
  extractor, and their data must be disjoint within each tree (the top-level one and each
  segment), not as wholes (:func:`check_disjoint_trees`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from slatelib.core.compaction_source import effective_range
from slatelib.core.key_bounds import prefix_end
from slatelib.core.manifest import Manifest
from slatelib.core.range_split import Anchor
from slatelib.core.ranges import BytesRange
from slatelib.core.rescale_plan import format_key, span_union
from slatelib.core.segments import ROOT, segment_label, trees
from slatelib.errors import InvalidArgumentError


def segment_of(prefixes: Sequence[bytes], key: bytes) -> bytes | None:
    """The prefix (of ``prefixes``) that ``key`` starts with, or None."""
    for p in prefixes:
        if key.startswith(p):
            return p
    return None


def segment_anchors(anchors: Iterable[Anchor], prefixes: Sequence[bytes]) -> list[Anchor]:
    """``anchors`` gathered at the start of their segment: one anchor per segment, at its
    prefix, weighing what its anchors weighed (an anchor in no segment stays as it is),
    so that balanced split keys fall on segment boundaries only."""
    weight: dict[bytes, int] = {}
    for a in anchors:
        at = segment_of(prefixes, a.key)
        key = a.key if at is None else at
        weight[key] = weight.get(key, 0) + a.weight
    return [Anchor(k, w) for k, w in sorted(weight.items())]


def check_keys_respect_segments(keys: Sequence[bytes], prefixes: Sequence[bytes]) -> None:
    """Raise when a split key falls inside a segment (after its first possible key).

    Raises:
        InvalidArgumentError: naming the key and the segment, and where it could cut.
    """
    for k in keys:
        for p in prefixes:
            end = prefix_end(p)
            if p < k and (end is None or k < end):
                raise InvalidArgumentError(
                    f"split key {format_key(k)!r} falls inside segment {segment_label(p)!r} "
                    f"(SlateDB RFC-0024): a split of a segmented database keeps every "
                    f"segment whole in one shard; cut at a segment boundary instead, such "
                    f"as {format_key(p)!r}"
                    + ("" if end is None else f" or {format_key(end)!r}")
                    + "; nothing was written")


def tree_spans(m: Manifest) -> dict[bytes, BytesRange]:
    """Per tree holding data (``b""``: the top-level one), the span of its views'
    effective ranges."""
    out: dict[bytes, BytesRange] = {}
    for t in trees(m):
        for view in (*t.l0, *(v for r in t.compacted for v in r.views)):
            eff = effective_range(view, m.sst(view.sst_id).info)
            if eff.is_empty():
                continue
            cur = out.get(t.prefix)
            out[t.prefix] = eff if cur is None else _hull(cur, eff)
    return out


def _hull(a: BytesRange, b: BytesRange) -> BytesRange:
    got = span_union(a, b)
    assert got is not None
    return got


def check_disjoint_trees(sources: Sequence[tuple[str, Manifest]]) -> None:
    """A merge's sources must have the same segment extractor, and hold disjoint data in
    every tree (0.17's union rules, SlateDB RFC-0024).

    Raises:
        InvalidArgumentError: different extractors, or two sources overlapping in a tree
            (naming the tree, the sources and their ranges).
    """
    names = {m.segment_extractor_name for _, m in sources}
    if len(names) > 1:
        given = ", ".join(f"{p!r}: {m.segment_extractor_name!r}" for p, m in sources)
        raise InvalidArgumentError(
            f"sources disagree on the segment extractor ({given}): a merge needs every "
            "source without one or every source with the same one (SlateDB RFC-0024); "
            "nothing was written")
    spans = [(p, tree_spans(m)) for p, m in sources]
    for i, (a, sa) in enumerate(spans):
        for b, sb in spans[i + 1:]:
            for prefix in sorted(sa.keys() & sb.keys()):
                ra, rb = sa[prefix], sb[prefix]
                if not ra.intersect(rb).is_empty():
                    where = "" if prefix == ROOT else f" in segment {segment_label(prefix)!r}"
                    raise InvalidArgumentError(
                        f"sources {a!r} {ra} and {b!r} {rb} hold overlapping key ranges"
                        f"{where}: a merge needs sources with disjoint keys in every segment "
                        "(e.g. the shards of one split); nothing was written")
