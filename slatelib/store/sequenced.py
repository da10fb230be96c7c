"""Sequenced objects (format §3): manifests and compactions files share one protocol.

Versions are ``<dir>/<20-digit id>.<ext>``; a new version is ``latest + 1`` written with
create-if-absent. A GC boundary file (``gc/<name>.boundary``) holds an id at or below
which versions may have been deleted: such a version is never taken as the latest, and a
write that lands at or below it counts as lost (SlateDB RFC-0026 in 0.17; a stalled writer must not
resurrect an id that GC deleted).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from slatelib.errors import (
    AlreadyExistsError,
    ConflictError,
    CorruptObjectError,
    ObjectMissingError,
    PathIsFileError,
)
from slatelib.ids import format_id
from slatelib.objstore import ObjectStore
from slatelib.paths import file_name, parse_versioned_name
from slatelib.store.db_root import database_root, refuse_file_root

log = logging.getLogger(__name__)

T = TypeVar("T")
LIST_RETRIES = 5


@dataclass(frozen=True)
class Versioned(Generic[T]):
    """A decoded version together with its id (the file name)."""

    id: int
    value: T


class SequencedStore(Generic[T]):
    """List, read and create-if-absent versions of one sequenced object kind.

    With ``root`` (the database root the directory belongs to), a root that is a file, or
    lies below one, raises :class:`~slatelib.errors.NotADatabaseRootError`
    (:mod:`slatelib.store.db_root`).
    """

    def __init__(
        self,
        store: ObjectStore,
        directory: str,
        ext: str,
        boundary_path: str,
        decode: Callable[..., T],
        encode: Callable[[T], bytes],
        *,
        missing_error: type[ObjectMissingError] = ObjectMissingError,
        kind: str = "object",
        root: str | None = None,
    ) -> None:
        self.store = store
        self.directory = directory
        self.ext = ext
        self.boundary_path = boundary_path
        self._decode = decode
        self._encode = encode
        self._missing = missing_error
        self._kind = kind
        self._root = root

    def _at_root(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext() if self._root is None else database_root(self._root)

    def check_successor(self, old: T, new: T) -> None:
        """The invariants a new version must keep over the one it replaces (checked by
        :func:`slatelib.txn.update_versioned` before every write). None by default.

        Raises:
            InternalError: ``new`` breaks an invariant.
        """

    def path(self, version_id: int) -> str:
        return f"{self.directory}/{format_id(version_id)}.{self.ext}"

    def list_ids(self) -> list[int]:
        """Every parsable version id, ascending (other names are ignored, as 0.17 does).

        Raises:
            NotADatabaseRootError: the database root is a file, or lies below one.
        """
        ids: list[int] = []
        with self._at_root():
            for meta in self.store.list(self.directory):
                vid = parse_versioned_name(file_name(meta.path), self.ext)
                if vid is None:
                    log.warning("ignoring unexpected object [path=%s]", meta.path)
                    continue
                ids.append(vid)
        ids.sort()
        return ids

    def read_boundary(self) -> int:
        """The GC boundary id, 0 when there is no boundary file.

        Raises:
            CorruptObjectError: the boundary file does not hold a decimal id.
        """
        try:
            raw = self.store.get(self.boundary_path)
        except ObjectMissingError:
            return 0
        text = raw.decode("ascii", errors="replace").strip()
        if not text.isdigit():
            raise CorruptObjectError(f"boundary file holds {text!r}", path=self.boundary_path)
        return int(text)

    def try_read(self, version_id: int) -> Versioned[T] | None:
        """Decode one version, or None when it does not exist.

        Raises:
            CorruptObjectError / UnsupportedFormatVersionError: undecodable bytes.
            NotADatabaseRootError: the database root is a file, or lies below one.
        """
        path = self.path(version_id)
        try:
            data = self.store.get(path)
        except PathIsFileError as err:
            if self._root is not None:
                refuse_file_root(self._root, err)
            return None
        except ObjectMissingError:
            return None
        return Versioned(version_id, self._decode(data, path=path))

    def read(self, version_id: int) -> Versioned[T]:
        got = self.try_read(version_id)
        if got is None:
            raise self._missing(
                f"{self._kind} {version_id} not found ({self.path(version_id)})",
                path=self.path(version_id),
            )
        return got

    def try_read_latest(self, known: Versioned[T] | None = None) -> Versioned[T] | None:
        """The newest version above the GC boundary, or None when there is none at all.

        A version that fails to decode raises: a reader never falls back to an older one.

        ``known``, a version this store returned before, makes a poll cheap: the listing
        starts at its id (one LIST page however many older versions are stored), and while
        it is still the newest it is returned as it is, with no GET (versions are immutable,
        and GC never moves its boundary up to the latest version). A newer one is read as
        usual; when ``known`` is gone and nothing is newer, everything is listed again.

        Raises:
            CorruptObjectError / UnsupportedFormatVersionError: the latest does not decode.
            ObjectMissingError: versions exist but all are at or below the boundary.
        """
        if known is not None:
            got = self._try_read_from(known)
            if got is not None:
                return got
        for _ in range(LIST_RETRIES):
            ids = self.list_ids()
            if not ids:
                return None
            boundary = self.read_boundary()
            live = [i for i in ids if i > boundary]
            if not live:
                log.warning("all %s versions are at or below the GC boundary %d; relisting",
                            self._kind, boundary)
                continue
            got = self.try_read(live[-1])
            if got is not None:
                return got
        raise self._missing(
            f"no {self._kind} above the GC boundary after {LIST_RETRIES} listings",
            path=self.directory,
        )

    def _try_read_from(self, known: Versioned[T]) -> Versioned[T] | None:
        """:meth:`try_read_latest` from ``known`` on; None: list everything instead."""
        start = self.path(known.id - 1) if known.id > 0 else None
        ids: list[int] = []
        with self._at_root():
            for meta in self.store.list(self.directory, start_after=start):
                vid = parse_versioned_name(file_name(meta.path), self.ext)
                if vid is not None and vid >= known.id:
                    ids.append(vid)
        if not ids:
            return None
        newest = max(ids)
        if newest == known.id:
            return known
        live = [i for i in sorted(ids) if i > self.read_boundary()]
        return self.try_read(live[-1]) if live else None

    def read_latest(self) -> Versioned[T]:
        got = self.try_read_latest()
        if got is None:
            raise self._missing(
                f"no {self._kind} found under {self.directory!r} (is this a database path?)",
                path=self.directory,
            )
        return got

    def write(self, version_id: int, value: T) -> Versioned[T]:
        """Create version ``version_id`` if absent.

        Raises:
            ConflictError: the version exists already, or GC's boundary has passed it
                (the write is void; reload and retry).
            NotADatabaseRootError: the database root is a file, or lies below one.
        """
        data = self._encode(value)
        path = self.path(version_id)
        try:
            with self._at_root():
                self.store.put_if_absent(path, data)
        except AlreadyExistsError as exc:
            raise ConflictError(f"{self._kind} {version_id} already exists ({path})") from exc
        boundary = self.read_boundary()
        if version_id <= boundary:
            raise ConflictError(
                f"{self._kind} {version_id} was written at or below the GC boundary {boundary}"
            )
        return Versioned(version_id, value)
