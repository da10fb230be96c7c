"""Progress of a long job, as numbers and as one line of text. Pure: the caller passes the
time (``now``, seconds on any monotonic clock), so tests drive it with a fake clock.

A :class:`ProgressState` is fed ``(done, total, now)``; it keeps a smoothed rate (an
exponentially weighted moving average of the instantaneous rate, time constant
:data:`RATE_TAU_S`), an ETA (what is left over that rate; from the fraction done when the
total is unknown but the caller knows a fraction, e.g. Spark tasks finished), and renders

    gc delete  41,200/100,000 objects  8,150/s  ETA 7s
    export  12.0 MB/31.5 MB  3.1 MB/s  ETA 6s  3/8 tasks
    gc list  12,000 objects  3,000/s  done in 4.0s

A :class:`Throttle` says when the next line is due (at most one per ``interval_s``; a
forced line, such as the last one, always is). The shell that writes the lines to stderr is
:mod:`slatelib.ops.progress`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from slatelib.core.humanize import fmt_bytes, fmt_count

__all__ = ["RATE_TAU_S", "ProgressState", "Throttle", "fmt_duration", "fmt_eta", "fmt_rate"]

RATE_TAU_S = 5.0
"""Time constant of the rate's moving average: a change in speed shows within a few
seconds, one slow object does not swing the ETA."""


def fmt_eta(seconds: float) -> str:
    """``7s``, ``2m05s``, ``1h02m`` (rounded up to the second)."""
    s = max(0, math.ceil(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def fmt_duration(seconds: float) -> str:
    """How long a phase took: ``0.3s``, ``12.0s``, then as :func:`fmt_eta` from a minute."""
    return f"{max(0.0, seconds):.1f}s" if seconds < 60 else fmt_eta(seconds)


def _amount(n: float, unit: str) -> str:
    return fmt_bytes(n) if unit == "bytes" else fmt_count(int(n))


def fmt_rate(rate: float, unit: str) -> str:
    """``8,150/s`` or ``3.1 MB/s``."""
    return f"{fmt_bytes(rate)}/s" if unit == "bytes" else f"{fmt_count(round(rate))}/s"


@dataclass
class ProgressState:
    """One phase's progress (module docstring). ``unit``: ``"bytes"`` renders sizes, any
    other word is a count of that (``objects``, ``rows``, ``tasks``), ``""`` shows no count
    (a phase: ``rescale split compact  done in 12s``)."""

    label: str
    started_s: float
    unit: str = "objects"
    total: int | None = None
    done: int = 0
    fraction: float | None = None
    """Fraction done given by the caller (0..1) when ``total`` is unknown; else None."""
    detail: str = ""
    """Extra text at the end of the line, e.g. ``3/8 tasks``."""
    rate: float | None = None
    _last_s: float | None = field(default=None, repr=False)
    _last_done: int = field(default=0, repr=False)

    def update(self, done: int, now: float, *, total: int | None = None,
               fraction: float | None = None, detail: str | None = None) -> None:
        """Record ``done`` at ``now`` (``done`` never goes back: a smaller value is
        ignored, as a retried Spark task may report twice and a counter may lag)."""
        if total is not None:
            self.total = total
        if fraction is not None:
            self.fraction = min(1.0, max(0.0, fraction))
        if detail is not None:
            self.detail = detail
        done = max(done, self.done)
        last_s = self.started_s if self._last_s is None else self._last_s
        dt = now - last_s
        if dt > 0:
            inst = (done - self._last_done) / dt
            if self.rate is None:
                self.rate = (done - 0) / max(now - self.started_s, 1e-9)
            else:
                alpha = 1.0 - math.exp(-dt / RATE_TAU_S)
                self.rate += alpha * (inst - self.rate)
            self._last_s, self._last_done = now, done
        self.done = done

    def elapsed_s(self, now: float) -> float:
        return max(0.0, now - self.started_s)

    def eta_s(self, now: float) -> float | None:
        """Seconds left, or None when unknown (nothing done yet, no total nor fraction)."""
        if self.total is not None:
            left = self.total - self.done
            if left <= 0:
                return 0.0
            if self.rate is not None and self.rate > 0:
                return left / self.rate
            return None
        if self.fraction is not None and self.fraction > 0:
            return self.elapsed_s(now) * (1.0 - self.fraction) / self.fraction
        return None

    def render(self, now: float, *, final: bool = False) -> str:
        """One line (no newline). ``final``: the phase has ended, so the average rate over
        the whole phase and ``done in`` take the place of the smoothed rate and the ETA."""
        parts = [self.label]
        elapsed = self.elapsed_s(now)
        if self.unit:  # no unit: a phase without a count (its line shows it ran, and how long)
            amount = _amount(self.done, self.unit)
            if self.total is not None:
                amount += f"/{_amount(self.total, self.unit)}"
            parts.append(amount if self.unit == "bytes" else f"{amount} {self.unit}")
            rate = (self.done / elapsed if elapsed > 0 else None) if final else self.rate
            if rate is not None and (self.done > 0 or not final):
                parts.append(fmt_rate(rate, self.unit))
        if final:
            parts.append(f"done in {fmt_duration(elapsed)}")
        elif (eta := self.eta_s(now)) is not None:
            parts.append(f"ETA {fmt_eta(eta)}")
        if self.detail:
            parts.append(self.detail)
        return "  ".join(parts)


@dataclass
class Throttle:
    """At most one line per ``interval_s`` (``interval_s <= 0``: only forced lines)."""

    interval_s: float
    last_s: float | None = None

    def due(self, now: float, *, force: bool = False) -> bool:
        """Whether to write a line now; records it when so."""
        if force or (self.interval_s > 0 and (self.last_s is None
                                               or now - self.last_s >= self.interval_s)):
            self.last_s = now
            return True
        return False
