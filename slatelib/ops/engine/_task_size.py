"""The estimated input bytes of a compaction task: what progress counts (the Spark runner
of :mod:`slatelib.spark.compaction`, ``slate compact``'s threads).
Pure."""

from __future__ import annotations

import dataclasses

from slatelib.core.compaction_source import estimate_view_size, sst_size
from slatelib.ops.engine._task import CompactionTask

__all__ = ["task_bytes"]


def task_bytes(task: CompactionTask) -> int:
    """The estimated input bytes of one key range: each input view clipped to the range,
    sized as the planner sizes views (0.17's ``estimate_visible_size``); 0 if unknown."""
    total = 0
    rng = task.range
    for source in task.sources:
        for tv in source.views:
            vis = tv.view.visible_range
            info = tv.handle.info
            if (vis is None and info.last_entry is not None
                    and rng.contains(info.first_entry or b"") and rng.contains(info.last_entry)):
                # The whole SST lies in the range (every view inside a range of a large
                # run): the estimate of the clipped view is the SST's size, without the
                # range arithmetic and the copy of the view below.
                total += sst_size(info)
                continue
            clipped = task.range if vis is None else vis.intersect(task.range)
            try:
                total += estimate_view_size(dataclasses.replace(tv.view, visible_range=clipped),
                                            tv.handle.info)
            except Exception:  # an estimate only: never fail the compaction over it
                continue
    return total
