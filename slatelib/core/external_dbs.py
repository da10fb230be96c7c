"""Which ``external_dbs`` paths slatelib follows. Pure.

Design doc 'checkpoints and clones', "SST Path Resolution", and format §2.

A clone's manifest names the databases it was cloned from by their paths in the same store.
Every operation that follows such a path checks it here first: GC (releasing and detaching
parents), destroy (releasing final checkpoints), clone (inheriting a parent's external
databases), compaction and reads (resolving SSTs). Refused, as a :class:`CorruptObjectError`
naming the database, the manifest, the entry and the path:

- malformed paths: absolute (a leading ``/``), URLs, ``.``/``..`` or empty segments,
  characters object_store would percent-encode, anything :func:`normalize_path` refuses;
- non-canonical paths (a trailing ``/``): SlateDB writes the path as object_store spells it,
  so any other spelling was not written by SlateDB, and following it would address
  different objects than the ones the manifest pins;
- when the database's root is known: the database itself, or a path inside it. GC and
  destroy list and delete this database's directories, so an external database at or
  below its root would have its objects (or its pinned SSTs) mistaken for this database's.

A database that lies inside its external database (a clone at ``parent/clone`` of
``parent``) is legal: databases may be nested, and GC and destroy of the outer one leave
objects outside its own directories alone.
"""

from __future__ import annotations

from slatelib.core.manifest import ExternalDb, Manifest
from slatelib.errors import CorruptObjectError, InvalidArgumentError
from slatelib.ids import Ulid
from slatelib.paths import is_under, normalize_path


def _shape_problem(path: str, what: str) -> str | None:
    """What is wrong with ``path`` on its own (None: a canonical relative store path)."""
    if not isinstance(path, str):
        return f"{what} is a {type(path).__name__}, not a string"
    if not path:
        return f"{what} '' is empty"
    if path.startswith("/"):
        return (f"{what} {path!r} is absolute (starts with '/'): external database paths are "
                "relative to the store root")
    if "://" in path:
        return (f"{what} {path!r} is a URL: external database paths name a database in the "
                "same store, relative to its root")
    try:
        normalized = normalize_path(path, what=what, allow_empty=False)
    except InvalidArgumentError as exc:
        return str(exc)
    if normalized != path:
        return (f"{what} {path!r} is not canonical (SlateDB would have written "
                f"{normalized!r})")
    return None


def _where(root: str | None, manifest_id: int | None) -> str:
    db = "a database" if root is None else (
        f"database {root!r}" if root else "the database at the store root")
    return db if manifest_id is None else f"{db}, manifest {manifest_id}"


def check_external_db(
    root: str | None,
    index: int,
    entry: ExternalDb,
    *,
    manifest_id: int | None = None,
    shape_only: bool = False,
) -> str:
    """Entry ``index`` of the ``external_dbs`` of the database at ``root`` (None: unknown),
    returned as the path to follow. With ``root`` None or ``shape_only`` (reads, which only
    resolve SSTs through it) the path is not compared with the database's root.

    Raises:
        CorruptObjectError: the path is malformed, not canonical, or (unless shape only)
            this database itself or inside it.
    """
    what = f"external_dbs[{index}] path"
    problem = _shape_problem(entry.path, what)
    if problem is None and root is not None and not shape_only:
        own = normalize_path(root, what="database path")
        if entry.path == own:
            problem = f"{what} {entry.path!r} is this database itself"
        elif is_under(entry.path, own):
            problem = (f"{what} {entry.path!r} lies inside this database: its objects would "
                       "be mistaken for this database's own")
    if problem is not None:
        raise CorruptObjectError(
            f"{_where(root, manifest_id)}: {problem}; refusing to follow it"
        )
    return entry.path


def external_roots(
    root: str | None,
    manifest: Manifest,
    *,
    manifest_id: int | None = None,
    shape_only: bool = False,
) -> dict[Ulid, str]:
    """SST id -> root path of the external database holding it, every entry of
    ``manifest.external_dbs`` of the database at ``root`` checked (see the module docstring
    and :func:`check_external_db`).

    Raises:
        CorruptObjectError: naming the database, the manifest, the entry and its path.
    """
    out: dict[Ulid, str] = {}
    for i, entry in enumerate(manifest.external_dbs):
        path = check_external_db(root, i, entry, manifest_id=manifest_id, shape_only=shape_only)
        for sid in entry.sst_ids:
            out[sid] = path
    return out


def check_external_dbs(root: str, manifest: Manifest, *, manifest_id: int | None = None) -> None:
    """Check every ``external_dbs`` entry of the manifest of the database at ``root``.

    Raises:
        CorruptObjectError: see :func:`check_external_db`.
    """
    for i, entry in enumerate(manifest.external_dbs):
        check_external_db(root, i, entry, manifest_id=manifest_id)
