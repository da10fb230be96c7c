"""Find every database under a prefix of a store: a database is a root with manifests."""

from __future__ import annotations

from slatelib.objstore import ObjectStore
from slatelib.paths import MANIFEST_DIR, MANIFEST_EXT, normalize_path, parse_versioned_name


def discover_databases(store: ObjectStore, prefix: str) -> list[str]:
    """Root paths of the databases at or below ``prefix`` (sorted).

    A root is any path ``R`` holding an object ``R/manifest/<20-digit id>.manifest``.

    Raises:
        InvalidArgumentError: a malformed prefix.
    """
    base = normalize_path(prefix, what="discover prefix")
    roots: set[str] = set()
    for meta in store.list(base):
        head, _, name = meta.path.rpartition("/")
        parent, _, directory = head.rpartition("/")
        if directory == MANIFEST_DIR and parse_versioned_name(name, MANIFEST_EXT) is not None:
            roots.add(parent if head != MANIFEST_DIR else "")
    return sorted(roots)
