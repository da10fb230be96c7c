"""The LSM trees of a manifest: the top-level tree and one per segment (SlateDB RFC-0024). Pure.

A manifest holds one LSM tree per segment prefix. The top-level ``l0`` / ``compacted`` /
``last_compacted_l0_sst_view_id`` fields are the tree of the empty prefix ``b""`` (the
only one without a segment extractor); every :class:`~slatelib.core.manifest.Segment`
is the tree of its prefix. A key lives in the tree whose prefix it starts with (prefixes
form an antichain), and trees never share a key, so each is compacted on its own: a
compaction names one tree (``segment`` in its spec) and its sources all come from that
tree (docs/rfcs/0018-segments.md, format §5.5.8).

:func:`trees` lists them in manifest order (the top-level tree first), :func:`tree`
finds one by prefix and :func:`with_tree` writes one back, recomputing ``ssts``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from slatelib.core.manifest import Manifest, Segment, SortedRun, SstHandle, SstView
from slatelib.errors import CorruptObjectError, InvalidArgumentError
from slatelib.ids import Ulid

ROOT = b""
"""The prefix of the top-level tree."""


@dataclass(frozen=True, slots=True)
class Tree:
    """One LSM tree: L0 views newest first, sorted runs by descending id, and the view id
    of the newest L0 a compaction of this tree consumed."""

    prefix: bytes
    l0: tuple[SstView, ...]
    compacted: tuple[SortedRun, ...]
    last_compacted_l0_sst_view_id: Ulid | None

    @property
    def is_root(self) -> bool:
        return self.prefix == ROOT

    @property
    def is_empty(self) -> bool:
        return not self.l0 and not self.compacted

    @property
    def is_drain_marker(self) -> bool:
        """0.17's drain marker: a segment drained by ``DrainSegmentSpec`` (``l0`` and
        ``compacted`` empty, the cursor set), kept until the writer prunes it."""
        return (not self.is_root and self.is_empty
                and self.last_compacted_l0_sst_view_id is not None)

    @property
    def label(self) -> str:
        return segment_label(self.prefix)


def segment_label(prefix: bytes) -> str:
    """A prefix as text for messages and reports: ``(top-level)`` for ``b""``, printable
    ASCII as it is, anything else as ``hex:<hex>``."""
    if prefix == ROOT:
        return "(top-level)"
    if all(0x20 <= b < 0x7F for b in prefix):
        return prefix.decode("ascii")
    return "hex:" + prefix.hex()


def root_tree(m: Manifest) -> Tree:
    return Tree(ROOT, m.l0, m.compacted, m.last_compacted_l0_sst_view_id)


def segment_tree(s: Segment) -> Tree:
    return Tree(s.prefix, s.l0, s.compacted, s.last_compacted_l0_sst_view_id)


def trees(m: Manifest) -> list[Tree]:
    """Every tree of ``m``: the top-level one first, then each segment in manifest order."""
    return [root_tree(m), *(segment_tree(s) for s in m.segments or ())]


def tree(m: Manifest, prefix: bytes) -> Tree:
    """The tree of ``prefix`` (``b""``: the top-level tree).

    Raises:
        InvalidArgumentError: ``m`` has no segment with that prefix.
    """
    if prefix == ROOT:
        return root_tree(m)
    for s in m.segments or ():
        if s.prefix == prefix:
            return segment_tree(s)
    raise InvalidArgumentError(f"the manifest has no segment {segment_label(prefix)!r}")


def try_tree(m: Manifest, prefix: bytes) -> Tree | None:
    try:
        return tree(m, prefix)
    except InvalidArgumentError:
        return None


def with_tree(m: Manifest, t: Tree, new_ssts: Iterable[SstHandle] = ()) -> Manifest:
    """``m`` with the tree of ``t.prefix`` replaced by ``t`` and ``ssts`` recomputed
    from every view (``new_ssts``: handles of SSTs not yet in ``m``).

    Raises:
        InvalidArgumentError: ``m`` has no segment with that prefix.
        CorruptObjectError: a view references an SST without a handle.
    """
    if t.is_root:
        draft = replace(m, l0=t.l0, compacted=t.compacted,
                        last_compacted_l0_sst_view_id=t.last_compacted_l0_sst_view_id)
    else:
        segs = list(m.segments or ())
        at = next((i for i, s in enumerate(segs) if s.prefix == t.prefix), None)
        if at is None:
            raise InvalidArgumentError(
                f"the manifest has no segment {segment_label(t.prefix)!r}")
        segs[at] = Segment(t.prefix, t.last_compacted_l0_sst_view_id, t.l0, t.compacted)
        draft = replace(m, segments=tuple(segs))
    handles: dict[Ulid, SstHandle] = dict(m.sst_map)
    for h in new_ssts:
        handles[h.id] = h
    used = draft.referenced_sst_ids()
    missing = used - handles.keys()
    if missing:
        raise CorruptObjectError(f"views reference SSTs without a handle: {sorted(missing)}")
    return replace(draft, ssts=tuple(handles[i] for i in sorted(used)))


def segment_of_key(m: Manifest, key: bytes) -> bytes | None:
    """The prefix of the segment of ``m`` that ``key`` belongs to, or None (no segment
    holds it: the top-level tree without segments, else a key of no known segment)."""
    for s in m.segments or ():
        if key.startswith(s.prefix):
            return s.prefix
    return None


def check_antichain(prefixes: Iterable[bytes]) -> None:
    """Raise unless no prefix is empty, repeated, or a proper prefix of another.

    Raises:
        InvalidArgumentError: the offending pair.
    """
    ordered = sorted(prefixes)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b.startswith(a):
            raise InvalidArgumentError(
                f"segment prefixes {segment_label(a)!r} and {segment_label(b)!r} overlap: "
                "segment prefixes must form an antichain (SlateDB RFC-0024)")
    if ordered and ordered[0] == ROOT:
        raise InvalidArgumentError("a segment cannot have the empty prefix")
