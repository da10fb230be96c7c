"""Conditional overwrite (``put_if_match``) for objects on the local file system.

obstore's ``LocalStore`` refuses ``PutMode.Update`` (as Rust ``object_store``'s
``LocalFileSystem`` does: "not implemented"), so 0.17's GC can never advance an existing
boundary file on a local disk. slatelib implements it here (docs/rfcs/0006-local-conditional-put.md):

1. take an exclusive ``flock`` on a sidecar lock file ``<name>.lock`` next to the object
   (created once, never renamed; GC deletes it only when it destroys the whole database;
   re-opened if it was removed or replaced while we waited, so two holders can never hold
   two different lock files);
2. compare the object's current ETag with the expected one (a missing object conflicts);
3. write the payload to a staging file ``<name>#<digits>`` in the same directory (obstore's
   own staging-file spelling, which its listings skip), fsync it, rename it over the object
   (atomic), then fsync the directory.

Create-if-absent (``e_tag=None``) stays obstore's ``PutMode.Create`` (a hard link: atomic,
and it fails if anything exists), so it takes no lock and leaves no lock file: a boundary
file gets its lock file only when it is first overwritten.

The ETag is obstore's own for local files, so ``head``, ``get_with_meta``, ``list`` and
``put_if_match`` agree: ``"<inode>-<mtime µs>-<size>"`` in lower-case hex, quoted
(:func:`local_e_tag`). Each overwrite gets an mtime strictly above the version it replaces,
so along a chain of overwrites the ETag of a path never comes back (no ABA when the file
system reuses an inode number within one timestamp tick).

Only writers that go through this function are serialised by the lock; obstore's
unconditional ``put`` is not, and nothing in slatelib overwrites a file that it also
updates conditionally.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager

from slatelib.errors import ConflictError, StorageError
from slatelib.paths import LOCK_SUFFIX

_LOCK_ATTEMPTS = 100


def lock_path(path: str) -> str:
    """The sidecar lock file of the object at ``path`` (``<path>.lock``)."""
    return path + LOCK_SUFFIX


def local_e_tag(st: os.stat_result) -> str:
    """The ETag obstore (Rust ``object_store``'s ``LocalFileSystem``) reports for a file:
    inode, modification time in whole microseconds since the epoch (0 before it) and size,
    in lower-case hex, quoted."""
    mtime_us = max(0, st.st_mtime_ns // 1000)
    return f'"{st.st_ino:x}-{mtime_us:x}-{st.st_size:x}"'


@contextmanager
def _exclusive(lock_file: str) -> Iterator[None]:
    """Hold ``flock(LOCK_EX)`` on ``lock_file`` (created when missing). The lock is taken on
    the file the path names once the lock is held: if someone replaced or removed the file
    while we waited, we retry on the new one."""
    for _ in range(_LOCK_ATTEMPTS):
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(lock_file)
            except FileNotFoundError:
                current = None
            held = os.fstat(fd)
            if current is not None and (current.st_ino, current.st_dev) == (
                held.st_ino, held.st_dev
            ):
                try:
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                return
        finally:
            os.close(fd)
    raise StorageError(f"{lock_file}: the lock file keeps being replaced; gave up locking it")


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stage(target: str, data: bytes, previous: os.stat_result) -> str:
    """Write ``data`` to a fresh staging file next to ``target``; its mtime is made
    strictly newer than ``previous`` (the version it will replace)."""
    for _ in range(16):
        staging = f"{target}#{secrets.randbelow(10**12)}"
        try:
            fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            continue
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if st.st_mtime_ns // 1000 <= previous.st_mtime_ns // 1000:
            bumped = (max(0, previous.st_mtime_ns // 1000) + 1) * 1000
            os.utime(staging, ns=(st.st_atime_ns, bumped))
        return staging
    raise StorageError(f"{target}: could not create a staging file next to it")


def put_if_match_file(target: str, data: bytes, e_tag: str, *, path: str) -> str:
    """Overwrite the file ``target`` with ``data`` if its current ETag is ``e_tag``,
    atomically, under the sidecar lock. Returns the new ETag. ``path`` is the object's path
    in its store (for errors). (Create-if-absent needs no lock: obstore's ``PutMode.Create``
    is a hard link, atomic on its own.)

    Raises:
        ConflictError: the file's ETag differs from ``e_tag``, or it does not exist.
        StorageError: the file system refused (permissions, a directory in the way...).
        NotADirectoryError: a folder of ``target`` is a file.
    """
    directory = os.path.dirname(target)
    try:
        with _exclusive(lock_path(target)):
            try:
                current = os.stat(target)
            except FileNotFoundError:
                raise ConflictError(f"{path}: no object to overwrite (expected ETag "
                                    f"{e_tag})") from None
            if stat.S_ISDIR(current.st_mode):
                raise StorageError(f"{path}: conditional write failed: {target} is a directory "
                                   "(a directory is in the way)")
            if local_e_tag(current) != e_tag:
                raise ConflictError(f"{path}: ETag is {local_e_tag(current)}, not {e_tag} (it "
                                    "was overwritten meanwhile)")
            staging = _stage(target, data, current)
            try:
                os.replace(staging, target)
            finally:
                if os.path.lexists(staging):
                    os.unlink(staging)
            _fsync_dir(directory)
            return local_e_tag(os.stat(target))
    except (ConflictError, StorageError, NotADirectoryError):
        raise  # NotADirectoryError: a folder of the path is a file; the caller names it
    except OSError as exc:
        raise StorageError(f"{path}: conditional write failed: {exc}") from exc
