"""How GC names times, ages, manifests and checkpoints in its reasons. Pure.

Every GC decision carries a sentence that a reviewer reads to judge it, so the wording is
kept in one place: times are UTC ISO-8601 to the second, ages are compact (``2h03m``), and a
manifest is named by its id and its role (``manifest 42 (latest)``, ``manifest 17
(checkpoint 1b2c3d4e 'nightly', expires 2026-11-23T10:00:00Z)``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from slatelib.core.manifest import Checkpoint


def fmt_time(ms: int) -> str:
    """Unix milliseconds as ``2026-11-22T03:14:25Z`` (``1970-01-01T00:00:00Z`` for 0)."""
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{ms}ms"


def fmt_age(ms: float) -> str:
    """A duration in milliseconds as ``45s``, ``5m``, ``2h03m`` or ``3d04h`` (``-`` prefix
    for negative values, i.e. times in the future)."""
    if ms < 0:
        return "-" + fmt_age(-ms)
    s = ms / 1000
    if s < 10:
        return f"{s:.1f}s".replace(".0s", "s")
    total = int(s)
    if total < 60:
        return f"{total}s"
    minutes, sec = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s" if sec else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def fmt_seconds(s: float) -> str:
    """A duration in seconds, as :func:`fmt_age` writes it."""
    return fmt_age(s * 1000)


def checkpoint_label(cp: Checkpoint) -> str:
    """``checkpoint 1b2c3d4e 'nightly', expires 2026-11-23T10:00:00Z`` (a writer checkpoint
    names its epoch; no expiry is spelled out)."""
    kind = "writer checkpoint" if cp.writer_epoch is not None else "checkpoint"
    parts = [f"{kind} {str(cp.id)[:8]}"]
    if cp.name:
        parts[0] += f" {cp.name!r}"
    if cp.writer_epoch is not None:
        parts.append(f"epoch {cp.writer_epoch}")
    if cp.expire_time_s is None:
        parts.append("no expiry")
    else:
        parts.append(f"expires {fmt_time(cp.expire_time_s * 1000)}")
    return ", ".join(parts)


def manifest_label(manifest_id: int, latest_id: int, pins: list[Checkpoint]) -> str:
    """``manifest 42 (latest)`` or ``manifest 17 (checkpoint …; checkpoint …)``."""
    roles = []
    if manifest_id == latest_id:
        roles.append("latest")
    roles += [checkpoint_label(c) for c in pins]
    return f"manifest {manifest_id} ({'; '.join(roles)})" if roles else f"manifest {manifest_id}"
