"""The records compaction planning makes per input view: :class:`TaskView` (a view located:
its SST handle and object path) and :class:`InputView` (a task view with its effective key
range, estimated size and level). Pure.

They are core types so that the manifest extension can build the plain identity ones in
bulk (``slatelib.format.seam.identity_input_views``, configured with these classes by
:mod:`slatelib.format.manifest_native`): the C code only ever sees core classes.
See docs/rfcs/0014-large-manifest-planning.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from slatelib.core.manifest import SstHandle, SstView
from slatelib.core.ranges import BytesRange


@dataclass(frozen=True, slots=True)
class TaskView:
    """One input view: the view, its SST handle and the object path of the SST."""

    view: SstView
    handle: SstHandle
    path: str


@dataclass(frozen=True, slots=True)
class InputView:
    """An input view with its handle and path (``task_view``), keys and estimated size.

    ``l0`` views usually span the whole key space, so their weight is never placed at
    their first key: their indexes are always read for splitting.
    """

    view: SstView
    task_view: TaskView
    effective: BytesRange
    size: int
    l0: bool


__all__ = ["InputView", "TaskView"]
