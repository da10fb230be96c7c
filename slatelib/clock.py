"""Clocks. Code that needs the time takes a :class:`Clock`, so tests can pass a fake one."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock time in Unix milliseconds."""
        ...

    def monotonic_s(self) -> float:
        """A monotonic reading in seconds, for timeouts and intervals."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_s(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()
