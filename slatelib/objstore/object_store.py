"""The object-store interface that every storage backend of slatelib implements.

Everything above ``slatelib/objstore`` talks to storage only through :class:`ObjectStore`
and only ever sees ``slatelib.errors`` exceptions.

Object paths
    A path names one object relative to the store root: ``/``-separated segments, no
    leading or trailing ``/``, no empty, ``.`` or ``..`` segments (see
    :func:`slatelib.paths.normalize_path`). On top of that, :func:`check_path` accepts only
    printable ASCII without any of ``\\ { ^ } % ` ] " > [ ~ < # | * ? :``. All but the
    colon are the characters that Rust ``object_store``'s ``Path::from`` percent-encodes
    (as it does every non-ASCII character), and the official SlateDB 0.17 builds its object
    names with ``Path::from``: for a database path such as ``"t~x/db"`` it writes its
    manifests under ``t%7Ex/db`` and its SSTs under ``t%257Ex/db`` (encoded twice).
    Rejecting them keeps a path written by slatelib identical to the one SlateDB uses and
    keeps the local-file-system backend away from its reserved ``name#<digits>`` staging
    files. The colon (and ``|``) is rejected because obstore's local-file-system store
    cannot write an object whose last segment ends in a letter and ``:`` (``"db/A:"``: it
    is read as a Windows drive letter). With these rules the spelling that
    :meth:`ObjectStore.list` returns is exactly the spelling that was written, on memory,
    local and S3 stores (fuzzed in the tests). Paths are also limited to 1024 UTF-8 bytes
    (the S3 key limit) and segments to 255 bytes (the usual file-name limit).

Prefixes
    :meth:`ObjectStore.list` treats its prefix as a directory: ``list("db")`` returns
    ``db/x`` and ``db/sub/y`` but never ``db-clone/x`` nor an object named exactly ``db``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

from slatelib.errors import InvalidArgumentError
from slatelib.paths import normalize_path

if TYPE_CHECKING:
    from slatelib.objstore.spec import StoreSpec

OpName = Literal[
    "get",
    "get_with_meta",
    "get_range",
    "get_ranges",
    "head",
    "put",
    "put_if_absent",
    "put_if_match",
    "list",
    "delete",
    "delete_many",
]
"""Name of one :class:`ObjectStore` operation (used by retry and fault-injection wrappers)."""

OPS: tuple[OpName, ...] = (
    "get",
    "get_with_meta",
    "get_range",
    "get_ranges",
    "head",
    "put",
    "put_if_absent",
    "put_if_match",
    "list",
    "delete",
    "delete_many",
)

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""What the put methods accept (stored as an immutable copy)."""

@dataclass(frozen=True, slots=True)
class ObjectMeta:
    """Metadata of one stored object.

    ``path`` is relative to the store root, ``last_modified_ms`` is Unix time in
    milliseconds, ``e_tag`` and ``version`` are opaque backend tokens (None when the
    backend has none).
    """

    path: str
    size: int
    last_modified_ms: int
    e_tag: str | None
    version: str | None


def check_path(path: str, *, what: str = "path") -> str:
    """Validate the path of one object and return it unchanged.

    Raises:
        InvalidArgumentError: the path is not a string, is empty, starts or ends with
            ``/``, has ``//``, ``.`` or ``..`` segments, a backslash, a control character,
            a character outside printable ASCII or one of :data:`FORBIDDEN_PATH_CHARS`,
            or is too long.
    """
    norm = normalize_path(path, what=what, allow_empty=False)
    if norm != path:
        raise InvalidArgumentError(f"{what} {path!r} must not start or end with '/'")
    return norm


def check_prefix(prefix: str, *, what: str = "prefix") -> str:
    """Validate a listing prefix (a directory) and return it without surrounding slashes.

    ``""`` (or ``"/"``) is the whole store; ``"a/b"`` and ``"a/b/"`` are the same directory.

    Raises:
        InvalidArgumentError: the prefix breaks the rules of :func:`check_path` (except
            that it may be empty and may start or end with ``/``).
    """
    return normalize_path(prefix, what=what, allow_empty=True)


def check_data(data: BytesLike, what: str = "data") -> bytes:
    """``data`` as immutable bytes.

    Raises:
        InvalidArgumentError: ``data`` is not bytes, bytearray or memoryview.
    """
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise InvalidArgumentError(f"{what} must be bytes, got {type(data).__name__}")


class ObjectStore(Protocol):
    """A flat namespace of immutable-or-overwritten byte objects.

    All paths go through :func:`check_path` (prefixes through :func:`check_prefix`) before
    any I/O, so an invalid path raises ``InvalidArgumentError`` and never reaches storage.
    Every method may also raise ``UnavailableError`` (transient: back off and retry) and
    ``StorageError`` (permission, missing bucket, unsupported operation).
    """

    @property
    def spec(self) -> StoreSpec:
        """Picklable description from which an executor can reopen this store."""
        ...

    @property
    def url(self) -> str:
        """URL of the store root, for messages (never contains credentials)."""
        ...

    def get(self, path: str) -> bytes:
        """Whole object.

        Raises:
            ObjectMissingError: no object at ``path`` (``.path`` is set).
        """
        ...

    def get_with_meta(self, path: str) -> tuple[bytes, ObjectMeta]:
        """Whole object and the metadata of exactly that version (read atomically), e.g.
        to pass its ``e_tag`` to :meth:`put_if_match`.

        Raises:
            ObjectMissingError: no object at ``path``.
        """
        ...

    def get_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object.

        A range reaching past the end of the object returns only the bytes that exist (an
        empty result when ``start >= size``); callers that expect a full range compare the
        length and raise ``CorruptObjectError`` themselves. ``start == end`` returns
        ``b""`` (after checking that the object exists).

        Raises:
            ObjectMissingError: no object at ``path``.
            InvalidArgumentError: ``start < 0`` or ``end < start``.
        """
        ...

    def get_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Several ``[start, end)`` ranges of one object, one result per range, in order.

        Nearby ranges are coalesced into fewer requests, which run concurrently. Short
        reads past the end of the object behave as in :meth:`get_range`.

        Raises:
            ObjectMissingError: no object at ``path``.
            InvalidArgumentError: a range has ``start < 0`` or ``end < start``.
        """
        ...

    def head(self, path: str) -> ObjectMeta:
        """Metadata of the object.

        Raises:
            ObjectMissingError: no object at ``path``.
        """
        ...

    def put(self, path: str, data: BytesLike) -> None:
        """Write the object atomically, overwriting any existing one.

        On the local file system an object cannot have the path of a directory that holds
        other objects (``db`` next to ``db/x``): such a put raises ``StorageError``
        (``AlreadyExistsError`` for ``put_if_absent``).

        Raises:
            StorageError: e.g. the bucket does not exist or access is denied.
        """
        ...

    def put_if_absent(self, path: str, data: BytesLike) -> None:
        """Create the object only if no object exists at ``path`` (atomic; the CAS
        primitive: of concurrent callers exactly one succeeds).

        A backend without native conditional writes may implement this with a two-phase
        write through a transactional store; the contract is only this method.

        Raises:
            AlreadyExistsError: an object already exists at ``path`` (``.path`` is set).
            UnavailableError: transient failure; the object may or may not have been
                written (see ``RetryingObjectStore`` for resolution).
        """
        ...

    def put_if_match(self, path: str, data: BytesLike, e_tag: str | None) -> str | None:
        """Overwrite the object only if its current ETag is ``e_tag`` (``None``: create it
        only if absent). Returns the new ETag (None if the backend reports none).

        Raises:
            ConflictError: the ETag does not match, or the object is missing while
                ``e_tag`` is given (``AlreadyExistsError`` when ``e_tag`` is None and an
                object exists).
            StorageError: the backend cannot do conditional overwrites. (The local file
                system can: slatelib does it with a sidecar ``<path>.lock`` file,
                docs/rfcs/0006-local-conditional-put.md.)
        """
        ...

    def list(
        self, prefix: str, *, start_after: str | None = None, end_before: str | None = None
    ) -> Iterator[ObjectMeta]:
        """Every object below the directory ``prefix`` with ``start_after < path <
        end_before`` (bounds are plain string comparisons, they need not exist), in
        ascending lexicographic order of ``path`` on every backend.

        The iterator is lazy; errors may surface while iterating. Objects written by other
        tools are returned as they are, even when their names break :func:`check_path`.

        Raises:
            InvalidArgumentError: invalid prefix or a bound that is not a string.
        """
        ...

    def delete(self, path: str) -> None:
        """Delete the object; a missing object is not an error."""
        ...

    def delete_many(self, paths: Iterable[str]) -> None:
        """Delete several objects (batched where the backend allows it); missing objects
        are not errors. All paths are validated before anything is deleted.

        Raises:
            InvalidArgumentError: one of the paths is invalid (nothing was deleted).
        """
        ...
