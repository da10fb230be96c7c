"""The object-store tests' fixtures (a fresh memory store per test) for the tests of the
shipped test doubles (slatelib/testing/)."""

from tests.unit.objstore.conftest import _fresh_memory_stores, memory_store

__all__ = ["_fresh_memory_stores", "memory_store"]
