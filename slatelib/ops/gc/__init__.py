"""Garbage collection, as 0.17.0 does it: the public API, re-exported here (no logic).

:func:`collect_garbage` collects one database in this process; :func:`run_gc` is the
orchestration it shares with the Spark job (``jobs/gc.py``), which brings its own
:class:`GcBackend`.

Modules: :mod:`~.collect` (one run, in 0.17's order), :mod:`~.state` (every read a
deletion depends on), :mod:`~.backend` (listing and deleting, in-process), :mod:`~.exec`
(the per-object work that a Spark executor shares), :mod:`~.clone` (checkpoints and
external databases of clones), :mod:`~.destroy` (a soft-destroyed database past its
grace), :mod:`~.report`. The per-object rules are :mod:`slatelib.core.gc_rules`.
"""

from __future__ import annotations

from slatelib.core.gc_rules import GcDecision, GcOptions
from slatelib.ops.gc.backend import GcBackend, LocalBackend
from slatelib.ops.gc.clone import drop_external_dbs, release_checkpoint, remove_expired_checkpoints
from slatelib.ops.gc.collect import (
    DIRS,
    DecisionSink,
    check_db_spelling,
    check_live_external_dbs,
    collect_garbage,
    fresh_rules,
    gc_options,
    run_gc,
)
from slatelib.ops.gc.report import GcReport
from slatelib.ops.gc.state import read_compactions_state, read_latest_manifest, read_live_set

__all__ = [
    "DIRS",
    "DecisionSink",
    "GcBackend",
    "GcDecision",
    "GcOptions",
    "GcReport",
    "LocalBackend",
    "check_db_spelling",
    "check_live_external_dbs",
    "collect_garbage",
    "drop_external_dbs",
    "fresh_rules",
    "gc_options",
    "read_compactions_state",
    "read_latest_manifest",
    "read_live_set",
    "release_checkpoint",
    "remove_expired_checkpoints",
    "run_gc",
]
