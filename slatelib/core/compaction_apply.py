"""Applying a finished compaction to a manifest (the body of the commit CAS). Pure.

:func:`apply_compaction` is called on the latest manifest each time the commit is
attempted, so a commit that lost a CAS race is rebased onto whatever writers added in the
meantime (their new L0 views are kept). It refuses to apply when another compactor fenced
us or when a source is gone. As 0.17.0's compactor does (``CompactorState::
finish_compaction``), it:

- removes the source L0 views and source runs, and inserts the output run so run ids stay
  in descending order, even when it is empty (every input row dropped: 0.17 keeps a sorted
  run without SSTs, checked in ``tests/interop/test_compact_segments_interop.py``);
- sets ``last_compacted_l0_sst_view_id`` to the newest source L0 view;
- all of this in the compaction's tree: the top-level tree or its segment (SlateDB
  RFC-0024; the other trees are left as they are);
- shrinks every ``external_dbs[].sst_ids`` to the SSTs still referenced (entries are kept
  even when empty: detaching a clone is GC's job, design doc 'checkpoints and clones');
- adds a checkpoint that keeps the replaced SSTs readable for ``checkpoint_lifetime``.
  0.17 writes that checkpoint in a separate manifest version before the commit, pinning
  the version that still holds the sources; here it is part of the single commit CAS and
  pins the base version the commit is applied to, which holds the same SSTs.

The checkpoint's id doubles as the commit marker: :func:`is_committed` finds it after a lost
CAS response, so a commit is never applied twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace

from slatelib.core.compaction_plan import CompactionSpec
from slatelib.core.invariants import check_compactor_epoch
from slatelib.core.manifest import Checkpoint, ExternalDb, Manifest, SortedRun, SstHandle, SstView
from slatelib.core.segments import Tree, segment_label, try_tree, with_tree
from slatelib.errors import ConflictError, InternalError


class SourcesChangedError(ConflictError):
    """A compaction source is no longer in the manifest: the commit is abandoned."""


def check_sources(manifest: Manifest, spec: CompactionSpec) -> None:
    """Raise unless every source is in ``manifest`` exactly as it was planned.

    Raises:
        SourcesChangedError: a source view or run is gone or was rewritten, or the
            compaction's segment is gone.
    """
    _source_tree(manifest, spec)


def _source_tree(manifest: Manifest, spec: CompactionSpec) -> Tree:
    t = try_tree(manifest, spec.segment)
    if t is None:
        raise SourcesChangedError(
            f"the segment {segment_label(spec.segment)!r} of the compaction is gone")
    l0 = {v.id: v for v in t.l0}
    for view in spec.l0_views:
        if l0.get(view.id) != view:
            raise SourcesChangedError(f"compaction source l0 view {view.id} is gone")
    runs = {r.id: r for r in t.compacted}
    for run in spec.runs:
        if runs.get(run.id) != run:
            raise SourcesChangedError(f"compaction source run {run.id} is gone or changed")
    return t


def is_committed(manifest: Manifest, marker: uuid.UUID) -> bool:
    """Whether the commit carrying checkpoint ``marker`` is in ``manifest``."""
    return manifest.checkpoint(marker) is not None


def insert_run(runs: Sequence[SortedRun], output: SortedRun | None,
               replaced: set[int]) -> tuple[SortedRun, ...]:
    """Runs without ``replaced``, with ``output`` placed so ids stay descending (0.17's
    insertion: before the first run whose id is not above the output's)."""
    out: list[SortedRun] = []
    inserted = output is None
    for run in runs:
        if not inserted and output is not None and output.id >= run.id:
            out.append(output)
            inserted = True
        if run.id not in replaced:
            out.append(run)
    if not inserted and output is not None:
        out.append(output)
    ids = [r.id for r in out]
    if any(a <= b for a, b in zip(ids, ids[1:], strict=False)):
        raise InternalError(f"sorted run ids out of order after compaction: {ids}")
    return tuple(out)


def prune_external(manifest: Manifest) -> tuple[ExternalDb, ...]:
    """``external_dbs`` with only the SST ids still referenced (entries kept)."""
    used = manifest.referenced_sst_ids()
    return tuple(replace(e, sst_ids=tuple(s for s in e.sst_ids if s in used))
                 for e in manifest.external_dbs)


def apply_compaction(
    base: Manifest,
    spec: CompactionSpec,
    outputs: Sequence[SstHandle],
    *,
    epoch: int,
    checkpoint: Checkpoint,
) -> Manifest:
    """``base`` with the compaction applied (see the module docstring).

    Raises:
        FencedError: another compactor owns the database now.
        SourcesChangedError: a source is gone.
        InternalError: an output SST id is already in the manifest.
    """
    return apply_compactions(base, [spec], [outputs], epoch=epoch, checkpoint=checkpoint)


def apply_outputs(base: Manifest, spec: CompactionSpec,
                  outputs: Sequence[SstHandle]) -> Manifest:
    """``base`` with the sources of ``spec`` replaced by its output run in its tree (no
    epoch check, no ``external_dbs`` pruning, no checkpoint: :func:`apply_compaction`).

    Raises:
        SourcesChangedError: a source (or the segment) is gone.
        InternalError: an output SST id is already in the manifest.
    """
    t = _source_tree(base, spec)
    clash = {h.id for h in outputs} & base.sst_map.keys()
    if clash:
        raise InternalError(f"compaction output SSTs already in the manifest: {sorted(clash)}")
    source_views = set(spec.l0_view_ids)
    l0 = tuple(v for v in t.l0 if v.id not in source_views)
    output = SortedRun(spec.destination, tuple(SstView.identity(h.id) for h in outputs))
    replaced = set(spec.run_ids) | {spec.destination}
    runs = insert_run(t.compacted, output, replaced)
    cursor = spec.l0_views[0].id if spec.l0_views else t.last_compacted_l0_sst_view_id
    return with_tree(base, Tree(t.prefix, l0, runs, cursor), new_ssts=outputs)


def apply_compactions(
    base: Manifest,
    specs: Sequence[CompactionSpec],
    outputs: Sequence[Sequence[SstHandle]],
    *,
    epoch: int,
    checkpoint: Checkpoint,
) -> Manifest:
    """:func:`apply_compaction` of several compactions (``outputs[i]`` of ``specs[i]``;
    one per tree of a segmented database) in one manifest version, with one checkpoint.

    Raises:
        FencedError: another compactor owns the database now.
        SourcesChangedError: a source is gone.
        InternalError: an output SST id is already in the manifest, or the lists differ
            in length.
    """
    if len(specs) != len(outputs):
        raise InternalError(f"{len(specs)} compactions but {len(outputs)} output lists")
    check_compactor_epoch(base, epoch)
    m = base
    for spec, outs in zip(specs, outputs, strict=True):
        m = apply_outputs(m, spec, outs)
    return replace(m, external_dbs=prune_external(m), checkpoints=(*m.checkpoints, checkpoint))
