"""``slate``: parser, global options, dispatch and error reporting.

Command groups live in their own modules, each with ``register(subparsers)``; add new
ones to :data:`COMMAND_MODULES`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slatelib.config import Settings, load_settings
from slatelib.errors import (
    InvalidArgumentError,
    NotADatabaseRootError,
    PathIsFileError,
    SlateError,
)
from slatelib.exit_codes import (  # re-exported: commands and tests import them from here
    EXIT_COMPACTOR_ACTIVE,
    EXIT_CONFLICT,
    EXIT_DATA,
    EXIT_ERROR,
    EXIT_FENCED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    exit_code_for,
)
from slatelib.objstore import ObjectStore, open_store, split_db_url
from slatelib.paths import normalize_path

COMMAND_MODULES = [
    "slatelib.cli.read_cmds",
    "slatelib.cli.admin_cmds",
    "slatelib.cli.gc_cmds",
    "slatelib.cli.compact_cmds",
]

__all__ = [
    "EXIT_COMPACTOR_ACTIVE", "EXIT_CONFLICT", "EXIT_DATA", "EXIT_ERROR", "EXIT_FENCED",
    "EXIT_OK", "EXIT_UNAVAILABLE", "EXIT_USAGE", "Context", "build_parser", "exit_code_for",
    "main",
]


@dataclass
class Context:
    """What every command gets: the store, the database path and the settings."""

    args: argparse.Namespace
    settings: Settings
    store_url: str | None
    path: str | None
    _store: ObjectStore | None = None

    @property
    def store(self) -> ObjectStore:
        if self._store is None:
            if not self.store_url:
                raise InvalidArgumentError("no store given: use --db URL or --store URL --path PATH")
            try:
                self._store = open_store(self.store_url)
            except PathIsFileError as err:
                if self.path is None:
                    raise
                raise NotADatabaseRootError(self.path, file=err.file) from err
        return self._store

    @property
    def db_path(self) -> str:
        if self.path is None:
            raise InvalidArgumentError("no database path given: use --db URL or --path PATH")
        return self.path

    def emit(self, obj: Any) -> None:
        sys.stdout.write(json.dumps(obj, sort_keys=False) + "\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="slate", description="Inspect and maintain SlateDB 0.17 databases on object storage."
    )
    p.add_argument("--db", help="database URL, e.g. file:///data/db or s3://bucket/prefix/db")
    p.add_argument("--store", help="object store URL (file:///dir, memory:///, s3://bucket, ...)")
    p.add_argument("--path", help="database path inside the store")
    p.add_argument("--conf", action="append", default=[], help="settings TOML (repeatable)")
    p.add_argument("--merge-operator", help="merge operator for reads (builtin: concat)")
    p.add_argument("-v", "--verbose", action="count", default=0)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return p


def _context(args: argparse.Namespace) -> Context:
    settings = load_settings(args.conf)
    store_url, path = args.store, args.path
    if args.db:
        if store_url or path:
            raise InvalidArgumentError("--db cannot be combined with --store/--path")
        store_url, path = split_db_url(args.db)
    if path is not None:
        path = normalize_path(path, what="--path")
    return Context(args=args, settings=settings, store_url=store_url, path=path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr,
    )
    try:
        ctx = _context(args)
        code: int | None = args.func(ctx)
        sys.stdout.flush()
        return EXIT_OK if code is None else code
    except SlateError as exc:
        sys.stderr.write(f"slate {args.command}: error: {exc}\n")
        return exit_code_for(exc)
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
