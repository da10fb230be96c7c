"""Find every database under a prefix of a store: a database is a root with manifests."""

from __future__ import annotations

from slatelib.errors import InvalidArgumentError, PathIsFileError
from slatelib.objstore import ObjectStore
from slatelib.paths import MANIFEST_DIR, MANIFEST_EXT, normalize_path, parse_versioned_name


def discover_databases(store: ObjectStore, prefix: str) -> list[str]:
    """Root paths of the databases at or below ``prefix`` (sorted).

    A root is any path ``R`` holding an object ``R/manifest/<20-digit id>.manifest``.

    Raises:
        InvalidArgumentError: a malformed prefix, or one that lies below a file (a prefix
            that is a file itself holds no database: the answer is ``[]``).
    """
    base = normalize_path(prefix, what="discover prefix")
    roots: set[str] = set()
    try:
        for meta in store.list(base):
            head, _, name = meta.path.rpartition("/")
            parent, _, directory = head.rpartition("/")
            if directory == MANIFEST_DIR and parse_versioned_name(name, MANIFEST_EXT) is not None:
                roots.add(parent if head != MANIFEST_DIR else "")
    except PathIsFileError as exc:
        file = "a file" if exc.file is None else f"{exc.file!r}, a file"
        raise InvalidArgumentError(f"discover prefix {base!r} lies below {file}, not a "
                                   "directory") from exc
    return sorted(roots)
