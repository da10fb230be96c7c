"""Compactor state versions of one database (format §3 and §6) over a :class:`SequencedStore`."""

from __future__ import annotations

from slatelib.core.compactions import Compactions
from slatelib.format.compactions_codec import decode_compactions, encode_compactions
from slatelib.objstore import ObjectStore
from slatelib.paths import COMPACTIONS_EXT, DbPaths
from slatelib.store.sequenced import SequencedStore


class CompactionsStore(SequencedStore[Compactions]):
    """``<root>/compactions/<id>.compactions`` with ``<root>/gc/compactions.boundary``."""

    def __init__(self, store: ObjectStore, root: str) -> None:
        self.paths = DbPaths.of(root)
        super().__init__(
            store,
            self.paths.compactions_dir,
            COMPACTIONS_EXT,
            self.paths.compactions_boundary,
            decode_compactions,
            encode_compactions,
            kind="compactions file",
            root=self.paths.root,
        )
