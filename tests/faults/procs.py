"""Child processes of a soak run: started with a bounded life, read without blocking,
paused (SIGSTOP), resumed (SIGCONT), killed (SIGKILL), always reaped."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_LIFE_S = 120.0
"""No child outlives this, whatever the harness does (checked at every pump)."""


PR_SET_PDEATHSIG = 1
try:  # loaded here: the child must not import anything between fork and exec
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:  # not glibc: children then outlive a killed harness until their plan ends
    _LIBC = None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """SIGKILL this child when the harness process dies, even if it was paused (Linux)."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLATELIB_")}
    env["PYTHONPATH"] = str(REPO)
    return env


class Proc:
    """One child process; stdout and stderr are read as lines, never blocking."""

    def __init__(self, name: str, argv: Sequence[str]) -> None:
        self.name = name
        self.argv = list(argv)
        self.started = time.monotonic()
        self.p = subprocess.Popen(self.argv, cwd=REPO, env=child_env(), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  preexec_fn=_die_with_parent)
        assert self.p.stdout is not None and self.p.stderr is not None
        self._fds = {self.p.stdout.fileno(): "out", self.p.stderr.fileno(): "err"}
        for fd in self._fds:
            os.set_blocking(fd, False)
        self._partial = {"out": b"", "err": b""}
        self.out: list[str] = []
        self.err: list[str] = []
        self._read_upto = 0
        self.paused = False

    @classmethod
    def python(cls, name: str, module_args: Sequence[str]) -> Proc:
        return cls(name, [sys.executable, "-m", *module_args])

    # ------------------------------------------------------------------ reading
    def _read(self, timeout: float) -> bool:
        if not self._fds:
            return False
        ready, _, _ = select.select(list(self._fds), [], [], max(timeout, 0.0))
        got = False
        for fd in ready:
            stream = self._fds[fd]
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not data:
                del self._fds[fd]  # end of stream
                continue
            got = True
            buf = self._partial[stream] + data
            *lines, rest = buf.split(b"\n")
            self._partial[stream] = rest
            (self.out if stream == "out" else self.err).extend(
                line.decode("utf-8", "replace") for line in lines)
        return got

    def pump(self) -> list[str]:
        """Read what is available; return the stdout lines not returned before."""
        while self._read(0.0):
            pass
        if self.alive and time.monotonic() - self.started > MAX_LIFE_S:
            self.kill()
        new = self.out[self._read_upto:]
        self._read_upto = len(self.out)
        return new

    def wait_for(self, predicate: Callable[[str], bool], timeout_s: float,
                 *, stream: str = "out") -> str | None:
        """Read until a line of ``stream`` matches (returned), the process exits or the
        time is up (None). Lines stay available to :meth:`pump`."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        while True:
            lines = self.out if stream == "out" else self.err
            for line in lines[seen:]:
                if predicate(line):
                    return line
            seen = len(lines)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not self._read(min(left, 0.05)) and not self.alive:
                while self._read(0.0):
                    pass
                lines = self.out if stream == "out" else self.err
                return next((ln for ln in lines[seen:] if predicate(ln)), None)

    # ------------------------------------------------------------------ control
    @property
    def alive(self) -> bool:
        return self.p.poll() is None

    def pause(self) -> None:
        if self.alive:
            self.p.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.alive and self.paused:
            self.p.send_signal(signal.SIGCONT)
        self.paused = False

    def send_line(self, text: str = "") -> None:
        if self.alive and self.p.stdin is not None:
            try:
                self.p.stdin.write(text.encode() + b"\n")
                self.p.stdin.flush()
            except BrokenPipeError:
                pass

    def kill(self) -> None:
        if self.alive:
            self.p.send_signal(signal.SIGKILL)
        self.paused = False

    def wait(self, timeout_s: float) -> int:
        """The exit code (negative: killed by a signal); killed when not done in time."""
        deadline = time.monotonic() + timeout_s
        while self.alive and time.monotonic() < deadline:
            self._read(0.05)
        if self.alive:
            self.resume()
            self.kill()
        rc = self.p.wait(10)
        while self._read(0.0):
            pass
        return rc

    def close(self) -> None:
        """Kill (if running) and reap; close the pipes."""
        self.resume()
        self.kill()
        try:
            self.p.wait(10)
            while self._read(0.0):
                pass
        finally:
            self._fds = {}
            for f in (self.p.stdin, self.p.stdout, self.p.stderr):
                if f is not None:
                    try:
                        f.close()
                    except OSError:
                        pass

    def tail(self, n: int = 15) -> str:
        return "\n".join([*self.out[-n:], *("! " + e for e in self.err[-n:])])
