"""The docs site (``make docs``, mkdocs.yml): the generated CLI and job reference lists every
``slate`` command and every job with all of their flags, and the README's and the nav's
links point at files that exist."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "docs" / "hooks" / "reference.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REF = _generator()


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    rendered: dict[str, str] = REF.render_pages()
    return rendered


def _sections(page: str) -> dict[str, str]:
    """Heading (the command, without backticks) -> the text up to the next heading."""
    parts = re.split(r"^#{2,4} `([^`]+)`$", page, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def _commands(parser: argparse.ArgumentParser, prefix: str) -> dict[str, argparse.ArgumentParser]:
    return {" ".join((prefix, *path)): sub for path, sub in REF.walk(parser)}


def test_every_slate_command_and_flag_is_in_the_reference(pages: dict[str, str]) -> None:
    sections = _sections(pages[REF.CLI_PAGE])
    commands = _commands(REF.slate_parser(), "slate")
    assert {"slate", "slate get", "slate gc", "slate config show"} <= set(commands)
    assert set(sections) == set(commands)
    for command, parser in commands.items():
        flags = REF.option_strings(parser)
        assert flags, command
        for flag in flags:
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", sections[command]), (
                f"{flag} of {command} is missing from the reference")


def test_every_job_and_flag_is_in_the_reference(pages: dict[str, str]) -> None:
    sections = _sections(pages[REF.JOBS_PAGE])
    parsers = REF.job_parsers()
    assert {"compact", "gc", "rescale", "export"} <= set(parsers)
    expected: dict[str, argparse.ArgumentParser] = {}
    for job, parser in parsers.items():
        expected.update(_commands(parser, f"slate-spark {job}"))
    assert "slate-spark rescale split" in expected
    assert set(sections) == set(expected)
    for command, parser in expected.items():
        for flag in REF.option_strings(parser):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", sections[command]), (
                f"{flag} of {command} is missing from the job reference")
        assert "usage: " + command in sections[command]


def test_sections_find_a_missing_flag() -> None:
    """The check above can fail: a page without one flag is caught."""
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--keep")
    parser.add_argument("--lost")
    page = "## `x`\n\n```text\nusage: x [--keep KEEP]\n```\n"
    text = _sections(page)["x"]
    missing = [f for f in REF.option_strings(parser)
               if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text)]
    assert missing == ["-h", "--help", "--lost"]


def test_the_generator_script_prints_the_pages() -> None:
    """What the MkDocs hook runs: the script, in a fresh interpreter, from the repo root."""
    done = subprocess.run([sys.executable, str(GENERATOR)], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    pages = json.loads(done.stdout)
    assert set(pages) == {REF.CLI_PAGE, REF.JOBS_PAGE}
    assert "## `slate scan`" in pages[REF.CLI_PAGE]
    assert "## `slate-spark gc`" in pages[REF.JOBS_PAGE]


def _local_links(text: str) -> list[str]:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    return [link for link in links if "://" not in link]


def test_readme_links_resolve() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = _local_links(readme)
    assert "docs/guides/compaction.md" in links
    missing = [link for link in links if not (REPO / link).exists()]
    assert missing == []
    assert len(readme.splitlines()) < 200


def test_nav_pages_exist_or_are_generated() -> None:
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    nav = re.findall(r":\s+([\w/.-]+\.md)\s*$", text, flags=re.M)
    generated = {REF.CLI_PAGE, REF.JOBS_PAGE, "rfcs/index.md"}
    assert generated <= set(nav)
    missing = [p for p in nav if p not in generated and not (REPO / "docs" / p).is_file()]
    assert missing == []
