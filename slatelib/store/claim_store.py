"""slatelib's compactor claim records: ``<root>/slatelib/claims/<20-digit epoch>.<run>.json``.

See :mod:`slatelib.core.compactor_claim`. Records are small JSON objects that only
slatelib reads; one per (epoch, run), so concurrent runs never overwrite each other's.
"""

from __future__ import annotations

import logging
import uuid

from slatelib.core.compactor_claim import Activity, ClaimRecord, ClaimVerdict, judge_claim
from slatelib.core.manifest import Manifest
from slatelib.errors import CorruptObjectError, ObjectMissingError
from slatelib.ids import parse_id
from slatelib.objstore import ObjectStore
from slatelib.paths import DbPaths, file_name
from slatelib.store.manifest_store import ManifestStore

log = logging.getLogger(__name__)


class ClaimStore:
    def __init__(self, store: ObjectStore, root: str) -> None:
        self.store = store
        self.paths = DbPaths.of(root)

    def put(self, record: ClaimRecord) -> None:
        self.store.put(self.paths.claim(record.epoch, record.run_id), record.to_json())

    def _paths(self, min_epoch: int = 0) -> list[tuple[int, str]]:
        out = []
        for meta in self.store.list(self.paths.claims_dir):
            epoch = parse_id(file_name(meta.path).split(".", 1)[0])
            if epoch is not None and epoch >= min_epoch:  # anything else: not ours, kept
                out.append((epoch, meta.path))
        return out

    def read_epoch(self, epoch: int) -> list[ClaimRecord]:
        """Every readable record of ``epoch`` (an undecodable one is logged and skipped: it
        can only make the epoch look foreign, the safe answer)."""
        out = []
        for e, path in self._paths(epoch):
            if e != epoch:
                continue
            try:
                out.append(ClaimRecord.from_json(self.store.get(path), path=path))
            except ObjectMissingError:
                continue
            except CorruptObjectError as exc:
                log.warning("ignoring an unreadable claim record [%s]", exc)
        return out

    def markers_up_to(self, epoch: int) -> set[uuid.UUID]:
        """The marker checkpoint ids of every readable record of epochs ``<= epoch``: the
        fence manifests of claims that a claim of a newer epoch supersedes."""
        out: set[uuid.UUID] = set()
        for e, path in self._paths():
            if e > epoch:
                continue
            try:
                out.add(ClaimRecord.from_json(self.store.get(path), path=path).marker)
            except (ObjectMissingError, CorruptObjectError):
                continue  # gone, or not a record of ours: nothing to drop for it
        return out

    def prune_below(self, epoch: int) -> int:
        """Delete the records of epochs below ``epoch`` (fenced claims; they decide nothing
        any more). Returns how many were deleted."""
        old = [p for e, p in self._paths() if e < epoch]
        if old:
            self.store.delete_many(old)
        return len(old)


def judge_manifest(manifests: ManifestStore, claims: ClaimStore, manifest: Manifest, *,
                   compactions_epoch: int | None, activity: Activity | None = None,
                   ) -> ClaimVerdict:
    """:func:`judge_claim` with slatelib's records and manifest versions read from storage."""
    def read(mid: int) -> Manifest | None:
        got = manifests.try_read(mid)
        return None if got is None else got.value

    return judge_claim(manifest, claims.read_epoch(manifest.compactor_epoch), read,
                       compactions_epoch=compactions_epoch, activity=activity)
