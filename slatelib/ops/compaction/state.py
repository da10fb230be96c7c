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


def read_state(manifests: ManifestStore, compactions: CompactionsStore,
               previous: DbState | None = None) -> DbState:
    """The latest compactions file (if any), then the latest manifest; with the
    ``previous`` state of the same database, versions that did not change are not read
    again (:meth:`~slatelib.store.sequenced.SequencedStore.try_read_latest`'s ``known``).

    Raises:
        ManifestMissingError: no database at this path.
        CorruptObjectError: an undecodable latest version.
    """
    if previous is None:
        state = compactions.try_read_latest()
        return DbState(manifests.read_latest(), state)
    state = compactions.try_read_latest(previous.compactions)
    manifest = manifests.try_read_latest(previous.manifest)
    if manifest is None:
        manifest = manifests.read_latest()  # raises the missing-database error
    return DbState(manifest, state)
