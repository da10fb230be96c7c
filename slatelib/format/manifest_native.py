"""The optional C extension ``slatelib._manifest``: the manifest codec's hot paths. Pure.

``ext`` is the extension module as :mod:`slatelib.format.native` loaded it (None when it is
not built or when ``SLATELIB_NO_NATIVE`` was set: the same switch as for
``slatelib._speedups``), configured here with the core classes it builds (its planning
part with :mod:`slatelib.core.compaction_inputs`). :mod:`slatelib.format.manifest_codec` uses it for
``encode_manifest`` (the whole version-2 file) and for the three big vectors of a decoded
manifest (``ssts``, ``l0``, ``compacted``, also inside segments, and the ``sst_ids`` of
external databases); everything else is decoded by the reference code.
:mod:`slatelib.format.compactions_codec` uses it for ``encode_compactions`` (the whole
compactions file) and for the output-SST and L0 view id vectors of a decoded one.

The encoder keeps the section it wrote first (the SST list and the tree) with the tuples it
came from: encoding a manifest that holds the same tuples (a checkpoint or an epoch
changed) resumes after that section, and decoding bytes that end with it returns those
tuples (``reuse_tree``). See ``slatelib/_manifest.c`` ("tree snapshot").

The pure-Python codec is the reference: the native code returns the same bytes and objects
and rejects at least what the reference rejects. When it rejects an input (a malformed
buffer, an out-of-range value) the codec reruns the reference, which raises the documented
error (``tests/unit/format/test_manifest_native.py`` holds the two together).
See docs/rfcs/0010-manifest-codec.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any, Protocol, cast

from slatelib.core.compaction_inputs import InputView, TaskView
from slatelib.core.compactions import (
    CompactedSsTable,
    Compactions,
    CompactionStatus,
    DrainSegmentSpec,
    TieredCompactionSpec,
)
from slatelib.core.manifest import (
    CompressionCodec,
    FilterFormat,
    Manifest,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstType,
    SstView,
)
from slatelib.core.ranges import UNBOUNDED, Bound, BoundKind, BytesRange
from slatelib.format.native import manifest_module
from slatelib.ids import Ulid

ViewCallback = Callable[[Ulid, Ulid, int], SstView]
RangeCallback = Callable[[int], BytesRange]
ProblemCallback = Callable[[SstView, Mapping[Ulid, SstHandle]], "str | None"]


class ManifestExt(Protocol):
    """The functions of ``slatelib/_manifest.c``; each raises ValueError (or TypeError,
    OverflowError) on anything it does not accept."""

    def configure(self, info: type[SsTableInfo], handle: type[SstHandle], view: type[SstView],
                  run: type[SortedRun], compressions: tuple[IntEnum, ...],
                  sst_types: tuple[IntEnum, ...], filter_formats: tuple[IntEnum, ...],
                  /) -> None: ...
    def read_handles(self, data: bytes, start: int, vec_start: int, n: int,
                     /) -> tuple[tuple[SstHandle, ...], dict[Ulid, SstHandle]]: ...
    def read_views(self, data: bytes, start: int, vec_start: int, n: int,
                   known: dict[Ulid, SstHandle], view_cb: ViewCallback,
                   /) -> tuple[SstView, ...]: ...
    def read_runs(self, data: bytes, start: int, vec_start: int, n: int,
                  known: dict[Ulid, SstHandle], view_cb: ViewCallback,
                  /) -> tuple[SortedRun, ...]: ...
    def read_ulids(self, data: bytes, start: int, vec_start: int, n: int,
                   /) -> tuple[Ulid, ...]: ...
    def reuse_tree(self, data: bytes, ssts_pos: int, l0_pos: int, runs_pos: int, last_pos: int,
                   /) -> tuple[tuple[SstHandle, ...], tuple[SstView, ...],
                               tuple[SortedRun, ...], Ulid | None,
                               dict[Ulid, SstHandle]] | None: ...
    def forget_tree(self) -> None: ...
    def untrack_frozen(self, objects: list[Any], types: tuple[type, ...], /) -> int: ...
    def ulid_names(self, head: str, tail: str, ids: list[int], /) -> list[str]: ...
    def configure_planning(self, input_view: type[InputView], task_view: type[TaskView],
                           bytes_range: type[BytesRange], bound: type[Bound],
                           included: BoundKind, unbounded: Bound, /) -> None: ...
    def identity_input_views(self, views: list[SstView], paths: list[str],
                             sst_map: dict[Ulid, SstHandle], l0_ids: set[Ulid],
                             /) -> list[InputView | None]: ...
    def encode_v2(self, m: Manifest, view_problem: ProblemCallback, size_hint: int,
                  /) -> bytes: ...
    def configure_compactions(self, compacted: type[CompactedSsTable],
                              tiered: type[TieredCompactionSpec], drain: type[DrainSegmentSpec],
                              statuses: tuple[IntEnum, ...], /) -> None: ...
    def read_compacted(self, data: bytes, start: int, vec_start: int, n: int,
                       range_cb: RangeCallback, /) -> tuple[CompactedSsTable, ...]: ...
    def encode_compactions(self, c: Compactions, size_hint: int, /) -> bytes: ...


def _by_value(members: type[IntEnum]) -> tuple[IntEnum, ...]:
    """The members indexed by value (the C code maps a stored value to its member)."""
    values = sorted(members, key=int)
    if [int(v) for v in values] != list(range(len(values))):  # pragma: no cover - static enums
        raise RuntimeError(f"{members.__name__} values are not 0..n-1")
    return tuple(values)


def _load() -> ManifestExt | None:
    """The extension loaded by :mod:`slatelib.format.native`, configured with the core
    classes it builds (None: not built, disabled, or a stale build)."""
    if manifest_module is None:
        return None
    module = cast(ManifestExt, manifest_module)
    if not hasattr(module, "configure_compactions"):  # pragma: no cover - a stale build
        return None  # built from an older _manifest.c (a failed rebuild keeps it): unused
    module.configure(SsTableInfo, SstHandle, SstView, SortedRun, _by_value(CompressionCodec),
                     _by_value(SstType), _by_value(FilterFormat))
    module.configure_compactions(CompactedSsTable, TieredCompactionSpec, DrainSegmentSpec,
                                 _by_value(CompactionStatus))
    module.configure_planning(InputView, TaskView, BytesRange, Bound, BoundKind.INCLUDED,
                              UNBOUNDED)
    return module


ext: ManifestExt | None = _load()
HAVE_NATIVE: bool = ext is not None
