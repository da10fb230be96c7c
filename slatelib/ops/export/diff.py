"""The changes between two checkpoints of a database, read in parallel key ranges.

The incremental export's source (docs/rfcs/0011-spark-datasource-and-export.md): the key
ranges are planned on the new checkpoint (:func:`slatelib.ops.export.scan.plan_scan`); each
:class:`DiffTask` also reads the old checkpoint's views of the same range, and
:func:`diff_task_rows` streams both views in key order through
:func:`slatelib.core.view_diff.diff_views`. The result is exact whatever happened between
the two checkpoints (overwrites, deletes, merges, compactions), as long as the old
checkpoint still exists: it pins the SSTs of its view against GC.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain

from slatelib.core.ranges import BytesRange
from slatelib.core.view_diff import DELETE, diff_views
from slatelib.core.visible_rows import VisibleRow
from slatelib.objstore import ObjectStore
from slatelib.ops.export.pin import PinnedCheckpoint
from slatelib.ops.export.scan import (
    DEFAULT_MIN_PARTITION_BYTES,
    ScanTask,
    plan_scan,
    scan_task_rows,
)

CHUNK_ROWS = 8192


@dataclass(frozen=True, slots=True)
class DiffTask:
    """One key range: the new checkpoint's task and the old one's (None: the old view has
    no SST in the range; its WAL rows, if any, are in ``old``'s task all the same)."""

    new: ScanTask
    old: ScanTask
    columns: tuple[str, ...]


def plan_diff(
    store: ObjectStore,
    db_path: str,
    old: PinnedCheckpoint,
    new: PinnedCheckpoint,
    *,
    columns: Sequence[str],
    key_range: BytesRange | None = None,
    partitions: int = 1,
    min_partition_bytes: int = DEFAULT_MIN_PARTITION_BYTES,
    merge_operator: str | None = None,
) -> list[DiffTask]:
    """One task per key range of the new checkpoint (see the module docstring).

    Raises:
        InvalidArgumentError: bad ``partitions`` / ``min_partition_bytes``.
        CorruptObjectError / ChecksumMismatchError: an unreadable SST index.
    """
    rng = key_range or BytesRange.all()
    new_tasks = plan_scan(store, db_path, new.manifest, manifest_id=new.manifest_id,
                          checkpoint_id=new.checkpoint.id, key_range=rng,
                          partitions=partitions, min_partition_bytes=min_partition_bytes,
                          merge_operator=merge_operator)
    out = []
    for t in new_tasks:
        (old_task,) = plan_scan(store, db_path, old.manifest, manifest_id=old.manifest_id,
                                checkpoint_id=old.checkpoint.id, key_range=t.range,
                                partitions=1, merge_operator=merge_operator)
        out.append(DiffTask(t, old_task, tuple(columns)))
    return out


def _keep(columns: Sequence[str]) -> tuple[bool, ...]:
    """Per position of a visible row: whether it is compared (``kind`` is always VALUE)."""
    wanted = set(columns)
    return (True, "seq" in wanted, True, "value" in wanted, "expire_ts" in wanted,
            "create_ts" in wanted)


def _projected(rows: Iterator[list[VisibleRow]], keep: tuple[bool, ...]) -> Iterator[VisibleRow]:
    """Rows with the columns not exported set to None, so that only exported columns can
    make a difference."""
    if all(keep):
        return chain.from_iterable(rows)
    return (tuple(v if k else None for v, k in zip(r, keep, strict=True))  # type: ignore[misc]
            for r in chain.from_iterable(rows))


def diff_task_rows(task: DiffTask, *, store: ObjectStore | None = None,
                   ) -> Iterator[tuple[list[str], list[VisibleRow]]]:
    """``(changes, rows)`` chunks of the range's differences in key order: ``changes[i]`` is
    ``"upsert"`` (``rows[i]`` is the new row) or ``"delete"`` (``rows[i]`` is the old row).

    Raises:
        the errors of :func:`slatelib.ops.export.scan.scan_task_rows`.
    """
    obj_store = store if store is not None else task.new.store.open()
    keep = _keep(task.columns)
    old = _projected(scan_task_rows(task.old, store=obj_store), keep)
    new = _projected(scan_task_rows(task.new, store=obj_store), keep)
    changes: list[str] = []
    rows: list[VisibleRow] = []
    for change, row in diff_views(old, new):
        changes.append(change)
        rows.append(row)
        if len(rows) >= CHUNK_ROWS:
            yield changes, rows
            changes, rows = [], []
    if rows:
        yield changes, rows


__all__ = ["DELETE", "DiffTask", "diff_task_rows", "plan_diff"]
