"""``slate``: parser, global options, dispatch and error reporting.

Command groups live in their own modules, each with ``register(subparsers)``; add new
ones to :data:`COMMAND_MODULES`. The global options (:data:`GLOBAL_OPTIONS`) are accepted
before the subcommand and after it (``slate summary --db X``); ``--conf``, ``--env-file`` and ``-v`` add up
from both places, and any other given in both places must have the same value.
``--format table|json`` and ``--key-format`` are global too (rules in
:mod:`slatelib.cli.output`): commands print with :meth:`Context.emit` and end work with
:meth:`Context.headline` (stderr).

Commands resolve checkpoint ids with :meth:`Context.checkpoint_id` (a full UUID, or a unique
prefix of one of the database's checkpoints) and database paths with
:meth:`Context.path_in_store` (a path in the store, or a URL inside it).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import json
import logging
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slatelib.cli.output import FORMATS, KEY_FORMATS, VALUE_FORMATS, generic, resolve_format
from slatelib.config import Settings, load_env_files, load_settings
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
from slatelib.flags import parse_args_suggesting
from slatelib.objstore import ObjectStore, open_store, split_db_url, with_wal_store
from slatelib.objstore.registry import set_store_defaults
from slatelib.objstore.url import split_store_url
from slatelib.paths import normalize_path

COMMAND_MODULES = [
    "slatelib.cli.read_cmds",
    "slatelib.cli.admin_cmds",
    "slatelib.cli.gc_cmds",
    "slatelib.cli.compact_cmds",
    "slatelib.cli.config_cmds",
    "slatelib.cli.cas_cmds",
    "slatelib.cli.health_cmd",
]

GLOBAL_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--db",), {"metavar": "URL", "help": "database URL, e.g. file:///data/db or s3://bucket/prefix/db"}),
    (("--store",), {"metavar": "URL", "help": "object store URL (file:///dir, memory:///, s3://bucket, ...)"}),
    (("--path",), {"metavar": "PATH", "help": "database path inside the store (or a database URL)"}),
    (("--wal-store",), {"metavar": "URL",
                        "help": "object store that keeps the WAL SSTs (0.17's "
                                "with_wal_object_store), e.g. s3://wal-bucket; the database "
                                "path is the same in it; '' : none (default: [object_store] "
                                "wal_store, SLATELIB_WAL_STORE)"}),
    (("--conf",), {"action": "append", "default": [], "metavar": "FILE", "help": "settings TOML (repeatable)"}),
    (("--env-file",), {"action": "append", "default": [], "metavar": "FILE",
                       "help": "load SLATELIB_*/AWS_*/GOOGLE_*/AZURE_* variables from a "
                               "dotenv-style file first (repeatable; the environment wins)"}),
    (("--merge-operator",), {"metavar": "NAME", "help": "merge operator for reads (builtin: concat)"}),
    (("--format",), {"choices": FORMATS, "default": None,
                     "help": "output: table (default on a terminal) or json (default otherwise)"}),
    (("--key-format",), {"choices": KEY_FORMATS, "default": None,
                         "help": "how keys without a hex:/b64:/utf8: prefix are read, and how "
                                 "keys are shown (default: read an even number of hex digits "
                                 "as hex and anything else as text; show text when "
                                 "printable, else hex:...)"}),
    (("--value-format",), {"choices": VALUE_FORMATS, "default": None,
                           "help": "how values are shown (tables; JSON adds value_utf8 or "
                                   "value_base64 next to the hex value) and how load reads "
                                   "values without a prefix; utf8 refuses a value that is not "
                                   "UTF-8, naming its key"}),
    (("-v", "--verbose"), {"action": "count", "default": 0}),
)
"""The options every command takes, before or after its name."""

_SUB_PREFIX = "_sub_"

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
    def wal_store_url(self) -> str:
        """The WAL store's URL ("" : none): ``--wal-store``, else ``SLATELIB_WAL_STORE``,
        else ``[object_store] wal_store`` (``_context`` puts the winner in the settings)."""
        return self.settings.object_store.wal_store

    @property
    def store(self) -> ObjectStore:
        """The store of ``--db``/``--store``, with its WAL in the WAL store when one is set
        (:mod:`slatelib.objstore.wal_routing`)."""
        if self._store is None:
            if not self.store_url:
                raise InvalidArgumentError("no store given: use --db URL or --store URL --path PATH")
            try:
                main = open_store(self.store_url)
            except PathIsFileError as err:
                if self.path is None:
                    raise
                raise NotADatabaseRootError(self.path, file=err.file) from err
            self._store = with_wal_store(main, self.wal_store_url)
        return self._store

    @property
    def db_path(self) -> str:
        if self.path is None:
            raise InvalidArgumentError("no database path given: use --db URL or --path PATH")
        return self.path

    @property
    def db_name(self) -> str:
        """The database as reports name it: the ``--db`` URL, else ``--store``/``--path``
        joined."""
        db: str | None = getattr(self.args, "db", None)
        if db:
            return db
        return f"{(self.store_url or '').rstrip('/')}/{self.db_path}"

    @property
    def output_format(self) -> str:
        """``table`` or ``json``: ``--format``, else ``table`` on a terminal."""
        return resolve_format(getattr(self.args, "format", None))

    @property
    def key_format(self) -> str | None:
        """``--key-format`` (None: the default rules of :mod:`slatelib.cli.output`)."""
        fmt: str | None = getattr(self.args, "key_format", None)
        return fmt

    @property
    def value_format(self) -> str | None:
        """``--value-format`` (None: hex in JSON, text-or-hex in tables)."""
        fmt: str | None = getattr(self.args, "value_format", None)
        return fmt

    def emit(self, obj: Any, *, table: Callable[[], str] | None = None) -> None:
        """``obj`` as one JSON line, or in table format ``table()`` (default: a generic
        rendering of ``obj``)."""
        if self.output_format == "json":
            sys.stdout.write(json.dumps(obj, sort_keys=False) + "\n")
        else:
            sys.stdout.write(table() if table is not None else generic(obj))

    def headline(self, text: str) -> None:
        """The one-line summary a command that does work ends with, on stderr."""
        sys.stderr.write(f"slate {self.args.command}: {text}\n")

    def path_in_store(self, text: str, *, what: str) -> str:
        """A database path in this store from ``text``: a path, or a URL (``file:///…``,
        ``s3://bucket/…``) of a location inside the store of ``--db``/``--store``.

        Raises:
            InvalidArgumentError: a URL of another store (or outside ``--store``'s root).
        """
        if "://" not in text:
            return normalize_path(text, what=what)
        root, path = split_store_url(text, what=what)
        if not self.store_url:
            raise InvalidArgumentError(f"{what} {text!r}: a URL needs --db or --store too")
        base_root, base = split_store_url(self.store_url, what="store url")
        if root == base_root and (not base or path == base or path.startswith(base + "/")):
            rel = path[len(base):].lstrip("/") if base else path
            if rel:
                return normalize_path(rel, what=what)
        store = join_url(base_root, base)
        raise InvalidArgumentError(
            f"{what} {text!r} is not inside the store {store!r} of --db/--store: both "
            "databases must be in the same store (give a path, or a URL below it)")

    def checkpoint_id(self, text: str, *, db_path: str | None = None,
                      what: str = "checkpoint id") -> uuid.UUID:
        """A checkpoint id from a full UUID, or from a unique prefix (``ls`` and ``gc`` print
        8 characters) of the id of a checkpoint of ``db_path`` (default: the database).

        Raises:
            InvalidArgumentError: not hex, or a prefix that matches no checkpoint or several
                (the message lists the candidates).
        """
        try:
            return uuid.UUID(text)
        except ValueError:
            pass
        want = text.strip().lower().replace("-", "")
        if not want or any(c not in "0123456789abcdef" for c in want):
            raise InvalidArgumentError(
                f"{what} {text!r}: not a UUID or a prefix of one (hex digits)")
        from slatelib.ops.checkpoint import list_checkpoints

        path = self.db_path if db_path is None else db_path
        ids = [c.id for c in list_checkpoints(path, self.store)]
        matches = sorted({i for i in ids if i.hex.startswith(want)}, key=str)
        if len(matches) == 1:
            return matches[0]
        shown = matches or sorted(set(ids), key=str)
        listing = ", ".join(str(i) for i in shown[:20]) or "none"
        if len(shown) > 20:
            listing += f", ... ({len(shown)} in all)"
        if matches:
            raise InvalidArgumentError(
                f"{what} {text!r} is ambiguous in {path!r}: it starts {len(matches)} "
                f"checkpoint ids ({listing}); give more characters")
        raise InvalidArgumentError(
            f"{what} {text!r} matches no checkpoint of {path!r} (checkpoints: {listing})")


def as_typed(message: str, ctx: Context | None) -> str:
    """``message`` with the database's path in its store (``'data/db'``) written as the URL
    the user typed (``--db``, else ``--store`` and ``--path`` joined)."""
    if ctx is None or not ctx.path or not ctx.store_url:
        return message
    try:
        url = ctx.db_name
    except SlateError:
        return message
    return message.replace(repr(ctx.path), url)


def join_url(root: str, path: str) -> str:
    """``root`` (a store root URL) joined with ``path``."""
    if not path:
        return root
    return root + path if root.endswith("/") else f"{root}/{path}"


def package_version() -> str:
    """The installed slatelib version (``unknown`` when it is not installed)."""
    try:
        return importlib.metadata.version("slatelib")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


SLATEDB_VERSION = "0.17"
"""The SlateDB release whose on-disk format slatelib reads and writes."""


def version_text() -> str:
    """What ``slate --version`` prints: ``slatelib.__version__`` (the one source of the
    package's version; setuptools reads it into the metadata) and the SlateDB format
    versions: those written, then the range read."""
    from slatelib._version import __version__
    from slatelib.core.compactions import COMPACTIONS_FORMAT_VERSION
    from slatelib.format.manifest_codec import (
        MANIFEST_FORMAT_VERSION,
        SUPPORTED_MANIFEST_VERSIONS,
    )
    from slatelib.format.sst import SST_FORMAT_VERSION, SUPPORTED_SST_VERSIONS

    def span(versions: tuple[int, ...]) -> str:
        return f"v{min(versions)}-v{max(versions)}" if len(versions) > 1 else f"v{versions[0]}"

    return (f"slate {__version__} (SlateDB {SLATEDB_VERSION} format: writes manifest "
            f"v{MANIFEST_FORMAT_VERSION}, SST v{SST_FORMAT_VERSION}, compactions "
            f"v{COMPACTIONS_FORMAT_VERSION}; reads manifest {span(SUPPORTED_MANIFEST_VERSIONS)}, "
            f"SST {span(SUPPORTED_SST_VERSIONS)})")


class _VersionAction(argparse.Action):
    """``--version``: :func:`version_text` on one line (argparse's own action wraps it)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and the SlateDB format versions, then exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        sys.stdout.write(version_text() + "\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="slate", description="Inspect and maintain SlateDB 0.17 databases on object storage."
    )
    p.add_argument("--version", action=_VersionAction)
    for flags, kwargs in GLOBAL_OPTIONS:
        p.add_argument(*flags, **kwargs)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for command in _leaf_parsers(sub):
        group = command.add_argument_group("global options (also accepted before COMMAND)")
        for flags, kwargs in GLOBAL_OPTIONS:
            if any(f in command._option_string_actions for f in flags):
                continue  # the command's own option (config show --format toml|json)
            dest = flags[-1].lstrip("-").replace("-", "_")
            extra: dict[str, Any] = {"dest": _SUB_PREFIX + dest, "default": argparse.SUPPRESS}
            if not {"metavar", "choices"} & kwargs.keys() and kwargs.get("action") != "count":
                extra["metavar"] = dest.upper()  # not argparse's _SUB_...
            group.add_argument(*flags, **{**kwargs, **extra})
    return p


def _leaf_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> list[argparse.ArgumentParser]:
    """The parsers of every command, ``config show`` rather than ``config``."""
    out: list[argparse.ArgumentParser] = []
    for command in sub.choices.values():
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if nested:
            out.extend(_leaf_parsers(nested[0]))
        else:
            out.append(command)
    return out


def _merge_global_options(args: argparse.Namespace) -> None:
    """Fold the global options given after the subcommand into ``args``.

    Raises:
        InvalidArgumentError: an option given before and after with different values.
    """
    for flags, kwargs in GLOBAL_OPTIONS:
        dest = flags[-1].lstrip("-").replace("-", "_")
        sub_dest = _SUB_PREFIX + dest
        if not hasattr(args, sub_dest):
            continue
        late = getattr(args, sub_dest)
        delattr(args, sub_dest)
        early = getattr(args, dest)
        if kwargs.get("action") in ("append", "count"):
            setattr(args, dest, early + late)
        elif early is not None and early != late:
            raise InvalidArgumentError(
                f"{flags[-1]} given before and after {args.command} with different values "
                f"({early!r}, {late!r})")
        else:
            setattr(args, dest, late)


def _context(args: argparse.Namespace) -> Context:
    load_env_files(args.env_file)  # before anything reads the environment
    settings = load_settings(args.conf)
    if args.wal_store is not None:  # --wal-store wins over the settings, for every command
        settings = dataclasses.replace(settings, object_store=dataclasses.replace(
            settings.object_store, wal_store=args.wal_store.strip()))
    set_store_defaults(settings.object_store)
    store_url, path = args.store, args.path
    if path is not None and "://" in path and not store_url and not args.db:
        store_url, path = split_db_url(path)  # --path URL: as --db URL
    if args.db:
        if store_url or path:
            raise InvalidArgumentError("--db cannot be combined with --store/--path")
        store_url, path = split_db_url(args.db)
    if path is not None:
        path = normalize_path(path, what="--path")
    return Context(args=args, settings=settings, store_url=store_url, path=path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args_suggesting(parser, argv)
    try:
        _merge_global_options(args)
    except InvalidArgumentError as exc:
        parser.error(str(exc))
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr,
    )
    ctx: Context | None = None
    try:
        ctx = _context(args)
        code: int | None = args.func(ctx)
        sys.stdout.flush()
        return EXIT_OK if code is None else code
    except SlateError as exc:
        sys.stderr.write(f"slate {args.command}: error: {as_typed(str(exc), ctx)}\n")
        return exit_code_for(exc)
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
