"""Whether an object is there: one ``head``, a missing object read as False.

The one copy of a check that destroy (its ``.deleting`` marker) and writer fencing (a
WAL SST) both make.
"""

from __future__ import annotations

from slatelib.errors import ObjectMissingError
from slatelib.objstore import ObjectStore


def object_exists(store: ObjectStore, path: str) -> bool:
    """True when ``store`` holds an object at ``path``.

    Raises:
        StorageError: the store could not tell (anything but a missing object).
    """
    try:
        store.head(path)
    except ObjectMissingError:
        return False
    return True
