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
import difflib
import re
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

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


# ------------------------------------------------------------ compaction (slate, jobs)
def parse_sources(text: str | None) -> list[str] | None:
    """``--sources l0:<ULID>,sr:3`` as a list (None when not given).

    Raises:
        InvalidArgumentError: an empty list.
    """
    if text is None:
        return None
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise InvalidArgumentError("--sources needs at least one source (l0:<ULID> or sr:<id>)")
    return items


def parse_positive(text: str | None, what: str, *, size: bool = False) -> int | None:
    """A positive integer (or a size such as ``64MiB``), None when not given.

    Raises:
        InvalidArgumentError: not a positive number.
    """
    if text is None:
        return None
    if size:
        value = parse_size(text, what=what)
    else:
        try:
            value = int(text)
        except ValueError:
            raise InvalidArgumentError(f"{what} must be a positive integer, got {text!r}") \
                from None
    if value < 1:
        raise InvalidArgumentError(f"{what} must be positive, got {text!r}")
    return value


def add_compaction_args(p: argparse.ArgumentParser) -> None:
    """The compaction options shared by ``slate compact`` and ``jobs/compact.py``."""
    which = p.add_mutually_exclusive_group()
    which.add_argument("--policy", help="size-tiered (default, or [compaction] policy: 0.17's "
                       "scheduler, keeps sorted runs bounded), l0 (every L0 into a new run), "
                       "full (everything into one bottom run)")
    which.add_argument("--sources", help="explicit sources instead of a policy: "
                       "l0:<view ULID>,sr:<run id>,...")
    p.add_argument("--max-sst-size", help="target output SST size, e.g. 256MiB")
    p.add_argument("--parallelism", help="key ranges run at once (default: the cores)")
    p.add_argument("--dry-run", action="store_true",
                   help="plan and split only; write nothing (the report says who holds the "
                        "compactor epoch)")
    p.add_argument("--takeover", action="store_true",
                   help="fence the compactor that holds the epoch even when it is not "
                        "slatelib's (an official 0.17 compactor, a coordinator). Only after "
                        "turning it off: a live official writer with its embedded compactor "
                        "on closes with Closed(FENCED)")


def parse_args_suggesting(parser: argparse.ArgumentParser,
                          argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that an unknown option is reported with the usage
    of the subcommand it was given to (not the top-level one) and the closest options that
    subcommand takes (``--strat: did you mean --start?``); exits 2 as argparse does."""
    tokens = list(sys.argv[1:] if argv is None else argv)
    args, extras = parser.parse_known_args(tokens)
    if extras:
        unknown_option_error(parser, tokens, extras)
    return args


def unknown_option_error(parser: argparse.ArgumentParser, argv: Sequence[str],
                         extras: Sequence[str]) -> NoReturn:
    """Exit 2 with the usage of the command ``argv`` names (not the top-level one) and, for
    each misspelled option, the closest options that command takes."""
    command = parser
    for token in argv:
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if not nested:
            break
        if token in nested[0].choices:
            command = nested[0].choices[token]
    options = sorted(command._option_string_actions)
    hints = []
    for extra in extras:
        name = extra.split("=", 1)[0]
        if name.startswith("-"):
            close = difflib.get_close_matches(name, options, n=2, cutoff=0.6)
            if close:
                hints.append(f"{name}: did you mean {' or '.join(close)}?")
    message = f"unrecognized arguments: {' '.join(extras)}"
    if hints:
        message += " (" + "; ".join(hints) + ")"
    command.error(message)
