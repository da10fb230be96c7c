"""Database roots: a path is one only when ``manifest/`` and the rest can be below it.

On a local disk a path that is a file (or lies below one) cannot be a database root: the
object store says so with :class:`~slatelib.errors.PathIsFileError`, naming the file, and
the stores of a database turn that into :class:`~slatelib.errors.NotADatabaseRootError`
(exit code 5, the same answer as for a directory without a manifest), for opening and
creating alike. A file further down (``<root>/manifest`` itself) is left as it is: that is
a damaged database, not a wrong path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from slatelib.errors import NotADatabaseRootError, PathIsFileError


def refuse_file_root(root: str, err: PathIsFileError) -> None:
    """Raise :class:`NotADatabaseRootError` (from ``err``) when the file ``err`` names is
    ``root`` or a folder above it; return otherwise."""
    file = err.file
    if file is not None and (file == root or root.startswith(file + "/")):
        raise NotADatabaseRootError(root, file=file) from err


@contextmanager
def database_root(root: str) -> Iterator[None]:
    """Reads and writes below ``root``: a :class:`PathIsFileError` about ``root`` or a folder
    above it becomes :class:`NotADatabaseRootError`.

    Raises:
        NotADatabaseRootError: ``root`` is a file, or lies below one.
    """
    try:
        yield
    except PathIsFileError as err:
        refuse_file_root(root, err)
        raise
