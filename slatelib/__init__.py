"""slatelib: read and write SlateDB 0.17.0 databases on object storage.

Public API re-exports, resolved lazily so that importing a submodule (e.g. the pure
``slatelib.format`` codecs on a Spark executor) does not import the whole library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from slatelib._version import __version__ as __version__

_EXPORTS: dict[str, str] = {
    "Settings": "slatelib.config",
    "load_settings": "slatelib.config",
    "ConcatMergeOperator": "slatelib.core.merge",
    "MergeOperator": "slatelib.core.merge",
    "ObjectStore": "slatelib.objstore",
    "open_store": "slatelib.objstore",
    "BulkLoadReport": "slatelib.ops.bulk_load",
    "bulk_load": "slatelib.ops.bulk_load",
    "DbReader": "slatelib.reader",
    "Db": "slatelib.writer",
    "NO_EXPIRY": "slatelib.writer",
    "WriteBatch": "slatelib.writer",
    "create_checkpoint": "slatelib.ops.checkpoint",
    "delete_checkpoint": "slatelib.ops.checkpoint",
    "list_checkpoints": "slatelib.ops.checkpoint",
    "refresh_checkpoint": "slatelib.ops.checkpoint",
    "CloneReport": "slatelib.ops.clone",
    "CloneSource": "slatelib.ops.clone",
    "create_clone": "slatelib.ops.clone",
    "create_clone_from_sources": "slatelib.ops.clone",
    "DestroyReport": "slatelib.ops.destroy",
    "destroy": "slatelib.ops.destroy",
}
_ERRORS = [
    "AlreadyExistsError", "ChecksumMismatchError", "CommitStateUnknownError", "ConflictError",
    "CorruptObjectError", "DataError", "FencedError", "InternalError", "InvalidArgumentError",
    "InvalidDbStateError", "ManifestMissingError", "MergeOperatorMissingError",
    "ObjectMissingError", "SlateError", "SstMissingError", "StorageError", "UnavailableError",
    "UnsupportedFeatureError", "UnsupportedFormatVersionError", "WalStoreMissingError",
]
_EXPORTS.update(dict.fromkeys(_ERRORS, "slatelib.errors"))

__all__ = [
    "AlreadyExistsError",
    "BulkLoadReport",
    "ChecksumMismatchError",
    "CloneReport",
    "CloneSource",
    "CommitStateUnknownError",
    "ConcatMergeOperator",
    "ConflictError",
    "CorruptObjectError",
    "DataError",
    "Db",
    "DbReader",
    "DestroyReport",
    "FencedError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidDbStateError",
    "ManifestMissingError",
    "MergeOperator",
    "MergeOperatorMissingError",
    "NO_EXPIRY",
    "ObjectMissingError",
    "ObjectStore",
    "Settings",
    "SlateError",
    "SstMissingError",
    "StorageError",
    "UnavailableError",
    "UnsupportedFeatureError",
    "UnsupportedFormatVersionError",
    "WalStoreMissingError",
    "WriteBatch",
    "bulk_load",
    "create_checkpoint",
    "create_clone",
    "create_clone_from_sources",
    "delete_checkpoint",
    "destroy",
    "list_checkpoints",
    "load_settings",
    "open_store",
    "refresh_checkpoint",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'slatelib' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from slatelib.config import Settings, load_settings
    from slatelib.core.merge import ConcatMergeOperator, MergeOperator
    from slatelib.errors import (
        AlreadyExistsError,
        ChecksumMismatchError,
        CommitStateUnknownError,
        ConflictError,
        CorruptObjectError,
        DataError,
        FencedError,
        InternalError,
        InvalidArgumentError,
        InvalidDbStateError,
        ManifestMissingError,
        MergeOperatorMissingError,
        ObjectMissingError,
        SlateError,
        SstMissingError,
        StorageError,
        UnavailableError,
        UnsupportedFeatureError,
        UnsupportedFormatVersionError,
        WalStoreMissingError,
    )
    from slatelib.objstore import ObjectStore, open_store
    from slatelib.ops.bulk_load import BulkLoadReport, bulk_load
    from slatelib.ops.checkpoint import (
        create_checkpoint,
        delete_checkpoint,
        list_checkpoints,
        refresh_checkpoint,
    )
    from slatelib.ops.clone import (
        CloneReport,
        CloneSource,
        create_clone,
        create_clone_from_sources,
    )
    from slatelib.ops.destroy import DestroyReport, destroy
    from slatelib.reader import DbReader
    from slatelib.writer import NO_EXPIRY, Db, WriteBatch
