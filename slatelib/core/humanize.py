"""Numbers as people read them, for headlines, progress lines and tables. Pure."""

from __future__ import annotations

__all__ = ["KEY_PREFIXES", "fmt_bytes", "fmt_count", "fmt_key", "fmt_seconds"]

KEY_PREFIXES = ("hex:", "b64:", "base64:", "utf8:")
"""The prefixes that say how a typed key is spelled (:func:`slatelib.cli.output.parse_key`)."""


def fmt_bytes(n: int | float | None) -> str:
    """``1.8 MB``-style decimal size (``-`` for unknown)."""
    if n is None:
        return "-"
    if n < 1000:
        return f"{int(n)} B"
    units = ("kB", "MB", "GB", "TB", "PB")
    value = float(n)
    for i, unit in enumerate(units):
        value /= 1000
        if value < 1000 or i == len(units) - 1:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")

def fmt_count(n: int) -> str:
    """``42,772``."""
    return f"{n:,}"


def fmt_seconds(s: float) -> str:
    """``1.7 s``, or ``0.14 s`` below a second."""
    return f"{s:.1f} s" if s >= 1 else f"{s:.2f} s"


def fmt_key(key: bytes | None) -> str:
    """A key as a person types it back: its text when it is printable UTF-8 (``utf8:``
    before text that starts like a prefix or holds ``,``, ``[`` or ``)``), else ``hex:…``;
    ``-`` for None."""
    if key is None:
        return "-"
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + key.hex()
    if not text or not text.isprintable():
        return "hex:" + key.hex()
    if text.startswith(KEY_PREFIXES) or any(c in text for c in ",[]()"):
        return "utf8:" + text
    return text
