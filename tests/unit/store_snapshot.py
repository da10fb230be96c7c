"""Every object of a store with its bytes, to prove that a refused operation wrote nothing."""

from __future__ import annotations

from slatelib.objstore import ObjectStore


def snapshot(store: ObjectStore) -> dict[str, bytes]:
    """Path -> bytes of every object in ``store`` (listed recursively from its root)."""
    return {m.path: store.get(m.path) for m in store.list("")}
