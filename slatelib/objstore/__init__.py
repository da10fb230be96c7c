"""The object-store layer: the only code of slatelib that talks to storage.

``open_store(url, wal_store=None, **options)`` gives an :class:`ObjectStore`, from the
backend of the URL's scheme (:mod:`slatelib.objstore.registry`; URLs are parsed by
:mod:`slatelib.objstore.url`), with retries. Every store wrapper is a
:class:`ForwardingStore`. :class:`StoreSpec` is the picklable description that Spark
executors reopen. With the ``cas`` option (``[object_store] cas``), conditional writes go
through :class:`TwoPhaseObjectStore` (docs/rfcs/0012-two-phase-cas.md).
"""

from slatelib.objstore.backends import reset_memory_stores
from slatelib.objstore.forwarding import ForwardingStore
from slatelib.objstore.no_conditional import NoConditionalWritesStore
from slatelib.objstore.object_store import (
    OPS,
    BytesLike,
    ObjectMeta,
    ObjectStore,
    OpName,
    check_path,
    check_prefix,
)
from slatelib.objstore.obstore_store import ObstoreObjectStore
from slatelib.objstore.registry import open_raw_store, open_store, resolve_store, with_wal_store
from slatelib.objstore.retrying import RetryingObjectStore, put_if_absent_unique
from slatelib.objstore.spec import StoreSpec
from slatelib.objstore.two_phase import TwoPhaseObjectStore
from slatelib.objstore.url import split_db_url
from slatelib.objstore.wal_routing import WalRoutedStore, is_wal_path, main_store_of, wal_store_of
from slatelib.paths import FORBIDDEN_PATH_CHARS

__all__ = [
    "FORBIDDEN_PATH_CHARS",
    "OPS",
    "BytesLike",
    "ForwardingStore",
    "ObjectMeta",
    "NoConditionalWritesStore",
    "ObjectStore",
    "ObstoreObjectStore",
    "OpName",
    "RetryingObjectStore",
    "StoreSpec",
    "TwoPhaseObjectStore",
    "WalRoutedStore",
    "check_path",
    "check_prefix",
    "is_wal_path",
    "main_store_of",
    "open_raw_store",
    "open_store",
    "put_if_absent_unique",
    "reset_memory_stores",
    "resolve_store",
    "split_db_url",
    "wal_store_of",
    "with_wal_store",
]
