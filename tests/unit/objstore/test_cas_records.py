"""The record stores of two-phase CAS (slatelib/objstore/cas_records.py): URL validation
and the SQLite backend's statements (the PostgreSQL backend runs the same statements; it is
exercised against a real server in tests/integration/objstore/test_two_phase_cas.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelib.errors import InvalidArgumentError, UnavailableError
from slatelib.objstore.cas_records import (
    CasBackend,
    CasRecord,
    CasUnreachableError,
    PostgresCasBackend,
    SqliteCasBackend,
    check_cas_url,
    open_cas_backend,
    redact_cas_url,
)


def rec(dest: str, token: str = "t1", committed: bool = False, created: int = 10) -> CasRecord:
    return CasRecord(destination=dest, source=f"{dest}.{token}", token=token, checksum="c",
                     prev_checksum=None, size=1, committed=committed, created_ms=created,
                     updated_ms=created)


@pytest.mark.parametrize("url", [
    "sqlite:////var/cas.db", "sqlite:////var/cas.db?timeout=0.5",
    "postgresql://u@h:5432/db", "postgres://h/db?sslmode=require",
])
def test_good_urls_are_accepted(url: str) -> None:
    assert check_cas_url(url) == url


@pytest.mark.parametrize(("url", "message"), [
    ("", "non-empty URL"),
    ("/var/cas.db", "expected sqlite:///ABSOLUTE/PATH"),
    ("sqlite://var/cas.db", "three slashes"),
    ("sqlite:///", "three slashes"),
    ("sqlite:////var/cas.db?mode=ro", "unknown option 'mode'"),
    ("sqlite:////var/cas.db?timeout=soon", "timeout must be a number"),
    ("mysql://h/db", "unknown cas store scheme 'mysql'"),
    ("postgresql://", "no database named"),
])
def test_bad_urls_are_refused_naming_the_setting(url: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message) as err:
        check_cas_url(url, what="[object_store] cas")
    assert "[object_store] cas" in str(err.value)


def test_passwords_never_show() -> None:
    url = "postgresql://app:s3cret@db.internal:5432/cas"
    assert "s3cret" not in redact_cas_url(url)
    backend = open_cas_backend(url)
    assert isinstance(backend, PostgresCasBackend)
    assert "s3cret" not in backend.url and "s3cret" not in repr(backend)
    with pytest.raises(InvalidArgumentError) as err:
        check_cas_url("mysql://app:s3cret@h/db")
    assert "s3cret" not in str(err.value)


def test_sqlite_insert_is_put_if_not_exists_and_updates_check_the_token(tmp_path: Path) -> None:
    b = open_cas_backend(f"sqlite://{tmp_path}/cas.db")
    assert isinstance(b, SqliteCasBackend)
    exercise_backend(b)


def exercise_backend(b: CasBackend) -> None:
    """Every statement of a backend (also run against PostgreSQL by the integration tests)."""
    assert b.insert("s3://b", rec("db/a"))
    assert not b.insert("s3://b", rec("db/a", token="t2"))
    assert b.insert("s3://other", rec("db/a", token="t3"))  # another store: another key
    assert not b.mark_committed("s3://b", "db/a", "t2")
    assert b.mark_committed("s3://b", "db/a", "t1")
    got = b.get("s3://b", "db/a")
    assert got is not None and got.committed and got.token == "t1"
    new = rec("db/a", token="t4")
    assert not b.replace("s3://b", new, "t2")
    assert b.replace("s3://b", new, "t1")
    assert not b.replace("s3://b", rec("db/a", token="t5"), "t4")  # t4 is not committed
    assert b.source_pending("s3://b", "db/a.t4")
    assert not b.source_pending("s3://b", "db/a.t1")
    b.insert("s3://b", rec("db/b/x", token="t6", committed=True, created=5))
    b.insert("s3://b", rec("db-clone/x", token="t7"))
    b.insert("s3://b", rec("db0", token="t8"))
    b.insert("s3://b", rec("db.x/y", token="t9"))
    b.insert("s3://b", rec("db+x/y", token="t10"))  # '+' and '$' sort after '/' in ICU
    b.insert("s3://b", rec("db$x/y", token="t11"))
    assert [r.destination for r in b.scan("s3://b", "db")] == ["db/a", "db/b/x"]
    assert [r.destination for r in b.scan("s3://b", "db", committed=True)] == ["db/b/x"]
    assert [r.destination for r in b.scan("s3://b", "", created_before_ms=6)] == ["db/b/x"]
    assert not b.delete("s3://b", "db/a", "t1")
    assert b.delete("s3://b", "db/a", "t4")
    assert b.get("s3://b", "db/a") is None
    b.close()
    assert b.get("s3://b", "db/b/x") is not None  # reconnects after close
    many = [f"db/m/{i}" for i in range(1200)]  # more than one chunk
    for i, d in enumerate(many):
        b.insert("s3://b", rec(d, token=f"m{i}"))
    gone = b.delete_many("s3://b", [*many, "db/b/x", "db/none"])
    assert sorted(r.destination for r in gone) == sorted([*many, "db/b/x"])
    assert b.scan("s3://b", "db") == [] and len(b.scan("s3://other", "")) == 1
    assert [r.destination for r in b.scan("s3://b", "")] == ["db$x/y", "db+x/y", "db-clone/x",
                                                             "db.x/y", "db0"]


def test_an_unreachable_sqlite_file_is_unavailable(tmp_path: Path) -> None:
    b = SqliteCasBackend(str(tmp_path / "missing-dir" / "cas.db"))
    with pytest.raises(CasUnreachableError, match="cas store sqlite://.* unavailable"):
        b.get("s", "p")
    assert issubclass(CasUnreachableError, UnavailableError)


def test_an_unreachable_postgres_is_unavailable() -> None:
    b = open_cas_backend("postgresql://nobody@127.0.0.1:1/db?connect_timeout=2")
    with pytest.raises(CasUnreachableError, match="cas store postgresql://.* unavailable"):
        b.get("s", "p")


def test_a_store_spec_never_shows_the_cas_password() -> None:
    from slatelib.objstore import StoreSpec

    spec = StoreSpec.of("file:///x", {"cas": "postgresql://app:s3cret@h/db"})
    assert "s3cret" not in repr(spec) and "app:***@h/db" in repr(spec)


def test_connections_of_ended_threads_are_closed(tmp_path: Path) -> None:
    import threading

    b = SqliteCasBackend(str(tmp_path / "cas.db"))
    for _ in range(5):
        t = threading.Thread(target=b.get, args=("s", "p"))
        t.start()
        t.join()
    b.get("s", "p")  # this thread's new connection prunes the five ended threads' ones
    assert len(b._conns) == 1
