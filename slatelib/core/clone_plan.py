"""Clones with projection and union: the clone's first manifest from its sources. Pure.

The rules are 0.17's, found by experiment with the official package and recorded in
docs/rfcs/0007-projection-and-union-clones.md (format §5.5.6 describes the full clone):

- :func:`project` narrows one source's manifest to a key range (0.17 ``Manifest::projected``):
  each L0 view gets ``visible_range = effective range ∩ projection``, each sorted-run view
  ``[its effective start, the next view's effective start) ∩ projection`` (the last view of
  a run: ``effective range ∩ projection``); views whose range is empty or holds no physical
  key of their SST are dropped, then runs left without views; ``external_dbs`` keep only
  SSTs still referenced, and entries left without SSTs go.
- :func:`plan_single_clone` is the clone of one (possibly projected) source: its state is
  copied, ``external_dbs`` are the source's non-empty entries (sourced from their final
  checkpoints) plus one entry for the source itself (always, even without SSTs).
- :func:`plan_union_clone` is the clone of several sources: a fresh database whose trees
  are the sources' trees in key order, sorted runs renumbered, and ``external_dbs``
  deduplicated by ``(path, SST ids)``.

:func:`plan_clone` picks between them as 0.17 does (one source, or a union).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import chain
from operator import attrgetter, is_
from typing import Any

from slatelib.core.manifest import (
    EMPTY_SEQUENCE_TRACKER,
    I64_MIN,
    ExternalDb,
    Manifest,
    Segment,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstView,
)
from slatelib.core.ranges import UNBOUNDED, Bound, BoundKind, BytesRange
from slatelib.core.segments import ROOT, Tree, check_antichain, segment_label, trees
from slatelib.errors import (
    CorruptObjectError,
    InvalidArgumentError,
    InvalidDbStateError,
)
from slatelib.ids import Ulid
from slatelib.paths import is_under, normalize_path

NewId = Callable[[], uuid.UUID]


@dataclass(frozen=True)
class CloneSource:
    """One source of a clone: a database root in the same store, the checkpoint to clone
    from, and the key range of it the clone keeps."""

    path: str
    """Source database root path in the same store."""
    checkpoint: uuid.UUID | None = None
    """None: an ephemeral checkpoint of its latest manifest."""
    projection: BytesRange | None = None
    """None: the whole key space (and no ``visible_range`` is set)."""


@dataclass(frozen=True)
class PinnedSource:
    """A source resolved to a checkpoint: the manifest that checkpoint pins."""

    path: str
    checkpoint_id: uuid.UUID
    manifest: Manifest
    projection: BytesRange | None = None


# ------------------------------------------------------------------------- validation
def check_projection(projection: BytesRange, *, what: str = "projection") -> None:
    """A projection must be non-empty and start included or unbounded (0.17 panics on an
    excluded start: "Start bound of the visible range must be either Included or
    Unbounded").

    Raises:
        InvalidArgumentError: naming the range.
    """
    if projection.start.kind == BoundKind.EXCLUDED:
        raise InvalidArgumentError(
            f"{what} {projection} starts with an excluded key; SlateDB 0.17 needs an included "
            "or unbounded start (start at the next key, key + b'\\x00', instead)")
    if projection.is_empty():
        raise InvalidArgumentError(f"{what} {projection} is empty")


def validate_sources(clone_root: str, sources: Sequence[CloneSource]) -> tuple[CloneSource, ...]:
    """The sources with normalized paths, checked against each other and the clone's root
    (already normalized).

    Raises:
        InvalidArgumentError: no source, a bad path, a source at the clone's path or inside
            it (where the clone's GC and destroy delete), the same path twice (0.17 refuses
            it too), a bad projection.
    """
    if not sources:
        raise InvalidArgumentError("a clone needs at least one source")
    out: list[CloneSource] = []
    seen: set[str] = set()
    for i, s in enumerate(sources):
        root = normalize_path(s.path, what=f"source {i} path", allow_empty=False)
        if root == clone_root:
            raise InvalidArgumentError(
                f"a database cannot be cloned onto itself ({clone_root!r})")
        if is_under(root, clone_root):
            raise InvalidArgumentError(
                f"cannot clone {root!r} into {clone_root!r}: the parent would lie inside the "
                "clone, where the clone's GC and destroy delete; choose a clone path outside "
                "it (a clone inside its parent's path is fine)")
        if root in seen:
            raise InvalidArgumentError(
                f"clone source paths must be unique: {root!r} is given twice (to keep several "
                "ranges of one database, give it once with a range covering them)")
        seen.add(root)
        if s.projection is not None:
            check_projection(s.projection, what=f"the projection of source {root!r}")
        out.append(replace(s, path=root))
    return tuple(out)


def wants_empty_wal(sources: Sequence[CloneSource]) -> bool:
    """0.17 refuses projection and union while a source has data WAL SSTs after its last
    L0 flush ("Projection and/or union with WAL is not supported"): the WAL would be
    copied whole (projection) or not at all (union)."""
    return len(sources) > 1 or any(s.projection is not None for s in sources)


def unflushed_wal_ids(m: Manifest) -> range:
    """WAL ids a clone of ``m`` would copy: ``(replay_after_wal_id, wal_id_last_seen]``."""
    return range(m.replay_after_wal_id + 1, m.wal_id_last_seen + 1)


# --------------------------------------------------------------------------- ranges
def physical_range(info: SsTableInfo, sst_id: Ulid) -> BytesRange:
    """``[first_entry, last_entry]`` of a compacted SST (to +inf without a last entry).

    Raises:
        CorruptObjectError: the manifest's copy of the SST info has no first entry.
    """
    if info.first_entry is None:
        raise CorruptObjectError(f"SST {sst_id} has no first_entry in the manifest")
    end = UNBOUNDED if info.last_entry is None else Bound.included(info.last_entry)
    return BytesRange(Bound.included(info.first_entry), end)


def effective_range(view: SstView, m: Manifest) -> BytesRange | None:
    """The keys a view shows: its SST's physical range cut to its ``visible_range``
    (None when that is empty)."""
    r = physical_range(m.sst(view.sst_id).info, view.sst_id)
    if view.visible_range is not None:
        r = r.intersect(view.visible_range)
    return None if r.is_empty() else r


def _start_order(b: Bound) -> tuple[int, bytes, int]:
    """Sort key of a start bound: unbounded first, then by key, included before excluded."""
    if b.kind == BoundKind.UNBOUNDED:
        return (0, b"", 0)
    assert b.key is not None
    return (1, b.key, 0 if b.kind == BoundKind.INCLUDED else 1)


def _end_order(b: Bound) -> tuple[int, bytes, int]:
    """Sort key of an end bound: by key, excluded before included, unbounded last."""
    if b.kind == BoundKind.UNBOUNDED:
        return (2, b"", 0)
    assert b.key is not None
    return (1, b.key, 0 if b.kind == BoundKind.EXCLUDED else 1)


def bounding_range(m: Manifest, views: Iterable[SstView] | None = None) -> BytesRange | None:
    """The smallest range holding every view's effective range (``views``: those of one
    tree; default every view of ``m``), None without views."""
    ranges = [r for v in (m.all_views() if views is None else views)
              if (r := effective_range(v, m)) is not None]
    if not ranges:
        return None
    start = min((r.start for r in ranges), key=_start_order)
    end = max((r.end for r in ranges), key=_end_order)
    return BytesRange(start, end)


# ------------------------------------------------------------------------ projection
def _clip(view: SstView, window: BytesRange | None, m: Manifest) -> SstView | None:
    """``view`` with ``visible_range = window``, or None when the window is empty or holds
    none of the SST's physical keys."""
    if window is None or window.is_empty():
        return None
    if physical_range(m.sst(view.sst_id).info, view.sst_id).intersect(window).is_empty():
        return None
    return SstView(view.id, view.sst_id, window)


def _project_l0(views: Iterable[SstView], rng: BytesRange, m: Manifest) -> tuple[SstView, ...]:
    out = []
    for v in views:
        eff = effective_range(v, m)
        clipped = _clip(v, None if eff is None else eff.intersect(rng), m)
        if clipped is not None:
            out.append(clipped)
    return tuple(out)


def _project_run(views: Sequence[SstView], rng: BytesRange, m: Manifest) -> tuple[SstView, ...]:
    out = []
    effs = [effective_range(v, m) for v in views]
    for i, v in enumerate(views):
        eff = effs[i]
        if eff is None:
            continue
        nxt = next((e for e in effs[i + 1:] if e is not None), None)
        if nxt is None:
            window = eff.intersect(rng)
        else:
            assert nxt.start.key is not None  # effective starts are included keys
            window = BytesRange(eff.start, Bound.excluded(nxt.start.key)).intersect(rng)
        clipped = _clip(v, window, m)
        if clipped is not None:
            out.append(clipped)
    return tuple(out)


def _project_tree(t: Tree, rng: BytesRange, m: Manifest,
                  ) -> tuple[tuple[SstView, ...], list[SortedRun]]:
    l0 = _project_l0(t.l0, rng, m)
    runs = []
    for run in t.compacted:
        views = _project_run(run.views, rng, m)
        if views:
            runs.append(SortedRun(run.id, views))
    return l0, runs


def project(m: Manifest, projection: BytesRange, *, path: str = "") -> Manifest:
    """``m`` narrowed to ``projection`` (0.17 ``Manifest::projected``; see the module
    docstring). Nothing else changes: sequence numbers, ticks, epochs, WAL ids and
    ``last_compacted_l0_sst_view_id`` stay. With segments (SlateDB RFC-0024) every
    segment is projected the same way and keeps its cursor; a segment left without views
    (a drain marker included) is dropped, as 0.17 drops it (docs/rfcs/0018-segments.md).

    Raises:
        InvalidArgumentError: a bad projection.
        CorruptObjectError: an SST without a first entry.
    """
    check_projection(projection)
    all_trees = trees(m)
    l0, runs = _project_tree(all_trees[0], projection, m)
    segments = []
    for t in all_trees[1:]:
        seg_l0, seg_runs = _project_tree(t, projection, m)
        if seg_l0 or seg_runs:
            segments.append(Segment(t.prefix, t.last_compacted_l0_sst_view_id, seg_l0,
                                    tuple(seg_runs)))
    draft = m if m.segments is None else replace(m, segments=tuple(segments))
    out = draft.with_trees(l0=l0, compacted=runs)
    used = out.referenced_sst_ids()
    external = []
    for e in out.external_dbs:
        kept = tuple(i for i in e.sst_ids if i in used)
        if kept:
            external.append(replace(e, sst_ids=kept))
    return replace(out, external_dbs=tuple(external))


# ---------------------------------------------------------------------- single source
def owned_sst_ids(m: Manifest) -> tuple[Ulid, ...]:
    """SST ids stored under the database's own path (referenced, not external), in view
    order (L0, then runs, then segments), each once."""
    key = (m.l0, m.compacted, m.segments, m.external_dbs)
    memo = _owned_memo[0]  # one read: another thread may replace the entry meanwhile
    if memo is not None and all(map(is_, memo[0], key)):
        return memo[1]  # the same (immutable) trees: a clone plans before and after pinning
    # C-level passes (a clone of a large database walks every view): the ids in view
    # order, deduplicated by a dict in first-seen order, then the external ones dropped
    # (the same ids in the same order as a loop over the views).
    views = chain(m.l0, chain.from_iterable(map(_VIEWS, m.compacted)))
    for seg in m.segments or ():
        views = chain(views, seg.l0, chain.from_iterable(map(_VIEWS, seg.compacted)))
    seen = dict.fromkeys(map(_SST_ID, views))
    for e in m.external_dbs:
        for s in e.sst_ids:
            seen.pop(s, None)
    out = tuple(seen)
    _owned_memo[0] = (key, out)
    return out


_SST_ID, _VIEWS = attrgetter("sst_id"), attrgetter("views")
_owned_memo: list[tuple[tuple[Any, ...], tuple[Ulid, ...]] | None] = [None]
"""The last :func:`owned_sst_ids` call: its trees (compared by identity) and its result."""


def _inherited(parent: Manifest, new_final: Callable[[], uuid.UUID | None]) -> list[ExternalDb]:
    """The parent's non-empty external databases, sourced from the parent's final
    checkpoints on them (0.17: the user's original checkpoint may be gone).

    Raises:
        InvalidDbStateError: an entry without a final checkpoint.
    """
    out = []
    for e in parent.external_dbs:
        if not e.sst_ids:
            continue
        if e.final_checkpoint_id is None:
            raise InvalidDbStateError(
                f"the parent's external database {e.path!r} has no final checkpoint")
        out.append(ExternalDb(e.path, e.final_checkpoint_id, new_final(), e.sst_ids))
    return out


def plan_single_clone(
    parent: Manifest, parent_path: str, source_checkpoint_id: uuid.UUID, *,
    new_id: NewId = uuid.uuid4,
) -> Manifest:
    """The first manifest of a clone of one source (0.17 ``Manifest::cloned``): the
    parent's state (already projected, if asked) with ``initialized = false``, no
    checkpoints, the parent's epochs, and its external databases plus the parent itself.

    Raises:
        InvalidDbStateError: an inherited external database has no final checkpoint.
    """
    external = _inherited(parent, new_id)
    external.append(ExternalDb(parent_path, source_checkpoint_id, new_id(),
                               owned_sst_ids(parent)))
    return replace(parent, external_dbs=tuple(external), checkpoints=(), initialized=False,
                   destroyed_at_s=None)


# ------------------------------------------------------------------------------ union
def _ordered_by_range(sources: Sequence[PinnedSource], prefix: bytes | None = None,
                      ) -> list[tuple[PinnedSource, BytesRange]]:
    """Sources holding data (``prefix``: in the tree of that prefix, ``b""`` the top-level
    one; None: anywhere), by the start of their data's bounding range, checked disjoint
    when a tree is named (0.17 checks the data's ranges, not the projections: sources whose
    projections overlap where one of them holds no data are accepted; with segments it
    checks each segment on its own, SlateDB RFC-0024).

    Raises:
        InvalidArgumentError: two ranges of one tree overlap.
    """
    ranged = []
    for s in sources:
        m = s.manifest
        if prefix is None:
            r = bounding_range(m)
        else:
            t = next((t for t in trees(m) if t.prefix == prefix), None)
            r = None if t is None else bounding_range(
                m, chain(t.l0, chain.from_iterable(run.views for run in t.compacted)))
        if r is not None:
            ranged.append((s, r))
    ranged.sort(key=lambda sr: _start_order(sr[1].start))
    if prefix is None:
        return ranged
    where = "" if prefix == ROOT else f" in segment {segment_label(prefix)!r}"
    for (a, ra), (b, rb) in zip(ranged, ranged[1:], strict=False):
        if not ra.intersect(rb).is_empty():
            raise InvalidArgumentError(
                f"clone sources have overlapping key ranges{where}: {a.path!r} holds {ra} "
                f"and {b.path!r} holds {rb} (the ranges of the data each source keeps after "
                "its projection); a union needs disjoint ranges (adjacent half-open ranges "
                "such as [a, b) and [b, c) are fine)")
    return ranged


def _union_external_dbs(ordered: Sequence[PinnedSource], new_id: NewId) -> tuple[ExternalDb, ...]:
    """Every source's inherited entries and own SSTs, one entry per ``(path, SST ids)``.
    Of merged entries the source checkpoint a source was cloned from wins (a retry checks
    it), else the smallest id. Sorted by path, then SST ids.

    Raises:
        InvalidDbStateError: an inherited entry without a final checkpoint.
    """
    given = {s.path: s.checkpoint_id for s in ordered}
    merged: dict[tuple[str, tuple[Ulid, ...]], uuid.UUID] = {}
    for s in ordered:
        entries = _inherited(s.manifest, lambda: None)
        own = owned_sst_ids(s.manifest)
        if own:
            entries.append(ExternalDb(s.path, s.checkpoint_id, None, own))
        for e in entries:
            key = (e.path, tuple(sorted(set(e.sst_ids))))
            cur = merged.get(key)
            user = given.get(e.path)
            if cur is None or (user is not None and e.source_checkpoint_id == user):
                merged[key] = e.source_checkpoint_id
            elif user is None or cur != user:
                merged[key] = min(cur, e.source_checkpoint_id)
    return tuple(ExternalDb(path, cp, new_id(), ids)
                 for (path, ids), cp in sorted(merged.items(), key=lambda kv: kv[0]))


def _sst_handles(sources: Sequence[PinnedSource]) -> list[SstHandle]:
    """Handles of every source's SSTs; one SST id owned by two databases is refused.

    Raises:
        InvalidDbStateError: the same SST id names different SSTs in two sources.
    """
    owner: dict[Ulid, tuple[str, SstHandle]] = {}
    for s in sources:
        paths = s.manifest.external_sst_paths()
        for h in s.manifest.ssts:
            where = paths.get(h.id, s.path)
            prev = owner.setdefault(h.id, (where, h))
            if prev[0] != where:
                raise InvalidDbStateError(
                    f"SST id {h.id} is stored under both {prev[0]!r} and {where!r}; a union "
                    "clone cannot tell them apart")
    return [h for _, h in owner.values()]


def _check_extractors(sources: Sequence[PinnedSource]) -> str | None:
    """The segment extractor name every source shares (None: none has one).

    Raises:
        InvalidArgumentError: the sources disagree (0.17: "clone sources disagree on
            segment extractor").
    """
    names = {s.manifest.segment_extractor_name for s in sources}
    if len(names) > 1:
        given = ", ".join(f"{s.path!r}: {s.manifest.segment_extractor_name!r}"
                          for s in sources)
        raise InvalidArgumentError(
            f"clone sources disagree on the segment extractor ({given}): a union needs "
            "every source without one or every source with the same one (SlateDB "
            "RFC-0024)")
    return next(iter(names))


def plan_union_clone(sources: Sequence[PinnedSource], *, new_id: NewId = uuid.uuid4) -> Manifest:
    """The first manifest of a clone of several (already projected) sources (0.17
    ``Manifest::cloned_from_union``): a fresh database (epochs 0, no WAL, empty sequence
    tracker, ``recent_snapshot_min_seq`` 0, no last-compacted view) whose L0 and sorted runs
    are the sources' in key order, runs renumbered ``n-1 .. 0`` in that order;
    ``last_l0_seq`` and ``last_l0_clock_tick`` are the largest of all sources (those without
    data included).

    With segments (SlateDB RFC-0024, docs/rfcs/0018-segments.md): every source must have
    the same extractor name; each tree (the top-level one, then the segments in prefix
    order) is the union of that tree of the sources holding data in it, ordered by where
    their data starts in it and checked disjoint there only; segments without views are
    left out, cursors start empty, the prefixes must form an antichain, and the runs of all
    trees are renumbered ``n-1 .. 0`` in that order.

    Raises:
        InvalidArgumentError: overlapping key ranges in a tree, different extractors,
            prefixes that are not an antichain.
        InvalidDbStateError: an inherited entry without a final checkpoint.
    """
    extractor = _check_extractors(sources)
    prefixes = sorted({t.prefix for s in sources for t in trees(s.manifest)[1:]
                       if not t.is_empty})
    check_antichain(prefixes)
    built: list[tuple[bytes, tuple[SstView, ...], list[SortedRun]]] = []
    for prefix in [ROOT, *prefixes]:
        ordered_here = [s for s, _ in _ordered_by_range(sources, prefix)]
        if not ordered_here and prefix != ROOT:
            continue  # views in no source: 0.17 leaves the segment out
        tree_of = [next(t for t in trees(s.manifest) if t.prefix == prefix)
                   for s in ordered_here]
        built.append((prefix, tuple(v for t in tree_of for v in t.l0),
                      [r for t in tree_of for r in t.compacted]))
    n = sum(len(runs) for _, _, runs in built)
    renumbered: list[list[SortedRun]] = []
    for _, _, runs in built:
        renumbered.append([SortedRun(n - 1 - i, r.views) for i, r in enumerate(runs)])
        n -= len(runs)
    ordered = [s for s, _ in _ordered_by_range(sources)]
    base = Manifest(
        initialized=False,
        last_l0_seq=max(s.manifest.last_l0_seq for s in sources),
        last_l0_clock_tick=max((s.manifest.last_l0_clock_tick for s in sources), default=I64_MIN),
        sequence_tracker=EMPTY_SEQUENCE_TRACKER,
        segments=tuple(Segment(prefix, None, l0, tuple(runs))
                       for (prefix, l0, _), runs in zip(built[1:], renumbered[1:], strict=True)),
        segment_extractor_name=extractor,
        external_dbs=_union_external_dbs(ordered, new_id),
    )
    return base.with_trees(l0=built[0][1], compacted=renumbered[0],
                           new_ssts=_sst_handles(ordered))


# ------------------------------------------------------------------------------- plan
def plan_clone(sources: Sequence[PinnedSource], *, new_id: NewId = uuid.uuid4) -> Manifest:
    """The clone's manifest 1 (``initialized = false``): each source projected to its
    range, then one source cloned, or several unioned.

    Raises:
        InvalidArgumentError: no source, a bad projection, overlapping ranges, or a union
            of sources with different segment extractors.
        InvalidDbStateError: an inherited external database has no final checkpoint.
        CorruptObjectError: an SST without a first entry.
    """
    if not sources:
        raise InvalidArgumentError("a clone needs at least one source")
    projected = [
        s if s.projection is None else replace(s, manifest=project(s.manifest, s.projection,
                                                                   path=s.path))
        for s in sources
    ]
    if len(projected) == 1:
        s = projected[0]
        return plan_single_clone(s.manifest, s.path, s.checkpoint_id, new_id=new_id)
    return plan_union_clone(projected, new_id=new_id)
