"""tests/unit mirrors the source tree, so that a module's tests are found by its path.

``tests/unit/<pkg>/.../test_<module>[_<topic>].py`` tests ``slatelib/<pkg>/.../<module>.py``
or the package ``slatelib/<pkg>/.../<module>/`` (e.g. ``tests/unit/ops/compaction/
test_commit.py`` -> ``slatelib/ops/compaction/commit.py``, ``tests/unit/cli/
test_read_cmds_sst.py`` -> ``slatelib/cli/read_cmds.py``); ``tests/unit/test_<module>*.py``
tests a top-level module of ``slatelib/``; ``tests/unit/jobs/test_<module>*.py`` tests
``slatelib/jobs/<module>.py`` or ``slatelib/jobs/_<module>.py`` (likewise ``tests/unit/ops/engine/`` and the
engine's private ``_<module>.py``). A test of something that no single module owns
is listed in :data:`CROSS_CUTTING`, with the reason. Helpers (``support.py``, ``_*.py``,
``conftest.py``) are not test files and may sit anywhere.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "tests" / "unit"

CROSS_CUTTING: dict[str, str] = {
    "test_layout.py": "this check: the layout of tests/unit itself",
    "test_layers.py": "the import contract of docs/design.md, over every package",
    "test_doc_citations.py": "citations in the code and the docs, over every file",
    "test_docs_site.py": "the docs site: its generated CLI and job reference covers every "
                         "parser, and the README's links resolve",
    "jobs/test_db_paths.py": "jobs/gc.py and jobs/compact.py alike, on paths that are not "
                             "database roots",
}
"""Test files (relative to tests/unit) that test no single module, and why."""

ALIASES = {REPO / "slatelib" / "ops" / "compact.py"}
"""Modules that only re-export another module's API for users (``slatelib.ops.compact`` ->
:mod:`slatelib.ops.compaction`): tests are named for where the code lives, not for these."""

PRIVATE_MODULES = {"jobs", "engine"}
"""Directories whose ``_<module>.py`` files are tested by ``test_<module>*.py`` (``slatelib/jobs/``,
and ``slatelib/ops/engine/``, whose modules are all private to its package)."""


def source_root(test_dir: Path) -> Path:
    """The source directory that ``test_dir`` (a directory below tests/unit) mirrors."""
    return REPO / "slatelib" / test_dir.relative_to(UNIT)


def mirrored_modules(test_file: Path) -> list[Path]:
    """The source modules or packages that ``test_file`` may be named for: every prefix of
    its name (split at ``_``) that is a module or package in the mirrored directory."""
    words = test_file.stem.removeprefix("test_").split("_")
    src = source_root(test_file.parent)
    found: list[Path] = []
    for n in range(1, len(words) + 1):
        name = "_".join(words[:n])
        for candidate in (src / f"{name}.py", src / f"_{name}.py", src / name / "__init__.py"):
            if (candidate.is_file() and candidate not in ALIASES
                    and (candidate.name != f"_{name}.py" or src.name in PRIVATE_MODULES)):
                found.append(candidate)
    return found


def unit_test_files() -> list[Path]:
    return sorted(UNIT.rglob("test_*.py"))


def test_every_unit_test_file_is_named_for_the_module_it_tests() -> None:
    orphans = [str(p.relative_to(UNIT)) for p in unit_test_files()
               if str(p.relative_to(UNIT)) not in CROSS_CUTTING and not mirrored_modules(p)]
    assert orphans == [], (
        "test files under tests/unit that mirror no source module (move the file to "
        "tests/unit/<package>/test_<module>[_<topic>].py, or list it in CROSS_CUTTING with "
        f"the reason): {orphans}")


def test_every_test_directory_mirrors_a_package_and_is_importable() -> None:
    bad = []
    for d in sorted({p.parent for p in unit_test_files()}):
        if d != UNIT and not source_root(d).is_dir():
            bad.append(f"{d.relative_to(REPO)}: no {source_root(d).relative_to(REPO)}/")
        if not (d / "__init__.py").is_file():
            bad.append(f"{d.relative_to(REPO)}: no __init__.py (tests import as tests.unit...)")
    assert bad == [], bad


def test_cross_cutting_entries_are_still_cross_cutting() -> None:
    """The exception list stays short and true: each entry exists and mirrors no module."""
    stale = [name for name in CROSS_CUTTING
             if not (UNIT / name).is_file() or mirrored_modules(UNIT / name)]
    assert stale == [], f"remove or rename these CROSS_CUTTING entries: {stale}"


def test_the_mirror_rule_itself() -> None:
    assert mirrored_modules(UNIT / "ops" / "compaction" / "test_commit.py") == [
        REPO / "slatelib" / "ops" / "compaction" / "commit.py"]
    assert mirrored_modules(UNIT / "cli" / "test_read_cmds_sst.py") == [
        REPO / "slatelib" / "cli" / "read_cmds.py"]
    assert mirrored_modules(UNIT / "core" / "test_gc_rules_x.py") == [
        REPO / "slatelib" / "core" / "gc_rules" / "__init__.py"]
    assert mirrored_modules(UNIT / "jobs" / "test_common.py") == [
        REPO / "slatelib" / "jobs" / "_common.py"]
    assert mirrored_modules(UNIT / "ops" / "test_compact_commit.py") == []  # an alias only
    assert mirrored_modules(UNIT / "ops" / "test_nothing.py") == []
