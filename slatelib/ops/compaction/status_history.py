"""The service's status history: a bounded JSON Lines file of L0 depth and sorted runs per
database over time (``[service] status_history``, ``jobs/compact.py --service
--status-history FILE``), which ``slate health --status-history FILE`` charts.

One line per sample, at most one sample every ``interval_s`` (default a minute), and one
when the service stops::

    {"at_ms": 1800000000000, "dbs": {"s3://bucket/tenants/a": [3, 2], ...}}

where each database maps to ``[L0 SSTs of its deepest tree, sorted runs of the tree with the
most]`` (None when it was not polled yet), the numbers of the status file. The file keeps the
newest ``kept`` samples (default 1,440: a day at one a minute): once it holds a quarter more,
it is rewritten with the newest ``kept`` (a temporary file, then a rename). A reader skips a
line it cannot parse (a torn last line after a crash).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

__all__ = ["HISTORY_INTERVAL_S", "HISTORY_SAMPLES_KEPT", "HistoryPoint", "StatusHistory",
           "read_status_history"]

HISTORY_SAMPLES_KEPT = 1440
HISTORY_INTERVAL_S = 60.0


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One database at one sample."""

    at_ms: int
    l0: int | None
    sorted_runs: int | None


class StatusHistory:
    """Appends samples to the history file at ``path`` (see the module docstring).

    Raises:
        OSError: from :meth:`append`, when the file cannot be written.
    """

    def __init__(self, path: str, *, kept: int = HISTORY_SAMPLES_KEPT,
                 interval_s: float = HISTORY_INTERVAL_S) -> None:
        self.path = path
        self.kept = max(1, kept)
        self.interval_s = interval_s
        self._lines: int | None = None
        self._last_mono: float | None = None

    def due(self, mono_s: float) -> bool:
        """Whether a sample taken at monotonic time ``mono_s`` is to be written."""
        return self._last_mono is None or mono_s - self._last_mono >= self.interval_s

    def append(self, at_ms: int, mono_s: float,
               dbs: Mapping[str, tuple[int | None, int | None]]) -> None:
        """Write one sample (``dbs``: name -> (L0, sorted runs)) and trim the file when it
        grew past its bound."""
        line = json.dumps({"at_ms": at_ms, "dbs": {k: list(v) for k, v in dbs.items()}},
                          separators=(",", ":"))
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        if self._lines is None:
            self._lines = _count_lines(self.path)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        self._lines += 1
        self._last_mono = mono_s
        if self._lines > self.kept + self.kept // 4:
            self._trim()

    def _trim(self) -> None:
        with open(self.path, encoding="utf-8") as f:
            lines = f.readlines()[-self.kept:]
        folder = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=".slatelib-history-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.writelines(lines)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._lines = len(lines)


def _count_lines(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def parse_history(lines: Iterable[str]) -> dict[str, list[HistoryPoint]]:
    """Database name -> its points in file order, from the lines of a history file
    (unparsable lines are skipped)."""
    out: dict[str, list[HistoryPoint]] = {}
    for text in lines:
        try:
            sample = json.loads(text)
            at = int(sample["at_ms"])
            dbs = sample["dbs"]
            if not isinstance(dbs, dict):
                continue
        except (ValueError, KeyError, TypeError):
            continue
        for name, value in dbs.items():
            if not isinstance(value, list) or len(value) != 2:
                continue
            l0, runs = value
            out.setdefault(str(name), []).append(HistoryPoint(
                at, l0 if isinstance(l0, int) else None,
                runs if isinstance(runs, int) else None))
    return out


def read_status_history(path: str) -> dict[str, list[HistoryPoint]]:
    """:func:`parse_history` of the file at ``path``.

    Raises:
        OSError: the file cannot be read (FileNotFoundError when it does not exist).
    """
    with open(path, encoding="utf-8") as f:
        return parse_history(f)
