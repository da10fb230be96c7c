"""The slatelib writer: :class:`Db` and :class:`WriteBatch` (see :mod:`slatelib.writer.db`).

Exports resolve lazily, so that importing a submodule does not import the whole writer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Db": "slatelib.writer.db",
    "NO_EXPIRY": "slatelib.writer.batch",
    "Ttl": "slatelib.writer.batch",
    "WriteBatch": "slatelib.writer.batch",
}

__all__ = ["NO_EXPIRY", "Db", "Ttl", "WriteBatch"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'slatelib.writer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from slatelib.writer.batch import NO_EXPIRY, Ttl, WriteBatch
    from slatelib.writer.db import Db
