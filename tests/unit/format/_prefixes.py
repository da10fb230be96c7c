"""Prefix extractors as applications give them (``package.module:attr``), for the tests of
prefix bloom filters."""

from __future__ import annotations


def upto_colon(key: bytes) -> int | None:
    """The key up to and including its first ``:``; keys without one have no prefix."""
    i = key.find(b":")
    return None if i < 0 else i + 1


class FirstTwo:
    """An object with ``prefix_len(key)``, as official extractors are written."""

    def prefix_len(self, key: bytes) -> int | None:
        return 2 if len(key) >= 2 else None


def too_long(key: bytes) -> int:
    return len(key) + 1


def first3(key: bytes) -> int | None:
    """The same prefixes as ``fixed:3``, computed in Python."""
    return 3 if len(key) >= 3 else None
