"""Pure layout of a database's objects under its root path (format §2).

Object-store paths have no leading ``/`` and use ``/`` between segments. Every path that
slatelib builds or accepts goes through :func:`normalize_path`, which rejects ``..``, ``.``,
empty segments, backslashes and control characters, so nothing can escape the store root.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slatelib.errors import InvalidArgumentError
from slatelib.ids import Ulid, format_id, parse_id, try_parse_ulid, ulid_to_str

MANIFEST_DIR = "manifest"
WAL_DIR = "wal"
COMPACTED_DIR = "compacted"
COMPACTIONS_DIR = "compactions"
GC_DIR = "gc"
SLATELIB_DIR = "slatelib"
"""slatelib's own objects inside a database root (0.17 never lists it)."""
CLAIMS_DIR = "slatelib/claims"
"""Compactor claim records (:mod:`slatelib.core.compactor_claim`)."""
RESCALE_DIR = "slatelib/rescale"
"""Rescale job records (:mod:`slatelib.core.rescale_plan`)."""
MANIFEST_EXT = "manifest"
COMPACTIONS_EXT = "compactions"
SST_EXT = "sst"
MANIFEST_BOUNDARY = "manifest.boundary"
COMPACTIONS_BOUNDARY = "compactions.boundary"
LOCK_SUFFIX = ".lock"
"""Sidecar lock file of a conditionally overwritten local file (``gc/manifest.boundary.lock``;
docs/rfcs/0006-local-conditional-put.md)."""


FORBIDDEN_PATH_CHARS = frozenset('\\{^}%`]">[~<#|*?:')
"""ASCII characters that Rust ``object_store`` percent-encodes in a path segment (so a listing
would spell the path differently from what was written; 0.17 itself then splits a database
between two prefixes), plus ``:`` and ``|``, which the local file system store cannot hold."""

MAX_PATH_BYTES = 1024
MAX_SEGMENT_BYTES = 255


def normalize_path(path: str, *, what: str = "path", allow_empty: bool = True) -> str:
    """Validate an object-store path and return it without surrounding slashes.

    Raises:
        InvalidArgumentError: the path has ``..``/``.``/empty segments, a character outside
            printable ASCII or one of :data:`FORBIDDEN_PATH_CHARS` (backslash included),
            is too long, or is empty when ``allow_empty`` is false.
    """
    if not isinstance(path, str):
        raise InvalidArgumentError(f"{what} must be a string, got {type(path).__name__}")
    stripped = path.strip("/")
    if not stripped:
        if allow_empty:
            return ""
        raise InvalidArgumentError(f"{what} is empty")
    for ch in stripped:
        if ch == "\\":
            raise InvalidArgumentError(f"{what} {path!r} contains a backslash")
        if ord(ch) < 0x20 or ch == "\x7f":
            raise InvalidArgumentError(f"{what} {path!r} contains a control character")
        if not (" " <= ch <= "~") or ch in FORBIDDEN_PATH_CHARS:
            raise InvalidArgumentError(
                f"{what} {path!r} contains {ch!r}: object paths must be printable ASCII "
                'without any of \\ { ^ } % ` ] " > [ ~ < # | * ? : (object_store would '
                "percent-encode it, or the local file system cannot store it)"
            )
    if len(stripped.encode()) > MAX_PATH_BYTES:
        raise InvalidArgumentError(f"{what} is longer than {MAX_PATH_BYTES} bytes: {path!r}")
    for seg in stripped.split("/"):
        if seg == "":
            raise InvalidArgumentError(f"{what} {path!r} has an empty segment ('//')")
        if seg in (".", ".."):
            raise InvalidArgumentError(f"{what} {path!r} has a '{seg}' segment")
        if len(seg.encode()) > MAX_SEGMENT_BYTES:
            raise InvalidArgumentError(
                f"{what} {path!r} has a segment longer than {MAX_SEGMENT_BYTES} bytes"
            )
    return stripped


def join(*parts: str) -> str:
    """Join normalized path parts with '/', skipping empty ones."""
    return "/".join(p for p in parts if p)


def is_under(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` itself or lies below it (segment-wise, so that
    ``db-clone/x`` is not under ``db``)."""
    if not root:
        return True
    return path == root or path.startswith(root + "/")


def ulid_names(head: str, tail: str, ids: Sequence[int]) -> list[str]:
    """``head + ulid_to_str(id) + tail`` of every id, in order: the object names of many
    SSTs at once (``head, tail = DbPaths.compacted_parts``). A database of 100k SSTs has
    100k names, so :func:`slatelib.format.seam.ulid_names` returns the same list formatted
    natively when the manifest extension is built; this is its reference.

    Raises:
        InvalidArgumentError: an id is not a 128-bit ULID.
    """
    return [head + ulid_to_str(v) + tail for v in ids]


@dataclass(frozen=True, slots=True)
class DbPaths:
    """Object names of one database, rooted at ``root`` inside its store."""

    root: str

    @staticmethod
    def of(root: str) -> DbPaths:
        return DbPaths(normalize_path(root, what="database path"))

    def _dir(self, name: str) -> str:
        return join(self.root, name)

    @property
    def manifest_dir(self) -> str:
        return self._dir(MANIFEST_DIR)

    @property
    def wal_dir(self) -> str:
        return self._dir(WAL_DIR)

    @property
    def compacted_dir(self) -> str:
        return self._dir(COMPACTED_DIR)

    @property
    def compactions_dir(self) -> str:
        return self._dir(COMPACTIONS_DIR)

    @property
    def gc_dir(self) -> str:
        return self._dir(GC_DIR)

    @property
    def claims_dir(self) -> str:
        return self._dir(CLAIMS_DIR)

    @property
    def rescale_dir(self) -> str:
        return self._dir(RESCALE_DIR)

    def claim(self, epoch: int, run_id: str) -> str:
        return f"{self.claims_dir}/{format_id(epoch)}.{run_id}.json"

    def manifest(self, manifest_id: int) -> str:
        return f"{self.manifest_dir}/{format_id(manifest_id)}.{MANIFEST_EXT}"

    def compactions(self, compactions_id: int) -> str:
        return f"{self.compactions_dir}/{format_id(compactions_id)}.{COMPACTIONS_EXT}"

    def wal(self, wal_id: int) -> str:
        return f"{self.wal_dir}/{format_id(wal_id)}.{SST_EXT}"

    def compacted(self, sst_id: int) -> str:
        # compacted_dir inlined: a manifest walk names every SST.
        prefix = f"{self.root}/{COMPACTED_DIR}" if self.root else COMPACTED_DIR
        return f"{prefix}/{ulid_to_str(sst_id)}.{SST_EXT}"

    @property
    def compacted_parts(self) -> tuple[str, str]:
        """``(head, tail)`` with ``compacted(id) == head + ulid_to_str(id) + tail``, for
        :func:`ulid_names`."""
        prefix = f"{self.root}/{COMPACTED_DIR}" if self.root else COMPACTED_DIR
        return f"{prefix}/", f".{SST_EXT}"

    @property
    def manifest_boundary(self) -> str:
        return f"{self.gc_dir}/{MANIFEST_BOUNDARY}"

    @property
    def compactions_boundary(self) -> str:
        return f"{self.gc_dir}/{COMPACTIONS_BOUNDARY}"


def file_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def parse_versioned_name(name: str, ext: str) -> int | None:
    """Id of ``<20 digits>.<ext>``; None for anything else (0.17 ignores such files)."""
    stem, dot, rest = name.partition(".")
    if not dot or rest != ext:
        return None
    return parse_id(stem)


def parse_wal_name(name: str) -> int | None:
    """WAL id of ``<digits>.sst`` (0.17 parses the text before the first '.')."""
    stem, dot, rest = name.partition(".")
    if not dot or rest != SST_EXT:
        return None
    return parse_id(stem)


def parse_compacted_name(name: str) -> Ulid | None:
    """SST id of ``<ULID>.sst``; None for anything else."""
    stem, dot, rest = name.partition(".")
    if not dot or rest != SST_EXT:
        return None
    return try_parse_ulid(stem)
