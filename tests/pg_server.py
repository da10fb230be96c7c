"""A throwaway PostgreSQL cluster for the tests of two-phase CAS (``tests/conftest.py``
fixture ``pg_server``, session-scoped; the benchmark uses :class:`PgServer` directly).

PostgreSQL refuses to run as root, so when the tests run as root the cluster directory is
handed to an unprivileged user (``nobody``) and ``initdb``/``pg_ctl`` run through
``runuser``. The server listens on 127.0.0.1 on a free port (and on a unix socket in the
cluster directory), with ``trust`` authentication for the local superuser ``slatelib``.
Failing to start raises: tests that need PostgreSQL fail, they never skip.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PG_USER = "slatelib"
RUN_AS = "nobody"
OWNER_FILE = "owner.pid"
"""The pid of the process that made the cluster (a dead owner: an orphan to reap)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """One cluster in a temporary directory; :meth:`start`, :meth:`stop`, :meth:`close`."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="slatelib-pg-")))
    port: int = field(default_factory=_free_port)
    fsync: bool = False
    """Durable commits (the benchmark); tests run with ``fsync=off`` for speed."""

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    def url(self, dbname: str = "postgres") -> str:
        """A ``cas`` URL for database ``dbname`` on this server."""
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/{dbname}?connect_timeout=5"

    def _run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = list(argv)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", RUN_AS, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              cwd=self.root, check=False)

    def init(self) -> None:
        """``initdb`` the cluster (as an unprivileged user when running as root).

        Raises:
            RuntimeError: initdb failed (its output attached).
        """
        for tool in ("initdb", "pg_ctl"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"PostgreSQL's {tool} is not on PATH")
        (self.root / OWNER_FILE).write_text(str(os.getpid()))
        if os.geteuid() == 0:
            entry = pwd.getpwnam(RUN_AS)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o700)
        done = self._run("initdb", "-D", str(self.data_dir), "-U", PG_USER, "-A", "trust",
                         "-E", "UTF8", "--no-sync")
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({done.returncode}): {done.stdout}{done.stderr}")

    def start(self) -> None:
        """Start the server and wait until it accepts connections.

        Raises:
            RuntimeError: it did not start (the server log attached).
        """
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                f"-c unix_socket_directories={self.root} "
                f"-c fsync={'on' if self.fsync else 'off'} "
                "-c max_connections=200 -c shared_buffers=32MB")
        done = self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file),
                         "-o", opts, "-w", "-t", "60", "start", timeout=90)
        if done.returncode != 0:
            log = self.log_file.read_text() if self.log_file.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start ({done.returncode}): "
                               f"{done.stdout}{done.stderr}\n{log[-4000:]}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"PostgreSQL does not accept connections on port {self.port}")

    def stop(self) -> None:
        """Stop the server (fast shutdown: open connections are cut)."""
        if self.data_dir.exists():
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def create_database(self, name: str, *, icu_locale: str | None = None) -> str:
        """Create database ``name`` (with ICU collation ``icu_locale``, e.g. ``"en-US"``)
        and return its ``cas`` URL."""
        import psycopg

        extra = (f" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '{icu_locale}'"
                 if icu_locale else "")
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{extra}')
        return self.url(name)

    def close(self) -> None:
        """Stop the server and remove its directory."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (also one of another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_orphans() -> list[Path]:
    """Stop and remove the clusters of earlier test sessions that were killed before they
    could stop them (their owner process is gone), so a SIGKILLed run leaks no server."""
    reaped = []
    for root in Path(tempfile.gettempdir()).glob("slatelib-pg-*"):
        try:
            owner = int((root / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # being set up right now, or not ours
        if pid_alive(owner):
            continue
        orphan = PgServer(root=root, port=0)
        if orphan.data_dir.exists():
            orphan._run("pg_ctl", "-D", str(orphan.data_dir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)
        reaped.append(root)
    return reaped


def start_pg(*, fsync: bool = False) -> PgServer:
    """A started cluster (the caller closes it); ``fsync=True`` for durable commits. The
    clusters that killed sessions left behind are reaped first (:func:`reap_orphans`).

    Raises:
        RuntimeError: it could not be initialised or started.
    """
    reap_orphans()
    server = PgServer(fsync=fsync)
    try:
        server.init()
        server.start()
    except BaseException:
        server.close()
        raise
    return server
