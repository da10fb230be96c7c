"""Command-line flags shared by ``slate`` and the jobs, checked while parsing.

argparse alone lets a few mistakes through quietly: ``--limit -1`` is a valid ``int``,
``--sst-size 0`` falls back to the default, and of ``--dry-run --no-dry-run`` the last one
wins (so that spelling deletes). The argument types and the action here refuse them while
parsing, so the process exits with code 2 (invalid input) and argparse's message names the
flag::

    p.add_argument("--limit", type=whole_number(minimum=0))
    p.add_argument("--sst-size", type=size(minimum=1))
    p.add_argument("--dry-run", action=OnOffFlag, default=None)

Two different flags that contradict each other go in an argparse mutually exclusive group
(its message names both).
"""

from __future__ import annotations

import argparse
import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from slatelib.config import parse_size
from slatelib.errors import InvalidArgumentError

_DASH_VALUE = re.compile(r"^-\d")


def whole_number(*, minimum: int = 0) -> Callable[[str], int]:
    """An argparse ``type``: a whole number of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a whole number of at least {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {text!r}")
        return value

    return parse


def size(*, minimum: int = 1) -> Callable[[str], int]:
    """An argparse ``type``: a size in bytes (``4096``, ``64MiB``) of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = parse_size(text, what="size")
        except InvalidArgumentError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("size: ")) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum} bytes, got {text!r}")
        return value

    return parse


class OnOffFlag(argparse.BooleanOptionalAction):
    """``--x`` / ``--no-x`` (as :class:`argparse.BooleanOptionalAction`) that refuses to be
    given both ways in one command line; repeating the same spelling is harmless."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        # id(namespace) -> (the namespace, the first spelling given, its value); a Namespace
        # is not hashable, and the entry goes when the namespace does.
        self._given: dict[int, tuple[weakref.ref[argparse.Namespace], str, bool]] = {}

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if option_string is None or option_string not in self.option_strings:
            return
        value = not option_string.startswith("--no-")
        key = id(namespace)
        first = self._given.get(key)
        if first is None or first[0]() is not namespace:
            given = self._given
            self._given[key] = (weakref.ref(namespace, lambda _: given.pop(key, None)),
                                option_string, value)
        elif first[2] != value:
            raise argparse.ArgumentError(
                None, f"{first[1]} and {option_string} contradict each other: give one of them")
        setattr(namespace, self.dest, value)


def accept_dash_values(parser: argparse.ArgumentParser) -> None:
    """Let a value such as ``--min-age -5min`` reach the option's own check ("must not be
    negative") instead of argparse's "expected one argument" (argparse takes only plain
    negative numbers as values). Only for parsers without options that start with a digit."""
    parser._negative_number_matcher = _DASH_VALUE


__all__ = ["OnOffFlag", "accept_dash_values", "size", "whole_number"]
