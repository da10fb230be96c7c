"""Prefix extractors as an application gives them to slatelib (``package.module:attr`` in
``[sst.prefix_extractors]``): the same prefixes as :class:`tests.interop.official.FixedPrefix`."""

from __future__ import annotations


def fixed4(key: bytes) -> int | None:
    """The first four bytes of keys at least four bytes long (official ``FixedPrefix(4)``)."""
    return 4 if len(key) >= 4 else None
