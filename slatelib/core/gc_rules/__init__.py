"""GC rules: one keep/delete decision, with its reason, for each listed object. Pure.

The rules are those of 0.17.0's garbage collector (``garbage_collector.rs`` and its tasks
``manifest_gc``, ``wal_gc``, ``compacted_gc``, ``compactions_gc``), applied to one object at
a time so that a Spark executor can decide its share of a listing from a small, picklable
:class:`GcRules` (built by :mod:`slatelib.core.gc_plan` from the manifests):

- **manifest/**: delete a version that is neither the latest nor pinned by a checkpoint of
  the latest manifest and was written more than ``min_age`` ago (strictly).
- **wal/**: a WAL SST (size > 0) is kept while it lies in a replay range: ``[replay_after,
  inf)`` of the latest manifest, ``(replay_after, wal_id_last_seen]`` of every checkpoint's
  manifest; otherwise deleted once older than ``min_age``. Zero-byte objects are writer
  fences, collected under the same rules but, as in 0.17, only as a dry run by default.
- **compacted/**: an SST no live manifest references is deleted when its ULID time is
  before ``min(now - min_age, compaction low watermark, newest L0)`` (SlateDB RFC-0029)
  **and** the object itself was written more than ``min_age`` ago. The second condition is
  slatelib's addition: it protects SSTs whose writer's clock runs behind GC's (0.17 looks
  only at the ULID).
- **compactions/**: every version but the latest, once older than ``min_age``.
- An object whose name is not exactly what SlateDB writes (``<20 digits>.manifest``,
  ``<20 digits>.sst``, ``<ULID>.sst``, ``<20 digits>.compactions``) is always kept.

GC only ever deletes a path exactly as the listing returned it, and only when that path is
the canonical name of the id it parses to; references are matched by id, never by a path
string built from a manifest. A listing that spells names differently from what SlateDB
writes (another scheme, percent-encoding, case) therefore deletes nothing (Iceberg's orphan
removal once deleted live files because a listing said ``s3a://`` where the metadata said
``s3://``).

Modules: :mod:`~.rules` (options and the rules of one database), :mod:`~.decision` (the
result), :mod:`~.objects` (classify a listed path, decide it), and one rule per object
kind: :mod:`~.sequenced` (``manifest/``, ``compactions/``), :mod:`~.wal`,
:mod:`~.compacted`. This package re-exports their public names (no logic).
"""

from __future__ import annotations

from slatelib.core.gc_rules.decision import Action, GcDecision, ObjectKind
from slatelib.core.gc_rules.objects import LAYOUT_DIRS, Classified, classify, decide
from slatelib.core.gc_rules.rules import (
    DEFAULT_MIN_AGE_S,
    GC_KINDS,
    CompactedCutoff,
    DestroyRules,
    DirOptions,
    DirPolicy,
    GcOptions,
    GcRules,
    SequencedRules,
    WalRange,
)

__all__ = [
    "DEFAULT_MIN_AGE_S",
    "GC_KINDS",
    "LAYOUT_DIRS",
    "Action",
    "Classified",
    "CompactedCutoff",
    "DestroyRules",
    "DirOptions",
    "DirPolicy",
    "GcDecision",
    "GcOptions",
    "GcRules",
    "ObjectKind",
    "SequencedRules",
    "WalRange",
    "classify",
    "decide",
]
