"""The compactor state a compaction run plans from: the compactions file, then the manifest.

Read compactions-first, then the manifest (0.17's ``CompactorStateReader`` order).
"""

from __future__ import annotations

from dataclasses import dataclass

from slatelib.core.compactions import Compactions
from slatelib.core.manifest import Manifest
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sequenced import Versioned


@dataclass(frozen=True)
class DbState:
    manifest: Versioned[Manifest]
    compactions: Versioned[Compactions] | None


def read_state(manifests: ManifestStore, compactions: CompactionsStore) -> DbState:
    """The latest compactions file (if any), then the latest manifest.

    Raises:
        ManifestMissingError: no database at this path.
        CorruptObjectError: an undecodable latest version.
    """
    state = compactions.try_read_latest()
    return DbState(manifests.read_latest(), state)
