"""The transactional store behind two-phase CAS (design doc 'manifest', "Two-Phase CAS
Protocol"): one record per final object path, inserted with put-if-not-exists semantics on
that path, later marked committed.

Backends, chosen by the URL of the ``cas`` store option (docs/rfcs/0012-two-phase-cas.md):

``sqlite:///ABSOLUTE/PATH`` (``sqlite:////data/cas.db``: the file ``/data/cas.db``)
    Python's ``sqlite3``; the embedded default for one host or a shared file system whose
    locks work (not NFS without working ``fcntl`` locks). Query option ``timeout`` (seconds
    to wait for a lock held by another process, default 30).
``postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DBNAME[?...]`` (also ``postgres://``)
    PostgreSQL through ``psycopg`` 3; the query string is passed to libpq (``host=/dir``
    for a unix socket, ``connect_timeout``, ``sslmode``...). Keep the password out of the
    URL: libpq reads ``PGPASSWORD`` or ``~/.pgpass`` in every process, the URL travels with
    the store's spec to Spark executors.

Every operation is one statement (autocommit), so a record is never half-updated. The
table ``slatelib_cas_records`` is created on first use; one database can serve many object
stores (records are keyed by the store's root URL and the object path).

Errors: a backend that cannot be reached, is locked past its timeout or drops the
connection raises ``UnavailableError`` naming the backend (writes through two-phase CAS fail
cleanly and can be retried); anything else (bad URL, missing driver, permission, schema)
raises ``StorageError`` or ``InvalidArgumentError``.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from slatelib.errors import InvalidArgumentError, StorageError, UnavailableError

TABLE = "slatelib_cas_records"

_DELETE_CHUNK = 500

_COLUMNS = ("destination, source, token, checksum, prev_checksum, size, committed, "
            "created_ms, updated_ms")


@dataclass(frozen=True, slots=True)
class CasRecord:
    """One intent (design doc 'manifest': ``source``, ``destination``, ``committed``).

    ``token`` identifies this write (and is the ETag two-phase CAS hands out);
    ``checksum`` is the SHA-256 (hex) of the bytes at ``source``; ``prev_checksum`` is None
    for a create (the destination must be absent) and the checksum of the version being
    replaced for a conditional overwrite. Times are Unix milliseconds.
    """

    destination: str
    source: str
    token: str
    checksum: str
    prev_checksum: str | None
    size: int
    committed: bool
    created_ms: int
    updated_ms: int


class CasBackend(Protocol):
    """What two-phase CAS needs from a transactional store. ``store`` is the root URL of the
    object store the records belong to."""

    @property
    def url(self) -> str:
        """The backend URL without a password (for messages)."""
        ...

    def insert(self, store: str, rec: CasRecord) -> bool:
        """Insert ``rec`` unless a record for its destination exists; True if inserted."""
        ...

    def get(self, store: str, destination: str) -> CasRecord | None:
        """The record of ``destination``, if any."""
        ...

    def replace(self, store: str, rec: CasRecord, expected_token: str) -> bool:
        """Replace the committed record of ``rec.destination`` whose token is
        ``expected_token`` by ``rec`` (uncommitted); True if it was replaced."""
        ...

    def mark_committed(self, store: str, destination: str, token: str) -> bool:
        """Set ``committed`` on the record of ``destination`` if its token is ``token``."""
        ...

    def delete(self, store: str, destination: str, token: str | None = None) -> bool:
        """Delete the record of ``destination`` (only if its token is ``token``, if given)."""
        ...

    def delete_many(self, store: str, destinations: list[str]) -> list[CasRecord]:
        """Delete the records of ``destinations``; returns the records deleted."""
        ...

    def scan(self, store: str, prefix: str, *, committed: bool | None = None,
             created_before_ms: int | None = None) -> list[CasRecord]:
        """Records whose destination lies below the directory ``prefix`` ("" : all),
        optionally only committed (True) or incomplete (False) ones, or older ones."""
        ...

    def source_pending(self, store: str, source: str) -> bool:
        """Whether an incomplete record names ``source`` as its temporary object."""
        ...

    def close(self) -> None:
        """Release connections (the backend reconnects on next use)."""
        ...


class CasUnreachableError(UnavailableError):
    """The transactional store could not be reached (or was locked past its timeout):
    the statement was never applied, so nothing was recorded."""


def now_ms() -> int:
    return int(time.time() * 1000)


def _prefix_bounds(prefix: str) -> tuple[str, str]:
    """``[lo, hi)`` of destinations below the directory ``prefix`` (``'0'`` follows ``'/'``)."""
    if not prefix:
        return "", "\U0010ffff"
    return prefix + "/", prefix + "0"


def _row(r: tuple[Any, ...]) -> CasRecord:
    return CasRecord(destination=r[0], source=r[1], token=r[2], checksum=r[3],
                     prev_checksum=r[4], size=int(r[5]), committed=bool(r[6]),
                     created_ms=int(r[7]), updated_ms=int(r[8]))


def _values(store: str, rec: CasRecord) -> tuple[Any, ...]:
    return (store, rec.destination, rec.source, rec.token, rec.checksum, rec.prev_checksum,
            rec.size, rec.committed, rec.created_ms, rec.updated_ms)


class _SqlBackend(ABC):
    """The statements, shared by both backends (``?`` placeholders; Postgres swaps them)."""

    _ph = "?"

    @abstractmethod
    def _exec(self, sql: str, args: tuple[Any, ...], *, fetch: bool = False
              ) -> tuple[int, list[tuple[Any, ...]]]:
        """Run one statement on the calling thread's connection: (rowcount, rows)."""

    _lock: threading.Lock
    _conns: list[tuple[threading.Thread, Any]]

    def _register(self, conn: Any) -> None:
        """Remember the calling thread's new connection, and close those of threads that
        have ended (a thread's connection is only ever used by that thread)."""
        me = threading.current_thread()
        with self._lock:
            dead = [c for t, c in self._conns if not t.is_alive()]
            self._conns = [(t, c) for t, c in self._conns if t.is_alive()]
            self._conns.append((me, conn))
        for c in dead:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close
                pass

    def _sql(self, sql: str) -> str:
        return sql if self._ph == "?" else sql.replace("?", self._ph)

    def insert(self, store: str, rec: CasRecord) -> bool:
        n, _ = self._exec(self._sql(
            f"INSERT INTO {TABLE} (store, {_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (store, destination) DO NOTHING"), _values(store, rec))
        return n == 1

    def get(self, store: str, destination: str) -> CasRecord | None:
        _, rows = self._exec(self._sql(
            f"SELECT {_COLUMNS} FROM {TABLE} WHERE store = ? AND destination = ?"),
            (store, destination), fetch=True)
        return _row(rows[0]) if rows else None

    def replace(self, store: str, rec: CasRecord, expected_token: str) -> bool:
        n, _ = self._exec(self._sql(
            f"UPDATE {TABLE} SET source = ?, token = ?, checksum = ?, prev_checksum = ?, "
            "size = ?, committed = ?, created_ms = ?, updated_ms = ? "
            "WHERE store = ? AND destination = ? AND token = ? AND committed = ?"),
            (rec.source, rec.token, rec.checksum, rec.prev_checksum, rec.size, False,
             rec.created_ms, rec.updated_ms, store, rec.destination, expected_token, True))
        return n == 1

    def mark_committed(self, store: str, destination: str, token: str) -> bool:
        n, _ = self._exec(self._sql(
            f"UPDATE {TABLE} SET committed = ?, updated_ms = ? "
            "WHERE store = ? AND destination = ? AND token = ?"),
            (True, now_ms(), store, destination, token))
        return n == 1

    def delete(self, store: str, destination: str, token: str | None = None) -> bool:
        if token is None:
            n, _ = self._exec(self._sql(
                f"DELETE FROM {TABLE} WHERE store = ? AND destination = ?"), (store, destination))
        else:
            n, _ = self._exec(self._sql(
                f"DELETE FROM {TABLE} WHERE store = ? AND destination = ? AND token = ?"),
                (store, destination, token))
        return n >= 1

    def delete_many(self, store: str, destinations: list[str]) -> list[CasRecord]:
        out: list[CasRecord] = []
        for i in range(0, len(destinations), _DELETE_CHUNK):
            chunk = destinations[i:i + _DELETE_CHUNK]
            marks = ",".join("?" * len(chunk))
            _, rows = self._exec(self._sql(
                f"DELETE FROM {TABLE} WHERE store = ? AND destination IN ({marks}) "
                f"RETURNING {_COLUMNS}"), (store, *chunk), fetch=True)
            out.extend(_row(r) for r in rows)
        return out

    def scan(self, store: str, prefix: str, *, committed: bool | None = None,
             created_before_ms: int | None = None) -> list[CasRecord]:
        lo, hi = _prefix_bounds(prefix)
        sql = (f"SELECT {_COLUMNS} FROM {TABLE} WHERE store = ? AND destination >= ? "
               "AND destination < ?")
        args: list[Any] = [store, lo, hi]
        if committed is not None:
            sql += " AND committed = ?"
            args.append(committed)
        if created_before_ms is not None:
            sql += " AND created_ms < ?"
            args.append(created_before_ms)
        _, rows = self._exec(self._sql(sql + " ORDER BY destination"), tuple(args), fetch=True)
        return [_row(r) for r in rows]

    def source_pending(self, store: str, source: str) -> bool:
        _, rows = self._exec(self._sql(
            f"SELECT 1 FROM {TABLE} WHERE store = ? AND source = ? AND committed = ?"),
            (store, source, False), fetch=True)
        return bool(rows)


_SQLITE_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (store TEXT NOT NULL, destination TEXT NOT NULL, "
    "source TEXT NOT NULL, token TEXT NOT NULL, checksum TEXT NOT NULL, prev_checksum TEXT, "
    "size INTEGER NOT NULL, committed INTEGER NOT NULL, created_ms INTEGER NOT NULL, "
    "updated_ms INTEGER NOT NULL, PRIMARY KEY (store, destination))",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_source ON {TABLE} (store, source)",
)


class SqliteCasBackend(_SqlBackend):
    """Records in a SQLite file (one connection per thread, WAL journal).

    Raises:
        InvalidArgumentError: from the constructor, for a relative path or bad option.
    """

    def __init__(self, path: str, *, timeout_s: float = 30.0, url: str | None = None) -> None:
        if not path.startswith("/"):
            raise InvalidArgumentError(f"cas sqlite path must be absolute, got {path!r}")
        if timeout_s < 0:
            raise InvalidArgumentError(f"cas sqlite timeout must be >= 0, got {timeout_s}")
        self.path = path
        self.timeout_s = timeout_s
        self._url = url or f"sqlite://{path}"
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._schema_ready = False

    @property
    def url(self) -> str:
        return self._url

    def __repr__(self) -> str:
        return f"SqliteCasBackend({self.path!r})"

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None,
                               check_same_thread=False)
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":  # switching needs a moment alone with the file
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            if not self._schema_ready:
                for stmt in _SQLITE_SCHEMA:
                    conn.execute(stmt)
                self._schema_ready = True
        except BaseException:
            conn.close()
            raise
        self._local.conn = conn
        self._register(conn)
        return conn

    def _exec(self, sql: str, args: tuple[Any, ...], *, fetch: bool = False
              ) -> tuple[int, list[tuple[Any, ...]]]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                conn = self._conn()
                cur = conn.execute(sql, args)
                rows = cur.fetchall() if fetch else []
                return cur.rowcount, rows
            except sqlite3.OperationalError as exc:
                # SQLite applies a statement atomically or not at all: a failed one did
                # nothing. A lock that SQLite's busy handler gave up on early (a WAL
                # checkpoint, a schema change, a journal-mode switch of another process) is
                # waited out until the timeout.
                self._drop()
                busy = "locked" in str(exc) or "busy" in str(exc)
                if busy and time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                raise CasUnreachableError(f"cas store {self._url} unavailable: {exc}") from exc
            except sqlite3.Error as exc:
                self._drop()
                raise StorageError(f"cas store {self._url}: {exc}") from exc

    def _drop(self) -> None:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with self._lock:
                self._conns = [(t, c) for t, c in self._conns if c is not conn]
            conn.close()

    def close(self) -> None:
        with self._lock:
            conns, self._conns = [c for _, c in self._conns], []
        for conn in conns:
            conn.close()
        self._local = threading.local()


_PG_SCHEMA = (
    # Byte order ("C") for the paths, whatever the database's locale: prefix scans are
    # ranges ('db/' <= destination < 'db0'), which a linguistic collation would reorder.
    f'CREATE TABLE IF NOT EXISTS {TABLE} (store TEXT COLLATE "C" NOT NULL, '
    'destination TEXT COLLATE "C" NOT NULL, '
    "source TEXT NOT NULL, token TEXT NOT NULL, checksum TEXT NOT NULL, prev_checksum TEXT, "
    "size BIGINT NOT NULL, committed BOOLEAN NOT NULL, created_ms BIGINT NOT NULL, "
    "updated_ms BIGINT NOT NULL, PRIMARY KEY (store, destination))",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_source ON {TABLE} (store, source)",
)
_PG_SCHEMA_LOCK = 0x51A7E2C0  # advisory lock id: concurrent first uses create the table once


class PostgresCasBackend(_SqlBackend):
    """Records in PostgreSQL (one autocommit connection per thread).

    Raises:
        StorageError: from the constructor, when ``psycopg`` is not installed.
    """

    _ph = "%s"

    def __init__(self, conninfo: str, *, url: str) -> None:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - psycopg is a dependency
            raise StorageError("cas store postgresql:// needs the psycopg package") from exc
        self._psycopg = psycopg
        self._conninfo = conninfo
        self._url = url
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[tuple[threading.Thread, Any]] = []
        self._schema_ready = False

    @property
    def url(self) -> str:
        return self._url

    def __repr__(self) -> str:
        return f"PostgresCasBackend({self._url!r})"

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed:
            return conn
        conn = self._psycopg.connect(self._conninfo, autocommit=True)
        try:
            if not self._schema_ready:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_SCHEMA_LOCK,))
                    for stmt in _PG_SCHEMA:
                        conn.execute(stmt)
                self._schema_ready = True
        except BaseException:
            conn.close()
            raise
        self._local.conn = conn
        self._register(conn)
        return conn

    def _exec(self, sql: str, args: tuple[Any, ...], *, fetch: bool = False
              ) -> tuple[int, list[tuple[Any, ...]]]:
        pg = self._psycopg
        try:
            conn = self._conn()
        except pg.OperationalError as exc:
            self._drop()
            raise CasUnreachableError(f"cas store {self._url} unavailable: "
                                      f"{str(exc).strip()}") from exc
        except pg.Error as exc:
            self._drop()
            raise StorageError(f"cas store {self._url}: {str(exc).strip()}") from exc
        try:
            cur = conn.execute(sql, args)
            rows = cur.fetchall() if fetch else []
            return cur.rowcount, rows
        except pg.OperationalError as exc:
            self._drop()
            raise UnavailableError(f"cas store {self._url} unavailable: "
                                   f"{str(exc).strip()}") from exc
        except pg.Error as exc:
            self._drop()
            raise StorageError(f"cas store {self._url}: {str(exc).strip()}") from exc

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with self._lock:
                self._conns = [(t, c) for t, c in self._conns if c is not conn]
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close
                pass

    def close(self) -> None:
        with self._lock:
            conns, self._conns = [c for _, c in self._conns], []
        for conn in conns:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close
                pass
        self._local = threading.local()


_PASSWORD = re.compile(r"(://[^:/@]*):[^@/]*@")


def redact_cas_url(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    return _PASSWORD.sub(r"\1:***@", url)


def check_cas_url(url: str, *, what: str = "cas") -> str:
    """Validate a ``cas`` URL (see the module docstring) and return it.

    Raises:
        InvalidArgumentError: not ``sqlite:///ABSOLUTE/PATH`` or ``postgresql://...``,
            naming ``what`` (the option or variable it came from).
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgumentError(f"{what} must be a non-empty URL, got {url!r}")
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise InvalidArgumentError(
            f"{what} {redact_cas_url(url)!r}: expected sqlite:///ABSOLUTE/PATH or "
            "postgresql://HOST[:PORT]/DBNAME")
    if scheme == "sqlite":
        parts = urlsplit(url)
        if parts.netloc or not parts.path.startswith("/") or parts.path.endswith("/"):
            raise InvalidArgumentError(
                f"{what} {url!r}: a SQLite cas store is sqlite:///ABSOLUTE/PATH/FILE "
                "(three slashes, then the absolute path)")
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key != "timeout":
                raise InvalidArgumentError(f"{what} {url!r}: unknown option {key!r} "
                                           "(sqlite takes only timeout=SECONDS)")
            try:
                float(value)
            except ValueError:
                raise InvalidArgumentError(
                    f"{what} {url!r}: timeout must be a number of seconds, got {value!r}"
                ) from None
        return url
    if scheme in ("postgresql", "postgres"):
        if not rest:
            raise InvalidArgumentError(f"{what} {redact_cas_url(url)!r}: no database named")
        return url
    raise InvalidArgumentError(
        f"{what} {redact_cas_url(url)!r}: unknown cas store scheme {scheme!r} "
        "(expected sqlite:// or postgresql://)")


def open_cas_backend(url: str, *, what: str = "cas") -> CasBackend:
    """Open the backend that ``url`` names (no connection is made until first use).

    Raises:
        InvalidArgumentError: a malformed URL (see :func:`check_cas_url`).
    """
    check_cas_url(url, what=what)
    if url.startswith("sqlite:"):
        parts = urlsplit(url)
        timeout = dict(parse_qsl(parts.query)).get("timeout")
        return SqliteCasBackend(parts.path, timeout_s=float(timeout) if timeout else 30.0,
                                url=url)
    return PostgresCasBackend(url, url=redact_cas_url(url))

