"""A controllable clock for tests."""

from __future__ import annotations

import threading


class FakeClock:
    """Time moves only when told to; :meth:`sleep` advances it instead of blocking."""

    def __init__(self, now_ms: int = 1_750_000_000_000) -> None:
        self._now_ms = now_ms
        self._mono = 0.0
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def monotonic_s(self) -> float:
        with self._lock:
            return self._mono

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now_ms += int(seconds * 1000)
            self._mono += seconds

    def set_ms(self, now_ms: int) -> None:
        with self._lock:
            self._now_ms = now_ms
