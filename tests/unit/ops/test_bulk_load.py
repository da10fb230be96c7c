"""bulk_load under lost responses and a concurrent creator (memory store, no wall clock)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slatelib import DbReader, bulk_load
from slatelib.errors import InvalidDbStateError
from slatelib.objstore import ObjectStore, RetryingObjectStore, open_raw_store, reset_memory_stores
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.faulty import FlakyObjectStore

PAIRS = [(b"k%04d" % i, b"v%d" % i) for i in range(3000)]


@pytest.fixture
def raw() -> Iterator[ObjectStore]:
    reset_memory_stores()
    yield open_raw_store("memory:///")
    reset_memory_stores()


def _production(inner: ObjectStore) -> RetryingObjectStore:
    """open_store's retry policy (lost responses are never guessed from content), no sleep."""
    return RetryingObjectStore(inner, sleep=lambda _s: None, resolve_by_content=False)


@pytest.mark.parametrize("path", ["compacted/", "manifest/"])
def test_a_lost_create_response_is_resolved_by_reading_back(raw: ObjectStore, path: str) -> None:
    flaky = FlakyObjectStore(raw)
    flaky.fail_after("put_if_absent", path=path)
    report = bulk_load("db", _production(flaky), PAIRS, target_sst_size=16 * 1024)
    assert len(report.ssts) > 1 and report.manifest_id == 1
    with DbReader.open("db", raw, mode="latest") as r:
        assert list(r.scan()) == PAIRS


def test_a_database_created_concurrently_aborts_the_load_and_removes_its_ssts(
    raw: ObjectStore,
) -> None:
    class Racer(FlakyObjectStore):
        """Creates another database right before our manifest 1 lands."""

        def put_if_absent(self, path: str, data: object) -> None:
            if path.endswith(".manifest"):
                bulk_load("db", raw, [(b"other", b"x")])
            super().put_if_absent(path, data)  # type: ignore[arg-type]

    with pytest.raises(InvalidDbStateError, match="concurrently"):
        bulk_load("db", _production(Racer(raw)), PAIRS, target_sst_size=16 * 1024)
    winner = ManifestStore(raw, "db").read_latest().value
    left = {m.path for m in raw.list("db/compacted")}
    assert left == {f"db/compacted/{_name(h.id)}.sst" for h in winner.ssts}
    with DbReader.open("db", raw, mode="latest") as r:
        assert list(r.scan()) == [(b"other", b"x")]


def _name(sid: int) -> str:
    from slatelib.ids import ulid_to_str

    return ulid_to_str(sid)
