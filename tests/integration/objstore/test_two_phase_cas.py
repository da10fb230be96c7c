"""Two-phase CAS on stores that really lack conditional writes (``conditional_writes =
false``: every native conditional put is refused), through SQLite and a real PostgreSQL
server: the CAS conformance test (32 racers, one winner, 5 rounds), and a transactional
store that goes away for a while."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelib.errors import AlreadyExistsError, StorageError, UnavailableError
from slatelib.objstore import ObjectStore, open_raw_store, open_store
from slatelib.objstore.no_conditional import NoConditionalWritesStore
from slatelib.objstore.two_phase import TwoPhaseObjectStore, is_temporary
from tests.integration.objstore.test_concurrent_create import check_rounds, race
from tests.pg_server import PgServer
from tests.s3_server import S3Bucket, create_bucket

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def cas_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/cas.sqlite"
    server: PgServer = request.getfixturevalue("pg_server")
    return server.url()


def no_cas_writes(store: ObjectStore) -> NoConditionalWritesStore:
    assert isinstance(store, TwoPhaseObjectStore)
    inner = store.inner
    while not isinstance(inner, NoConditionalWritesStore):
        inner = inner.inner  # type: ignore[attr-defined]
    return inner


def test_the_store_really_refuses_conditional_writes(tmp_path: Path) -> None:
    bare = open_raw_store(f"file://{tmp_path}/root", conditional_writes=False)
    with pytest.raises(StorageError, match="no conditional writes"):
        bare.put_if_absent("db/manifest/00000000000000000001.manifest", b"x")
    with pytest.raises(StorageError, match="no conditional writes"):
        bare.put_if_match("db/gc/x.boundary", b"1", None)


@pytest.mark.parametrize("payload_size", [64, 256 * 1024])
def test_one_winner_among_32_racers_through_two_phase_cas_on_local_fs(
        tmp_path: Path, cas_url: str, payload_size: int) -> None:
    store = open_raw_store(f"file://{tmp_path}/root", cas=cas_url, conditional_writes=False)
    check_rounds(store, payload_size)  # each racer: store.spec.open(), as an executor would
    assert no_cas_writes(store).refused == 0
    assert [m.path for m in store.inner.list("") if is_temporary(m.path)] == []


def test_one_winner_among_32_racers_through_two_phase_cas_on_s3(
        s3_bucket: S3Bucket, cas_url: str) -> None:
    store = open_raw_store(s3_bucket.url, **s3_bucket.options, cas=cas_url,
                           conditional_writes=False)
    check_rounds(store, 64)
    assert [m.path for m in store.inner.list("") if is_temporary(m.path)] == []


def test_postgres_going_away_fails_writes_cleanly_and_they_resume(
        tmp_path: Path, pg_server: PgServer) -> None:
    store = open_store(f"file://{tmp_path}/root", cas=pg_server.url(), conditional_writes=False)
    assert isinstance(store, TwoPhaseObjectStore)
    store.put_if_absent("db/wal/00000000000000000001.sst", b"1")
    pg_server.stop()
    try:
        with pytest.raises(UnavailableError, match=r"cas store postgresql://.* unavailable"):
            store.put_if_absent("db/wal/00000000000000000002.sst", b"2")
        with pytest.raises(UnavailableError):  # again: still down, still clean
            store.put_if_absent("db/wal/00000000000000000002.sst", b"2")
        # Reads go on without the cas store; nothing of the failed writes is visible.
        assert [m.path for m in store.list("db")] == ["db/wal/00000000000000000001.sst"]
        assert store.get("db/wal/00000000000000000001.sst") == b"1"
    finally:
        pg_server.start()
    assert [m.path for m in store.inner.list("") if is_temporary(m.path)] == []
    store.put_if_absent("db/wal/00000000000000000002.sst", b"2")
    with pytest.raises(AlreadyExistsError):
        store.put_if_absent("db/wal/00000000000000000001.sst", b"x")
    assert [m.path for m in store.list("db")] == ["db/wal/00000000000000000001.sst",
                                                  "db/wal/00000000000000000002.sst"]


def test_a_server_that_strips_conditional_headers_lets_every_racer_win(
        moto_endpoint: str) -> None:
    """The S3 server mode behind the next test: native CAS is silently broken there."""
    bucket = create_bucket(moto_endpoint, conditional_writes=False)
    winners, errors = race(bucket.open().spec, "db/manifest/00000000000000000001.manifest", 64)
    assert errors == [] and len(winners) == 32


def test_one_winner_among_32_racers_on_a_server_that_strips_conditional_headers(
        moto_endpoint: str, cas_url: str) -> None:
    bucket = create_bucket(moto_endpoint, conditional_writes=False)
    store = open_raw_store(bucket.url, **bucket.options, cas=cas_url)  # native CAS not refused
    check_rounds(store, 64)
    assert [m.path for m in store.inner.list("") if is_temporary(m.path)] == []


def test_the_postgres_backend_runs_every_statement_like_sqlite(pg_server: PgServer) -> None:
    from slatelib.objstore.cas_records import open_cas_backend
    from tests.unit.objstore.test_cas_records import exercise_backend

    # A database with a linguistic (ICU en-US) collation: the records' paths keep byte
    # order, so prefix scans are right whatever the database's locale.
    url = pg_server.create_database("statements", icu_locale="en-US")
    exercise_backend(open_cas_backend(url))


def test_a_cluster_left_by_a_killed_session_is_reaped_by_the_next() -> None:
    import socket
    import subprocess

    from tests.pg_server import OWNER_FILE, PgServer, reap_orphans

    orphan = PgServer()
    try:
        orphan.init()
        orphan.start()
        gone = subprocess.Popen(["true"])
        gone.wait()
        (orphan.root / OWNER_FILE).write_text(str(gone.pid))  # its session was SIGKILLed
        assert orphan.root in reap_orphans()
        assert not orphan.root.exists()
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", orphan.port), 1):
            pass
    finally:
        orphan.close()
