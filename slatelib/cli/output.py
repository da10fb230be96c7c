"""Human output for ``slate``: output and key formats, sizes, ISO times, tables, headlines.

Rules (also in docs/guides/cli.md):

* ``--format table|json`` (a global option): ``table`` by default when stdout is a terminal,
  ``json`` otherwise, so scripts and pipes keep getting the JSON they got before.
* Keys typed on the command line, and the ``"key"``/``"value"`` fields of ``load``'s input:
  a ``hex:``, ``b64:`` (or ``base64:``) or ``utf8:`` prefix always says how to read the
  rest; without a prefix the key is read in ``--key-format`` (values: ``--value-format``)
  when given, else in the argument's default. ``get --key`` and ``clone`` ranges default to
  UTF-8; every other key (``get KEY``, ``scan --start/--end``, ``load``) defaults to
  ``auto``: hex when the text is an even number of hex digits (the older form, so existing
  scripts keep working), UTF-8 text otherwise (``user:1``). Write ``utf8:cafe`` for the
  text key ``cafe``.
* Keys shown in tables: in ``--key-format`` when given, else as text when they are printable
  UTF-8 and ``hex:…`` otherwise (the same syntax ``--key`` accepts, so it can be pasted
  back). JSON keeps ``"key"`` in hex and adds ``"key_utf8"`` or ``"key_base64"`` when
  ``--key-format`` asks for one. Values follow ``--value-format`` the same way (``"value"``
  in hex, plus ``"value_utf8"`` or ``"value_base64"``); with ``--value-format utf8`` a value
  that is not valid UTF-8 is an error naming its key.
* Times are UTC ISO 8601 (``2026-11-22T03:14:25Z``); sizes in tables are decimal units.
"""

from __future__ import annotations

import base64
import binascii
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from slatelib.core.humanize import fmt_bytes, fmt_count, fmt_key, fmt_seconds
from slatelib.errors import InvalidArgumentError

FORMATS = ("table", "json")
KEY_FORMATS = ("utf8", "hex", "base64")
VALUE_FORMATS = KEY_FORMATS
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_PREFIXES = (("hex:", "hex"), ("b64:", "base64"), ("base64:", "base64"), ("utf8:", "utf8"))


def resolve_format(given: str | None, *, isatty: bool | None = None) -> str:
    """``given``, or ``table`` on a terminal and ``json`` otherwise."""
    if given:
        return given
    tty = sys.stdout.isatty() if isatty is None else isatty
    return "table" if tty else "json"


def looks_hex(text: str) -> bool:
    """True when ``text`` is a non-empty, even number of hex digits (``auto`` reads it as
    hex)."""
    return bool(text) and len(text) % 2 == 0 and all(c in _HEX_DIGITS for c in text)


def parse_key(text: str, *, default: str = "utf8", what: str = "key") -> bytes:
    """A key typed on the command line (module docstring): a prefix, else ``default``
    (``utf8``, ``hex``, ``base64`` or ``auto``).

    Raises:
        InvalidArgumentError: bad hex or base64, or an empty prefixed key.
    """
    return parse_bytes(text, default=default, what=what, allow_empty=False)


def parse_bytes(text: str, *, default: str = "utf8", what: str = "key",
                allow_empty: bool = True) -> bytes:
    """Bytes typed as :func:`parse_key` reads keys; ``allow_empty=False`` refuses an empty
    prefixed key.

    Raises:
        InvalidArgumentError: bad hex or base64 (with a hint to the text form), or an empty
            prefixed key when ``allow_empty`` is False.
    """
    fmt, body = default, text
    for prefix, name in _PREFIXES:
        if text.startswith(prefix):
            fmt, body = name, text[len(prefix):]
            break
    if fmt == "auto":
        fmt = "hex" if looks_hex(body) else "utf8"
    if fmt == "utf8":
        key = body.encode("utf-8")
    elif fmt == "hex":
        try:
            key = bytes.fromhex(body)
        except ValueError:
            raise InvalidArgumentError(
                f"{what} {text!r}: not hex digits" + (
                    " after 'hex:'" if body != text else
                    f" (for text, write utf8:{text} or leave out a hex --key-format)")
            ) from None
    elif fmt == "base64":
        try:
            key = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgumentError(
                f"{what} {text!r}: not base64" + (
                    "" if body != text else f" (for text, write utf8:{text})")) from None
    else:
        raise InvalidArgumentError(f"{what}: unknown key format {fmt!r}")
    if not key and body != text and not allow_empty:
        raise InvalidArgumentError(f"{what} {text!r} is empty (leave it out for unbounded)")
    return key


def _printable(b: bytes) -> str | None:
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return s if s.isprintable() else None


def show_bytes(b: bytes | None, key_format: str | None = None, *, limit: int = 0) -> str:
    """``b`` for a table (module docstring); ``limit`` > 0 shortens it with ``…``."""
    if b is None:
        return "-"
    if key_format == "hex":
        out = b.hex()
    elif key_format == "base64":
        out = base64.b64encode(b).decode("ascii")
    else:
        text = _printable(b)
        if text is None:
            out = "hex:" + b.hex() if key_format is None else "(not UTF-8) hex:" + b.hex()
        elif key_format is None and any(text.startswith(p) for p, _ in _PREFIXES):
            out = "utf8:" + text
        else:
            out = text
    if limit and len(out) > limit:
        out = out[:limit - 1] + "…"
    return out


def key_fields(key: bytes, key_format: str | None) -> dict[str, Any]:
    """JSON fields for ``key``: ``key`` in hex, plus the ``--key-format`` rendering."""
    out: dict[str, Any] = {"key": key.hex()}
    if key_format == "utf8":
        try:
            out["key_utf8"] = key.decode("utf-8")
        except UnicodeDecodeError:
            out["key_utf8"] = None
    elif key_format == "base64":
        out["key_base64"] = base64.b64encode(key).decode("ascii")
    return out


def value_fields(value: bytes | None, value_format: str | None, *,
                 key: bytes) -> dict[str, Any]:
    """JSON fields for ``key``'s ``value``: ``value`` in hex (None: not found), plus the
    ``--value-format`` rendering (``value_utf8`` or ``value_base64``).

    Raises:
        InvalidArgumentError: ``--value-format utf8`` and the value is not UTF-8.
    """
    out: dict[str, Any] = {"value": None if value is None else value.hex()}
    if value_format == "utf8":
        out["value_utf8"] = None if value is None else _utf8_value(value, key)
    elif value_format == "base64":
        out["value_base64"] = None if value is None else base64.b64encode(value).decode("ascii")
    return out


def show_value(value: bytes, value_format: str | None, *, key: bytes, limit: int = 0) -> str:
    """``value`` for a table: in ``--value-format`` when given, else as :func:`show_bytes`.

    Raises:
        InvalidArgumentError: ``--value-format utf8`` and the value is not UTF-8.
    """
    if value_format == "utf8":
        _utf8_value(value, key)
    return show_bytes(value, value_format, limit=limit)


def _utf8_value(value: bytes, key: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(
            f"the value of key {fmt_key(key)} is not valid UTF-8 (byte {exc.start}); "
            "read it with --value-format hex or base64") from None


def iso_s(seconds: int | float | None) -> str | None:
    """Unix seconds as ``2026-11-22T03:14:25Z`` (None stays None)."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{seconds}s"


def iso_ms(ms: int | None) -> str | None:
    """Unix milliseconds as ISO 8601, to the second (None stays None)."""
    return None if ms is None else iso_s(ms / 1000)








def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Rows as left-aligned columns under ``headers`` (numbers right-aligned)."""
    body = [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in body:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    numeric = [all(_is_number(r[i]) for r in body) and bool(body) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if num else c.ljust(w)
               for c, w, num in zip(cells, widths, numeric, strict=True)]
        return "  ".join(out).rstrip()

    return "\n".join([line(list(headers)), *(line(r) for r in body)]) + "\n"


def _is_number(text: str) -> bool:
    t = text.replace(",", "").replace(".", "", 1).split(" ")[0]
    return t.isdigit() or text == "-"


def _skip(key: str, obj: Mapping[str, Any]) -> bool:
    """Epoch fields with an ISO twin (``create_time_s`` next to ``create_time``)."""
    for suffix in ("_s", "_ms"):
        if key.endswith(suffix) and key[: -len(suffix)] in obj:
            return True
    return False


def generic(obj: Any, indent: str = "") -> str:
    """Any JSON value as indented ``name: value`` lines; lists of objects as tables."""
    if isinstance(obj, Mapping):
        lines = []
        for k, v in obj.items():
            if _skip(str(k), obj):
                continue
            if isinstance(v, Mapping) and v:
                lines.append(f"{indent}{k}:\n" + generic(v, indent + "  ").rstrip("\n"))
            elif isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v):
                lines.append(f"{indent}{k}: ({len(v)})\n" + _indent(_dict_table(v), indent + "  "))
            else:
                lines.append(f"{indent}{k}: {_scalar(v)}")
        return "\n".join(lines) + "\n"
    if isinstance(obj, list) and obj and all(isinstance(x, Mapping) for x in obj):
        return _indent(_dict_table(obj), indent)
    return f"{indent}{_scalar(obj)}\n"


def _indent(text: str, indent: str) -> str:
    return "".join(indent + line + "\n" for line in text.splitlines())


def _dict_table(items: Sequence[Mapping[str, Any]]) -> str:
    headers: list[str] = []
    for it in items:
        headers += [k for k in it if k not in headers and not _skip(k, it)]
    return table(headers, [[_scalar(it.get(h)) for h in headers] for it in items])


def _scalar(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return ", ".join(_scalar(x) for x in v) if v else "-"
    if isinstance(v, Mapping):
        return ", ".join(f"{k}={_scalar(x)}" for k, x in v.items()) if v else "-"
    return str(v)


__all__ = ["FORMATS", "KEY_FORMATS", "VALUE_FORMATS", "looks_hex", "parse_bytes",
           "show_value", "value_fields", "fmt_bytes", "fmt_count", "fmt_seconds", "generic",
           "iso_ms", "iso_s", "key_fields", "parse_key", "resolve_format", "show_bytes",
           "table"]
