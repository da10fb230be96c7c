"""Object paths on the local file system: the file that is in the way of a path.

An object store has no folders, so ``a/b`` can be an object while ``a/b/c`` is another. On a
local disk, ``a/b`` is then a regular file and ``a/b/c`` can neither exist nor be created
(``ENOTDIR``). :func:`file_in_the_way` finds that file, so that errors can name it.
"""

from __future__ import annotations

import os


def file_in_the_way(base: str, path: str) -> str | None:
    """The shortest prefix of ``path`` (``a``, ``a/b``, ..., ``path`` itself; relative to the
    directory ``base``) that exists but is not a directory, or None when there is none.
    """
    parts = [p for p in path.split("/") if p]
    for i in range(1, len(parts) + 1):
        prefix = "/".join(parts[:i])
        full = os.path.join(base, prefix)
        if os.path.exists(full) and not os.path.isdir(full):
            return prefix
    return None
