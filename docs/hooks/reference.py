"""The CLI and job reference of the docs site, rendered from the argument parsers.

``render_pages()`` returns the generated pages (path under ``docs/`` -> Markdown): the
``slate`` reference (every subcommand's usage and options, from
``slatelib.cli.app.build_parser``) and the job reference (every Spark job's, from each job
module's ``build_parser``). Nothing here is written by hand, so the reference cannot drift
from the parsers; ``tests/unit/test_docs_reference.py`` checks that it lists every command
and flag.

Run with the project's Python (it imports slatelib and the jobs):
``python docs/hooks/reference.py`` prints the pages as one JSON object, which is how the
MkDocs hook (``docs/hooks/mkdocs_reference.py``, run by the docs venv) gets them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]

LAUNCHER_MODULES = ("slatelib.jobs.launcher", "jobs.launcher")
"""Where ``slate-spark``'s job table (``JOBS``: job name -> module) lives, newest first.
THE place to fix when the jobs move: the first module that imports wins, and each job's
parser comes from ``<its module>.build_parser()``."""

CLI_PAGE = "reference/cli.md"
JOBS_PAGE = "reference/jobs.md"
WIDTH = "100"


def job_modules() -> dict[str, ModuleType]:
    """Each job's name -> its imported module (the one with ``build_parser``)."""
    errors: list[str] = []
    for name in LAUNCHER_MODULES:
        try:
            launcher = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise  # the launcher is there but one of its imports is not
            errors.append(f"{name}: {exc}")
            continue
        table: dict[str, str] = launcher.JOBS
        return {job: importlib.import_module(module) for job, module in table.items()}
    raise ImportError("no job launcher found (" + "; ".join(errors) + "): fix LAUNCHER_MODULES")


def job_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each job's name -> its argument parser."""
    return {job: module.build_parser() for job, module in job_modules().items()}


def slate_parser() -> argparse.ArgumentParser:
    """The ``slate`` CLI's parser."""
    from slatelib.cli.app import build_parser

    return build_parser()


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
         ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (command path, parser) under ``parser``, itself first, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, (*path, name))


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every ``--flag``/``-f`` that ``parser`` itself accepts."""
    return [s for a in parser._actions for s in a.option_strings]


def _help(parser: argparse.ArgumentParser, prog: str) -> str:
    saved = parser.prog
    parser.prog = prog
    try:
        return parser.format_help().rstrip()
    finally:
        parser.prog = saved


def _section(prog: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    return [f"{'#' * level} `{prog}`", "", "```text", _help(parser, prog), "```", ""]


def render_cli() -> str:
    """The ``slate`` reference page."""
    root = slate_parser()
    out = ["# `slate` command reference", "",
           "Generated from the argument parsers (`slatelib.cli.app.build_parser`) when the "
           "site is built; `slate COMMAND --help` prints the same. The global options may "
           "come before or after the command. For what the commands are for, see the "
           "[CLI guide](../guides/cli.md); for exit codes, [Exit codes](exit-codes.md).", ""]
    out += _section("slate", root, 2)
    for path, parser in walk(root):
        if path:
            out += _section(" ".join(("slate", *path)), parser, 2 if len(path) == 1 else 3)
    return "\n".join(out)


def render_jobs() -> str:
    """The Spark job reference page."""
    out = ["# Spark job reference", "",
           "Generated from each job's argument parser when the site is built. Every job runs "
           "as `slate-spark JOB [options]` or `spark-submit jobs/JOB.py [options]` (the same "
           "options, report and exit codes; see [Install](../guides/install.md) and "
           "[Running on a cluster](../guides/cluster.md)).", ""]
    for job, parser in job_parsers().items():
        for path, sub in walk(parser):
            out += _section(" ".join(("slate-spark", job, *path)), sub, 2 + len(path))
    return "\n".join(out)


def render_pages() -> dict[str, str]:
    """Path under ``docs/`` -> generated Markdown."""
    os.environ["COLUMNS"] = WIDTH  # argparse wraps help to the terminal's width
    return {CLI_PAGE: render_cli(), JOBS_PAGE: render_jobs()}


def main() -> int:
    sys.path.insert(0, str(ROOT))  # the checkout's jobs/ when the jobs are not installed
    json.dump(render_pages(), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
