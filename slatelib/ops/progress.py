"""Progress lines on stderr: the thin shell over :mod:`slatelib.core.progress`.

The entry point (the ``slate`` CLI, a job's ``main``) installs one :class:`ProgressOutput`
with :func:`progress_output`; library code anywhere below it calls :func:`start` for a
phase and feeds it counts. Nothing is installed by default, so library calls from a REPL or
a test print nothing, and :func:`start` returns a no-op. Never writes to stdout.

- **Terminal** (stderr is a TTY): one line, rewritten in place with ``\\r`` at most
  :data:`TTY_INTERVAL_S` apart (10 per second), finished with a newline when the phase
  ends.
- **Log** (stderr is a file or pipe, as under Airflow, spark-submit or cron): a plain line
  every ``interval_s`` (:data:`LOG_INTERVAL_S` by default; ``--progress-interval``) while
  a phase runs, and always its last line (``done in ...``), so a log shows each phase's
  total and rate without being flooded. ``interval_s = 0``: only the last lines.

On a terminal, a log record written to stderr by a root logging handler first ends the open
line, so log lines and progress do not run into each other. The output is shared by threads (a job collects several databases at once; Spark progress
is polled from a watcher thread), so writes are serialized.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TextIO

from slatelib.core.progress import ProgressState, Throttle

__all__ = ["LOG_INTERVAL_S", "TTY_INTERVAL_S", "Progress", "ProgressOutput",
           "add_progress_args", "current", "progress_output", "progress_output_from_args",
           "start"]

TTY_INTERVAL_S = 0.1
LOG_INTERVAL_S = 10.0
_CLEAR_EOL = "\x1b[K"


class ProgressOutput:
    """Where progress lines go (module docstring). ``clock``: monotonic seconds."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None,
                 interval_s: float = LOG_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = _isatty(self.stream) if tty is None else tty
        self.interval_s = TTY_INTERVAL_S if self.tty else interval_s
        self.clock = clock
        self.lock = threading.Lock()
        self._open_line = False  # a TTY line without its newline yet

    def start(self, label: str, *, unit: str = "objects", total: int | None = None
              ) -> Progress:
        return Progress(self, ProgressState(label, self.clock(), unit=unit, total=total))

    def write(self, text: str, *, final: bool) -> None:
        """One line (TTY: rewritten in place; ``final`` ends it). Best effort: a closed or
        broken stderr never fails the job."""
        with self.lock:
            try:
                if self.tty:
                    self.stream.write("\r" + text + _CLEAR_EOL + ("\n" if final else ""))
                    self._open_line = not final
                else:
                    self.stream.write(text + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass

    def end_line(self) -> None:
        """Finish a rewritten TTY line (before other output such as a report)."""
        with self.lock:
            if self._open_line:
                self._open_line = False
                try:
                    self.stream.write("\n")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """One phase: feed it with :meth:`update` / :meth:`add`, end it with :meth:`finish`
    (or use it as a context manager). Thread-safe."""

    def __init__(self, out: ProgressOutput | None, state: ProgressState) -> None:
        self.out = out
        self.state = state
        self._lock = threading.Lock()
        started = state.started_s
        # A log line first after a full interval; a terminal line at once.
        self._throttle = Throttle(out.interval_s if out else 0.0,
                                  None if out is None or out.tty else started)
        self._finished = False

    def update(self, done: int, *, total: int | None = None, fraction: float | None = None,
               detail: str | None = None) -> None:
        """``done`` so far (and what else is given), with a line when one is due."""
        self._record(done, 0, total=total, fraction=fraction, detail=detail)

    def add(self, n: int) -> None:
        """``n`` more done (threads may add at once)."""
        self._record(0, n)

    def _record(self, done: int, more: int, *, total: int | None = None,
                fraction: float | None = None, detail: str | None = None) -> None:
        if self.out is None:
            return
        with self._lock:
            if self._finished:
                return
            now = self.out.clock()
            self.state.update(done + (self.state.done + more if more else 0), now, total=total,
                              fraction=fraction, detail=detail)
            line = self.state.render(now) if self._throttle.due(now) else None
        if line is not None:
            self.out.write(line, final=False)

    def finish(self, done: int | None = None) -> None:
        """The last line (once), with ``done`` when given."""
        if self.out is None:
            return
        with self._lock:
            if self._finished:
                return
            self._finished = True
            now = self.out.clock()
            if done is not None:
                self.state.update(done, now)
            line = self.state.render(now, final=True)
        self.out.write(line, final=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


_installed: ProgressOutput | None = None


def current() -> ProgressOutput | None:
    """The installed output, or None (progress off)."""
    return _installed


def start(label: str, *, unit: str = "objects", total: int | None = None) -> Progress:
    """A phase on the installed output; a no-op when progress is off."""
    out = _installed
    if out is None:
        return Progress(None, ProgressState(label, 0.0, unit=unit, total=total))
    return out.start(label, unit=unit, total=total)


@contextmanager
def progress_output(enabled: bool, *, interval_s: float = LOG_INTERVAL_S,
                    stream: TextIO | None = None, tty: bool | None = None
                    ) -> Iterator[ProgressOutput | None]:
    """Install an output for the ``with`` block (process-wide: every thread sees it), or
    none when not ``enabled``; the previous one comes back afterwards."""
    global _installed
    previous = _installed
    out = ProgressOutput(stream, tty=tty, interval_s=interval_s) if enabled else None
    _installed = out
    detach = _end_line_before_logs(out) if out is not None and out.tty else None
    try:
        yield out
    finally:
        if detach is not None:
            detach()
        if out is not None:
            out.end_line()
        _installed = previous


def _end_line_before_logs(out: ProgressOutput) -> Callable[[], None]:
    """Make the root logger's handlers that write to ``out``'s stream end its open line
    before each record; returns the undoing."""
    flt = _EndLine(out)
    handlers = [h for h in logging.getLogger().handlers
                if getattr(h, "stream", None) is out.stream]
    for h in handlers:
        h.addFilter(flt)

    def detach() -> None:
        for h in handlers:
            h.removeFilter(flt)

    return detach


class _EndLine(logging.Filter):
    """Lets every record through, ending the open progress line first."""

    def __init__(self, out: ProgressOutput) -> None:
        super().__init__()
        self.out = out

    def filter(self, record: logging.LogRecord) -> bool:
        self.out.end_line()
        return True


def add_progress_args(p: argparse.ArgumentParser) -> None:
    """``--progress/--no-progress`` and ``--progress-interval``."""
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress lines on stderr (objects/bytes done, rate, ETA); default: "
                        "on for jobs, on for the CLI when stderr is a terminal")
    p.add_argument("--progress-interval", type=float, default=LOG_INTERVAL_S,
                   metavar="SECONDS",
                   help="when stderr is not a terminal, a progress line at most every "
                        f"SECONDS (default {LOG_INTERVAL_S:g}; 0: only each phase's last "
                        "line); a terminal gets one line rewritten in place")


def progress_output_from_args(args: argparse.Namespace, *, default: bool | None = None,
                              stream: TextIO | None = None,
                              ) -> AbstractContextManager[ProgressOutput | None]:
    """:func:`progress_output` as ``--progress``/``--progress-interval`` say. ``default``
    (when ``--progress`` is not given): True for jobs; None: on when stderr is a TTY."""
    given: bool | None = getattr(args, "progress", None)
    interval = float(getattr(args, "progress_interval", LOG_INTERVAL_S) or 0.0)
    target = stream if stream is not None else sys.stderr
    enabled = given if given is not None else (
        default if default is not None else _isatty(target))
    return progress_output(enabled, interval_s=max(0.0, interval), stream=target)
