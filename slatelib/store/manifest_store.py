"""Manifest versions of one database (format §3 and §5) over a :class:`SequencedStore`."""

from __future__ import annotations

from slatelib.core.invariants import check_manifest_successor
from slatelib.core.manifest import Manifest
from slatelib.errors import ManifestMissingError, NotADatabaseRootError
from slatelib.format.manifest_codec import decode_manifest, encode_manifest
from slatelib.objstore import ObjectStore
from slatelib.paths import MANIFEST_EXT, DbPaths
from slatelib.store.sequenced import SequencedStore, Versioned

StoredManifest = Versioned[Manifest]


class ManifestStore(SequencedStore[Manifest]):
    """``<root>/manifest/<id>.manifest`` with ``<root>/gc/manifest.boundary``."""

    def __init__(self, store: ObjectStore, root: str) -> None:
        self.paths = DbPaths.of(root)
        super().__init__(
            store,
            self.paths.manifest_dir,
            MANIFEST_EXT,
            self.paths.manifest_boundary,
            decode_manifest,
            encode_manifest,
            missing_error=ManifestMissingError,
            kind="manifest",
            root=self.paths.root,
        )

    def check_successor(self, old: Manifest, new: Manifest) -> None:
        """:func:`slatelib.core.invariants.check_manifest_successor`."""
        check_manifest_successor(old, new)

    @property
    def root(self) -> str:
        return self.paths.root

    def read_latest(self) -> StoredManifest:
        """The latest manifest.

        Raises:
            NotADatabaseRootError: there is no manifest (an empty or missing directory), or
                the root is a file or lies below one.
            CorruptObjectError / UnsupportedFormatVersionError: the latest does not decode.
        """
        got = self.try_read_latest()
        if got is None:
            raise NotADatabaseRootError(self.root)
        return got
