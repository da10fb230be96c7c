"""Store URLs: parsing and splitting, pure (no store is opened here; that is
:mod:`slatelib.objstore.registry`).

Supported URLs (the path part follows the object-path rules of
:func:`slatelib.objstore.object_store.check_path`; no query, fragment, user or port):
``file:///dir`` (``file:///`` is the file-system root), ``memory:///`` and
``memory://name/``, ``s3://bucket[/prefix]``, ``gs://bucket[/prefix]`` and
``az://container[/prefix]``. :func:`split_db_url` splits a database URL into the URL of its
store root and the database path in it; :func:`split_store_url` and :func:`join_store_url`
do the same for any URL, the path possibly empty. A malformed URL is refused with an
``InvalidArgumentError`` that says how to fix it (a missing scheme, a misspelled one, a
host on a ``file://`` URL, an empty path segment).
"""

from __future__ import annotations

import difflib
import re

from slatelib.errors import InvalidArgumentError
from slatelib.objstore.object_store import check_prefix

SCHEMES = ("file", "memory", "s3", "gs", "az")
"""The schemes of store URLs (each has its backend in
:data:`slatelib.objstore.registry.BACKENDS`)."""

_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MEMORY_NAME = re.compile(r"[A-Za-z0-9._-]*")


def parse_store_url(url: str, what: str) -> tuple[str, str, str]:
    """``(scheme, host, path)`` of a store URL (``what`` names it in errors).

    Raises:
        InvalidArgumentError: unknown scheme, malformed URL or invalid path.
    """
    if not isinstance(url, str):
        raise InvalidArgumentError(f"{what} must be a string, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise InvalidArgumentError(
            f"{what} {url!r}: unknown or missing scheme (expected one of "
            f"{', '.join(s + '://' for s in SCHEMES)}){_scheme_hint(url, scheme, bool(sep))}"
        )
    if "?" in rest or "#" in rest:
        raise InvalidArgumentError(f"{what} {url!r} must not have a query or fragment")
    host, _, path = rest.partition("/")
    if path.startswith("/"):
        # "s3://bucket//db" names the key "/db", not "db": refuse rather than guess.
        raise InvalidArgumentError(f"{what} {url!r}: the path starts with an empty segment")
    if scheme == "file" and host:
        raise InvalidArgumentError(f"{what} {url!r}: file URLs take no host (use file:///dir)")
    if scheme == "memory" and not _MEMORY_NAME.fullmatch(host):
        raise InvalidArgumentError(f"{what} {url!r}: bad memory store name {host!r}")
    if scheme in ("s3", "gs", "az") and not _HOST.fullmatch(host):
        kind = "container" if scheme == "az" else "bucket"
        problem = "missing" if not host else f"invalid {kind} name {host!r}:"
        raise InvalidArgumentError(
            f"{what} {url!r}: {problem} {kind} (write {scheme}://{kind.upper()}[/path])"
            if not host else f"{what} {url!r}: {problem} letters, digits, '.', '_' and '-' only"
        )
    return scheme, host, check_prefix(path, what=f"path of {what} {url!r}")


def _scheme_hint(url: str, scheme: str, has_sep: bool) -> str:
    if not has_sep:
        if url.startswith("/"):
            return f"; a local path is written file://{url}"
        return ""
    close = difflib.get_close_matches(scheme.lower(), SCHEMES, n=1, cutoff=0.5)
    if close:
        return f"; did you mean {close[0]}://?"
    return ""


def root_url(scheme: str, host: str) -> str:
    """The URL of a scheme's root: ``file:///``, ``memory:///``, ``memory://name``,
    ``s3://bucket``."""
    if scheme == "file" or (scheme == "memory" and not host):
        return f"{scheme}:///"
    return f"{scheme}://{host}"


def join_url(root: str, path: str) -> str:
    """``root`` (a root URL) and ``path`` below it, as one URL."""
    if not path:
        return root
    return root + path if root.endswith("/") else f"{root}/{path}"


def split_store_url(url: str, *, what: str = "url") -> tuple[str, str]:
    """Split a URL into the URL of the scheme's root (the bucket, ``file:///``) and the
    normalized path below it, which may be empty: ``"file:///data"`` gives
    ``("file:///", "data")``.

    Raises:
        InvalidArgumentError: unknown scheme, malformed URL or invalid path.
    """
    scheme, host, path = parse_store_url(url, what)
    return root_url(scheme, host), path


def join_store_url(root: str, path: str) -> str:
    """The URL of ``path`` below the root URL ``root`` (inverse of :func:`split_store_url`)."""
    return join_url(root, path)


def split_db_url(url: str) -> tuple[str, str]:
    """Split a database URL into the URL of its store root and the database path in it.

    ``"file:///a/b/db"`` gives ``("file:///", "a/b/db")``, ``"s3://bucket/a/db"`` gives
    ``("s3://bucket", "a/db")``, ``"memory:///x/db"`` gives ``("memory:///", "x/db")`` and
    ``"memory://name/x"`` gives ``("memory://name", "x")``.

    Raises:
        InvalidArgumentError: unknown scheme, malformed URL, invalid or empty path.
    """
    scheme, host, path = parse_store_url(url, "database url")
    if not path:
        raise InvalidArgumentError(f"database url {url!r} has no database path")
    return root_url(scheme, host), path


__all__ = ["SCHEMES", "join_store_url", "join_url", "parse_store_url", "root_url",
           "split_db_url", "split_store_url"]
