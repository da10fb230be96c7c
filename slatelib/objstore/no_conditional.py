"""NoConditionalWritesStore: an object store that refuses conditional writes.

What the store option ``conditional_writes = false`` (``[object_store] conditional_writes``)
wraps around a store: ``put_if_absent`` and ``put_if_match`` raise ``StorageError`` and
never reach the backend. Use it for a store whose conditional writes cannot be trusted (an
older S3-compatible server, a NAS gateway, a proxy that strips ``If-None-Match``/``If-Match``,
all of which may *accept* the header and ignore it): with the ``cas`` option too, every CAS
goes through two-phase CAS (:mod:`slatelib.objstore.two_phase`), and without it every
operation that needs a CAS fails loudly instead of racing silently. Tests use it as a store
that really lacks conditional writes.
"""

from __future__ import annotations

from slatelib.errors import StorageError
from slatelib.objstore.forwarding import ForwardingStore
from slatelib.objstore.object_store import BytesLike, ObjectStore, check_path


class NoConditionalWritesStore(ForwardingStore):
    """Forwards everything to ``inner`` but the two conditional puts, which it refuses."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.refused = 0
        """How many conditional puts were refused (for tests)."""

    def _refuse(self, op: str, path: str) -> StorageError:
        self.refused += 1
        return StorageError(
            f"{self.url}: {op} {path!r}: this store has no conditional writes "
            "(conditional_writes = false); configure a cas store ([object_store] cas) so "
            "that CAS goes through two-phase CAS")

    def put_if_absent(self, path: str, data: BytesLike) -> None:
        """Always refused.

        Raises:
            StorageError: always.
        """
        raise self._refuse("put_if_absent", check_path(path))

    def put_if_match(self, path: str, data: BytesLike, e_tag: str | None) -> str | None:
        """Always refused.

        Raises:
            StorageError: always.
        """
        raise self._refuse("put_if_match", check_path(path))
